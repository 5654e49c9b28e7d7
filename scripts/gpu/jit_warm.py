"""Compile MindSpore's CUDA kernels for this GPU ahead of the first run, on every core.

MindSpore 2.10's GPU kernels (``plugin/gpu/libcuda_ops.so.11``) ship PTX for
compute_86 and machine code for sm_60-sm_80 only, and the NCCL beside its CUDA 11.6
plugin machine code for sm_60 and PTX for compute_60 only. On a newer GPU (Hopper,
sm_90) the driver compiles that PTX when the CUDA runtime first loads the libraries,
one module after another: about 9 minutes on an H200 (``results/gpu/README.md``). The
driver keeps what it compiled in ``$CUDA_CACHE_PATH`` and later processes read it
from there.

This script fills the same cache with the same fat binaries, split over as many
processes as the machine has cores (the driver compiles each module on one
thread), through the CUDA driver API alone, so it needs only the NVIDIA driver:

    python3 jit_warm.py pack OUT.xz LIB...     # where the libraries are: the fat binaries
    python3 jit_warm.py warm OUT.xz [WORKERS]  # on the GPU machine, before MindSpore runs

Run ``warm`` with the ``CUDA_CACHE_PATH`` and ``CUDA_CACHE_MAXSIZE`` the training
will use. It prints how many modules it loaded and in how long.
"""
import lzma
import multiprocessing
import os
import struct
import sys
import time
from ctypes import CDLL, byref, c_int, c_void_p

import fatbin


def fat_binaries(path):
    """Every fat binary embedded in the shared library ``path``, byte for byte."""
    image, handle = fatbin.mapped(path)
    with handle:
        return [bytes(image[j:j + 16 + size]) for j, size in fatbin.fat_binaries(image)]


def pack(out, libraries):
    blobs = [blob for library in libraries for blob in fat_binaries(library)]
    data = b"".join(struct.pack("<Q", len(blob)) + blob for blob in blobs)
    with open(out, "wb") as handle:
        handle.write(lzma.compress(data, preset=6))
    print(f"{len(blobs)} fat binaries ({len(data) >> 20} MiB) -> {out}")


def unpack(path):
    with open(path, "rb") as handle:
        data = lzma.decompress(handle.read())
    blobs, i = [], 0
    while i < len(data):
        (size,) = struct.unpack_from("<Q", data, i)
        blobs.append(data[i + 8:i + 8 + size])
        i += 8 + size
    return blobs


def _load(args):
    """Load (so the driver compiles and caches) every fat binary given, in one context."""
    worker, blobs = args
    cuda = CDLL("libcuda.so.1")
    context, module, device = c_void_p(), c_void_p(), c_int()
    assert cuda.cuInit(0) == 0 and cuda.cuDeviceGet(byref(device), 0) == 0
    assert cuda.cuDevicePrimaryCtxRetain(byref(context), device) == 0
    cuda.cuCtxSetCurrent(context)
    failed = 0
    for blob in blobs:
        if cuda.cuModuleLoadData(byref(module), blob) == 0:
            cuda.cuModuleUnload(module)
        else:
            failed += 1
    return len(blobs), failed


def warm(path, workers):
    start = time.time()
    blobs = unpack(path)
    blobs.sort(key=len, reverse=True)  # biggest first, dealt round-robin
    shares = [(w, blobs[w::workers]) for w in range(workers)]
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        results = pool.map(_load, shares)
    loaded = sum(n for n, _ in results)
    failed = sum(f for _, f in results)
    print(f"jit_warm: {loaded} modules, {failed} failed, {workers} processes, "
          f"{time.time() - start:.0f} s; cache {os.environ.get('CUDA_CACHE_PATH')}", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "pack":
        pack(sys.argv[2], sys.argv[3:])
    else:
        warm(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else os.cpu_count())
