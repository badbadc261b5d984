#!/usr/bin/env python3
"""Prints the host GCC range nvcc accepts, read from NVIDIA's own `crt/host_config.h` in the
nvcc wheel on PyPI (nvidia-cuda-nvcc-cu12 for CUDA 12, nvidia-cuda-nvcc for CUDA 13): the
`#if __GNUC__ …` / `#error -- unsupported GNU version!` lines nvcc stops on. The member is
read with HTTP range requests (the helpers of scripts/torch-wheel-commit.py). Stdlib only.

Usage: scripts/nvcc-host-gcc.py PROJECT VERSION
  e.g. scripts/nvcc-host-gcc.py nvidia-cuda-nvcc-cu12 12.8.93
"""
import importlib.util
import json
import os
import re
import sys

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("twc", os.path.join(here, "torch-wheel-commit.py"))
twc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(twc)


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    project, version = sys.argv[1:]
    idx = json.loads(twc.get(twc.SIMPLE.format(project), {"Accept": "application/vnd.pypi.simple.v1+json"}))
    norm = project.replace("-", "_")
    files = [f for f in idx["files"] if f["filename"].startswith(f"{norm}-{version}-") and "x86_64" in f["filename"]]
    if not files:
        raise SystemExit(f"no {project} {version} x86_64 wheel on PyPI")
    f = files[0]
    url = f["url"].split("#")[0]
    cd = twc.central_directory(url, f["size"])
    hits = [(n, m, c, o) for n, m, c, o in twc.entries(cd) if n.endswith("crt/host_config.h")]
    if not hits:
        raise SystemExit(f"{url}: no crt/host_config.h")
    name, method, csize, off = hits[0]
    text = twc.member(url, method, csize, off).decode()
    print(f"wheel: {url}")
    print(f"sha256: {f['hashes']['sha256']}")
    print(f"member: {name}")
    for i, line in enumerate(text.splitlines(), 1):
        if re.search(r"__GNUC__\s*[<>]|unsupported GNU version", line):
            print(f"{i}: {line.strip()}")


if __name__ == "__main__":
    main()
