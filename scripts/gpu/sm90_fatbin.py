"""Compile the PTX inside CUDA fat binaries to sm_90 machine code ahead of time.

MindSpore 2.10's GPU kernels (``plugin/gpu/libcuda_ops.so.11``, 407 fat binaries)
carry machine code for sm_60-sm_80 and PTX for compute_86; the NCCL beside its
CUDA 11.6 plugin carries sm_60 code and compute_60 PTX. On a Hopper GPU (sm_90)
the driver compiles all of that PTX when the runtime loads the library, one module
after another: about 9 minutes on a fresh H100 or H200 (``results/gpu/README.md``),
before the first training step. This script does that compile once, on any x86-64
machine, with ``ptxas`` from PyPI's ``nvidia-cuda-nvcc-cu11`` (CUDA 11.8, the
first to know sm_90), and writes the result back into the library in place:

* each fat binary is rewritten inside its own bytes: first an sm_90 ELF entry
  (LZ4-compressed, as ``nvcc`` stores compressed entries, when the plain cubin
  would not fit), then the original PTX entry (the driver's fallback, where it still fits), then
  zeros;
  the fat binary's header gets the new, smaller size. Nothing else in the ELF
  library moves, so its relocations and the runtime's pointers stay valid;
* the PTX is read from the entry as the driver reads it (LZ4 block compression,
  flag ``0x2000``), compiled with ``ptxas -arch=sm_90 -O3`` (what the driver's
  JIT does by default) plus the options the entry names (NCCL's relocatable
  ``--compile-only`` modules, which the runtime links when it loads them), and the cubin's entry header copies the layout of the
  library's own ELF entries with the architecture set to 90.

Usage::

    python3 sm90_fatbin.py PTXAS WORKERS LIB...   # rewrites each LIB in place
    python3 sm90_fatbin.py --disable LIB...       # the driver ignores that code again

Prints per library how many fat binaries got sm_90 code, how many were left as
they were (and why), and the time taken.
"""
import multiprocessing
import os
import struct
import subprocess
import sys
import tempfile
import time

from fatbin import KIND_ELF, KIND_PTX, entries, fat_binaries, mapped

COMPRESSED = 0x2000
TARGET = 90


def ptx_options(image, offset, header):
    """The ptxas options the entry asks for (NCCL's: ``-maxrregcount=96 --compile-only``)."""
    if header < 72:
        return []
    where, length = struct.unpack_from("<II", image, offset + 64)
    if not where or where + length > header:
        return []
    return bytes(image[offset + where:offset + where + length]).rstrip(b"\0").decode().split()


def ptx_text(image, offset, header):
    """The PTX of one entry, decompressed if the fat binary stores it compressed."""
    size, _ = struct.unpack_from("<II", image, offset + 16)
    padded = struct.unpack_from("<Q", image, offset + 8)[0]
    flags = struct.unpack_from("<Q", image, offset + 40)[0]
    if flags & COMPRESSED:
        import lz4.block  # PyPI's lz4: only where the code is compiled
        plain = struct.unpack_from("<Q", image, offset + 56)[0]
        body = bytes(image[offset + header:offset + header + size])
        return lz4.block.decompress(body, uncompressed_size=plain)
    return bytes(image[offset + header:offset + header + padded]).rstrip(b"\0")


def compile_ptx(job):
    """(index, cubin or None, message): ptxas on one module's PTX."""
    index, ptxas, text, options = job
    with tempfile.TemporaryDirectory() as work:
        src, out = os.path.join(work, "m.ptx"), os.path.join(work, "m.cubin")
        with open(src, "wb") as handle:
            handle.write(text.rstrip(b"\0"))
        run = subprocess.run([ptxas, f"-arch=sm_{TARGET}", "-O3", *options, src, "-o", out],
                             capture_output=True, text=True)
        if run.returncode:
            return index, None, run.stderr.strip().splitlines()[-1:]
        with open(out, "rb") as handle:
            return index, handle.read(), ""


def elf_entry(template, cubin, room):
    """An ELF entry (header + payload) for ``cubin``, compressed if it needs to be."""
    header = bytearray(template)
    struct.pack_into("<I", header, 28, TARGET)
    payload, flags = cubin, struct.unpack_from("<Q", header, 40)[0] & ~COMPRESSED
    if len(header) + len(cubin) + 8 > room:
        import lz4.block
        payload = lz4.block.compress(cubin, mode="high_compression", store_size=False)
        flags |= COMPRESSED
        struct.pack_into("<II", header, 16, len(payload), 0)
        struct.pack_into("<Q", header, 56, len(cubin))
    padded = (len(payload) + 7) // 8 * 8
    struct.pack_into("<Q", header, 8, padded)
    struct.pack_into("<Q", header, 40, flags)
    return bytes(header) + payload + b"\0" * (padded - len(payload))


def plan(image, ptxas):
    """For each fat binary without sm_90 code: (offset, size, its best PTX entry, an ELF
    entry whose header to copy), and the compile job of that PTX."""
    plans, jobs = [], []
    for offset, size in fat_binaries(image):
        found = entries(image, offset, size)
        if any(e.kind == KIND_ELF and e.arch == TARGET for e in found):
            continue  # already has sm_90 code
        ptx = [e for e in found if e.kind == KIND_PTX and e.arch <= TARGET]
        elf = [e for e in found if e.kind == KIND_ELF and e.header == 64]
        if not ptx or not elf:
            continue
        best = max(ptx, key=lambda e: e.arch)
        plans.append((offset, size, best, elf[0]))
        jobs.append((len(jobs), ptxas, ptx_text(image, best.offset, best.header),
                     ptx_options(image, best.offset, best.header)))
    return plans, jobs


def write_back(image, offset, size, best, elf, cubin):
    """The fat binary at ``offset`` rewritten in its own bytes: the sm_90 entry, the PTX
    entry when there is room for it, zeros; False when the code does not fit at all."""
    ptx_entry = bytes(image[best.offset:best.payload.stop])
    template = bytes(image[elf.offset:elf.offset + 64])
    new = elf_entry(template, cubin, size - len(ptx_entry))
    if len(new) + len(ptx_entry) > size:  # no room for the fallback
        new, ptx_entry = elf_entry(template, cubin, size), b""
    if len(new) > size:
        return False
    body = new + ptx_entry
    image[offset + 16:offset + 16 + size] = body + b"\0" * (size - len(body))
    struct.pack_into("<Q", image, offset + 8, len(body))
    return True


def rewrite(path, ptxas, workers):
    start = time.time()
    image, handle = mapped(path, writable=True)
    with handle:
        plans, jobs = plan(image, ptxas)
        done, failed, skipped = 0, [], 0
        with multiprocessing.Pool(workers) as pool:
            for index, cubin, message in pool.imap_unordered(compile_ptx, jobs, chunksize=4):
                if cubin is None:
                    failed.append(message)
                elif write_back(image, *plans[index], cubin):
                    done += 1
                else:
                    skipped += 1
        image.flush()
    print(f"{path}: sm_{TARGET} code for {done} of {len(plans)} fat binaries; "
          f"{skipped} did not fit, {len(failed)} failed {failed[:2]}; "
          f"{time.time() - start:.0f} s", flush=True)


def disable(path):
    """Mark every sm_90 ELF entry as another architecture, so the driver skips it and
    compiles the PTX beside it as before (the way back if the driver rejects the code)."""
    count = 0
    image, handle = mapped(path, writable=True)
    with handle:
        for offset, size in fat_binaries(image):
            for entry in entries(image, offset, size):
                if entry.kind == KIND_ELF and entry.arch == TARGET:
                    struct.pack_into("<I", image, entry.offset + 28, 1)
                    count += 1
        image.flush()
    print(f"{path}: {count} sm_{TARGET} entries disabled", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "--disable":
        for library in sys.argv[2:]:
            disable(library)
        sys.exit()
    ptxas, workers = sys.argv[1], int(sys.argv[2])
    for library in sys.argv[3:]:
        rewrite(library, ptxas, workers)
