#!/usr/bin/env python3
"""Prints one file of a wheel on PyPI without downloading the wheel: finds the wheel in PyPI's simple
API (PEP 691 JSON, https://pypi.org/simple/NAME/), then reads the zip's central directory and the one
member through HTTP range requests to files.pythonhosted.org.

Usage: scripts/wheel-member.py NAME WHEEL_FILENAME MEMBER [START_MARKER [LENGTH]]
  e.g. scripts/wheel-member.py torch torch-2.6.0-cp311-cp311-manylinux1_x86_64.whl \
         torch/cuda/__init__.py 'def _check_cubins' 1200
Prints the wheel's URL and sha256 (as PyPI lists it), then the member (or LENGTH characters from
START_MARKER on; an empty START_MARKER prints the whole member). Used 2026-11-26 to read how torch
2.6.0 formats its "supports CUDA capabilities" warning (catalog/torch.toml, 2.6.0+cu126), and the
TORCH_CUDA_ARCH_LIST entries torch 2.10.0's CMake accepts ([source.cmake_archs] in catalog/torch.toml):
  scripts/wheel-member.py torch torch-2.10.0-cp312-cp312-manylinux_2_28_x86_64.whl \
    torch/share/cmake/Caffe2/Modules_CUDA_fix/upstream/FindCUDA/select_compute_arch.cmake
  scripts/wheel-member.py torch torch-2.10.0-cp312-cp312-manylinux_2_28_x86_64.whl \
    torch/share/cmake/Caffe2/public/utils.cmake 'macro(torch_cuda_get_nvcc_gencode_flag' 1200
(and the same select_compute_arch.cmake of the cp311 wheels of 2.6.0, 2.7.0 and 2.8.0 with the
marker 'if(arch_name MATCHES', for the older pattern without `f`).
"""
import io
import json
import sys
import urllib.request
import zipfile


class RangeFile(io.RawIOBase):
    """A read-only, seekable view of a remote file through HTTP Range requests."""

    def __init__(self, url):
        self.url, self.pos = url, 0
        head = urllib.request.urlopen(urllib.request.Request(url, method="HEAD"))
        self.size = int(head.headers["Content-Length"])

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self.pos

    def seek(self, offset, whence=0):
        base = {0: 0, 1: self.pos, 2: self.size}[whence]
        self.pos = base + offset
        return self.pos

    def readinto(self, buf):
        if self.pos >= self.size:
            return 0
        end = min(self.size, self.pos + len(buf)) - 1
        req = urllib.request.Request(self.url, headers={"Range": f"bytes={self.pos}-{end}"})
        data = urllib.request.urlopen(req).read()
        buf[: len(data)] = data
        self.pos += len(data)
        return len(data)


def main():
    name, filename, member = sys.argv[1:4]
    marker = sys.argv[4] if len(sys.argv) > 4 else None
    length = int(sys.argv[5]) if len(sys.argv) > 5 else 2000
    req = urllib.request.Request(
        f"https://pypi.org/simple/{name}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    files = json.load(urllib.request.urlopen(req))["files"]
    entry = next(f for f in files if f["filename"] == filename)
    print(entry["url"], "sha256", entry["hashes"]["sha256"])
    wheel = zipfile.ZipFile(io.BufferedReader(RangeFile(entry["url"]), buffer_size=1 << 16))
    text = wheel.read(member).decode("utf-8", "replace")
    if marker:
        start = text.find(marker)
        text = text[start : start + length] if start >= 0 else f"(marker {marker!r} not found)"
    print(text)


if __name__ == "__main__":
    main()
