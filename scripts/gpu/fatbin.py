"""Reading CUDA fat binaries inside a shared library: where each one is, and its entries.

A fat binary starts with the magic ``0xBA55ED50``, a 16-byte header and the size of
what follows: entries of machine code (kind 2, an ELF cubin for one ``sm_NN``) or PTX
(kind 1, for one ``compute_NN``), each a header (64 bytes or more: kind, header size,
padded payload size, ..., the architecture at byte 28) and its payload. The tools of
this folder (``sm90_fatbin.py``, ``slim_fatbin.py``, ``jit_warm.py``) and
``tests/test_gpu_setup.py`` all read them here.
"""
import mmap
import struct
from typing import NamedTuple

MAGIC = 0xBA55ED50
KIND_PTX, KIND_ELF = 1, 2


class Entry(NamedTuple):
    offset: int   # of its header, in the image
    header: int   # header size
    padded: int   # payload size, padded
    kind: int     # KIND_PTX or KIND_ELF
    arch: int     # 86 for compute_86 / sm_86

    @property
    def payload(self) -> slice:
        return slice(self.offset + self.header, self.offset + self.header + self.padded)


def fat_binaries(image) -> list[tuple[int, int]]:
    """(offset, size) of every fat binary in a mapped library (size without its header)."""
    found, i = [], 0
    magic = struct.pack("<I", MAGIC)
    while (j := image.find(magic, i)) >= 0:
        _, header, size = struct.unpack_from("<HHQ", image, j + 4)
        if header != 16 or size <= 0 or j + header + size > len(image):
            i = j + 4
            continue
        found.append((j, size))
        i = j + header + size
    return found


def entries(image, offset: int, size: int) -> list[Entry]:
    """The entries of the fat binary at ``offset`` whose content is ``size`` bytes."""
    found, p, end = [], offset + 16, offset + 16 + size
    while p + 64 <= end:
        kind, _, header, padded = struct.unpack_from("<HHIQ", image, p)
        if header < 64 or p + header + padded > end:
            break
        found.append(Entry(p, header, padded, kind, struct.unpack_from("<I", image, p + 28)[0]))
        p += header + padded
    return found


def mapped(path, writable: bool = False):
    """The library mapped into memory (read-only unless ``writable``), and its file."""
    handle = open(path, "r+b" if writable else "rb")
    access = mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ
    return mmap.mmap(handle.fileno(), 0, access=access), handle
