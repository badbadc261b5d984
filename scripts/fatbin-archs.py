#!/usr/bin/env python3
"""Prints the GPU code a shared library carries: SASS (cubin) and PTX entries of its CUDA
fat binaries, by SM version, read from the fatbin headers (magic 0xBA55ED50; each entry's
kind is 1 = PTX, 2 = SASS, and its SM version is the u32 at offset 28 of the entry header).

Usage: scripts/fatbin-archs.py LIB.so...
  e.g. pip download --no-deps nvidia-nccl-cu12==2.27.3 && unzip the wheel's
  nvidia/nccl/lib/libnccl.so.2, then run this on it.
"""
import struct
import sys

MAGIC = b"\x50\xed\x55\xba"


def archs(data):
    sass, ptx = {}, {}
    i = 0
    while True:
        i = data.find(MAGIC, i + 1)
        if i < 0:
            return sass, ptx
        _ver, hsz = struct.unpack_from("<HH", data, i + 4)
        fsz = struct.unpack_from("<Q", data, i + 8)[0]
        if hsz != 16 or fsz > len(data):
            continue
        p, end = i + hsz, i + hsz + fsz
        while p < end:
            kind, _ever, ehsz, padded = struct.unpack_from("<HHII", data, p)
            sm = struct.unpack_from("<I", data, p + 28)[0]
            d = sass if kind == 2 else ptx
            d[sm] = d.get(sm, 0) + 1
            if ehsz == 0:
                break
            p += ehsz + padded


for path in sys.argv[1:]:
    sass, ptx = archs(open(path, "rb").read())
    fmt = lambda d: " ".join(f"sm_{k}" for k in sorted(d))
    print(f"{path}: SASS {fmt(sass)}; PTX {fmt(ptx).replace('sm_', 'compute_')}")
