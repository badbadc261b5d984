#!/usr/bin/env python3
"""List the shared libraries under `torch/lib/` (or any prefix) of a remote wheel without
downloading it: HTTP range reads of the zip's end-of-central-directory record and central
directory only.

    scripts/wheel-libs.py URL [PREFIX]

Used for fixtures/closed/h100-gh200-mixed/README.md: PyPI's torch 2.10.0 cp312 aarch64 wheel
lists no `libtorch_cuda.so` / `libc10_cuda.so` (a CPU build), while its x86_64 wheel does.
"""
import struct
import sys
import urllib.request


def ranged(url, start, end):
    req = urllib.request.Request(url, headers={"Range": f"bytes={start}-{end}"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.read()


def size_of(url):
    req = urllib.request.Request(url, method="HEAD")
    with urllib.request.urlopen(req, timeout=60) as r:
        return int(r.headers["Content-Length"])


def names(url):
    size = size_of(url)
    tail = ranged(url, max(0, size - 65536), size - 1)
    eocd = tail.rfind(b"PK\x05\x06")
    if eocd < 0:
        sys.exit("no end-of-central-directory record in the last 64 KiB")
    cd_size, cd_off = struct.unpack("<II", tail[eocd + 12 : eocd + 20])
    cd = ranged(url, cd_off, cd_off + cd_size - 1)
    out, p = [], 0
    while cd[p : p + 4] == b"PK\x01\x02":
        n, e, c = struct.unpack("<HHH", cd[p + 28 : p + 34])
        out.append(cd[p + 46 : p + 46 + n].decode())
        p += 46 + n + e + c
    return out


def main():
    url = sys.argv[1]
    prefix = sys.argv[2] if len(sys.argv) > 2 else "torch/lib/"
    for name in sorted(names(url)):
        if name.startswith(prefix) and ".so" in name:
            print(name)


if __name__ == "__main__":
    main()
