#!/usr/bin/env python3
"""Prints the git commit a PyPI torch release was built from, read from the wheel itself.

Every torch wheel carries `torch/version.py` with `git_version = '<sha>'`, the commit of
pytorch/pytorch the release was built from. This reads that one member out of the wheel on
files.pythonhosted.org with HTTP range requests (the zip's end-of-central-directory record
and central directory at the end of the file, then the member's local header and data), so
a ~900 MB wheel costs a few hundred kilobytes. It also prints the wheel's Requires-Dist
(`*.dist-info/METADATA`), the runtime requirements of exactly that release. Stdlib only.

Usage: scripts/torch-wheel-commit.py VERSION [PYTHON_TAG] [PLATFORM_SUBSTRING]
  e.g. scripts/torch-wheel-commit.py 2.10.0            (cp312, manylinux x86_64)
       scripts/torch-wheel-commit.py 2.10.0 cp311 aarch64

For each wheel of VERSION with that Python tag and platform (with and without a build tag:
PyPI may hold rebuilds, `torch-2.10.0-3-…`), prints the wheel's URL, its sha256 (from the
PyPI simple API), the commit, and Requires-Dist.
"""
import json
import re
import struct
import sys
import urllib.request
import zlib

SIMPLE = "https://pypi.org/simple/{}/"


def get(url, headers=None):
    req = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.read()


def get_range(url, start, end):
    """Bytes start..end inclusive; a negative start asks for the last -start bytes."""
    rng = f"bytes={start}-" if start < 0 else f"bytes={start}-{end}"
    if start < 0:
        rng = f"bytes={start}"
    return get(url, {"Range": rng})


def wheels(project, version, pytag, platform):
    idx = json.loads(get(SIMPLE.format(project), {"Accept": "application/vnd.pypi.simple.v1+json"}))
    pat = re.compile(rf"^{project}-{re.escape(version)}(-\d+)?-{pytag}-{pytag}-.*{platform}.*\.whl$")
    return [f for f in idx["files"] if pat.match(f["filename"])]


def central_directory(url, size):
    tail = get_range(url, -65536, None)
    i = tail.rfind(b"PK\x05\x06")
    if i < 0:
        raise SystemExit(f"{url}: no end-of-central-directory record in the last 64 KiB")
    cd_size, cd_off = struct.unpack_from("<II", tail, i + 12)
    if cd_off == 0xFFFFFFFF or cd_size == 0xFFFFFFFF:
        j = tail.rfind(b"PK\x06\x06")
        cd_size, cd_off = struct.unpack_from("<QQ", tail, j + 40)
    tail_start = size - len(tail)
    if cd_off >= tail_start:
        return tail[cd_off - tail_start : cd_off - tail_start + cd_size]
    return get_range(url, cd_off, cd_off + cd_size - 1)


def entries(cd):
    p = 0
    while p + 46 <= len(cd) and cd[p : p + 4] == b"PK\x01\x02":
        method, = struct.unpack_from("<H", cd, p + 10)
        csize, usize = struct.unpack_from("<II", cd, p + 20)
        nlen, xlen, clen = struct.unpack_from("<HHH", cd, p + 28)
        off, = struct.unpack_from("<I", cd, p + 42)
        name = cd[p + 46 : p + 46 + nlen].decode()
        extra = cd[p + 46 + nlen : p + 46 + nlen + xlen]
        if 0xFFFFFFFF in (csize, usize, off):
            csize, usize, off = zip64(extra, csize, usize, off)
        yield name, method, csize, off
        p += 46 + nlen + xlen + clen


def zip64(extra, csize, usize, off):
    q = 0
    while q + 4 <= len(extra):
        hid, hlen = struct.unpack_from("<HH", extra, q)
        if hid == 1:
            vals = list(struct.unpack_from(f"<{hlen // 8}Q", extra, q + 4))
            if usize == 0xFFFFFFFF:
                usize = vals.pop(0)
            if csize == 0xFFFFFFFF:
                csize = vals.pop(0)
            if off == 0xFFFFFFFF:
                off = vals.pop(0)
        q += 4 + hlen
    return csize, usize, off


def member(url, method, csize, off):
    head = get_range(url, off, off + 29)
    nlen, xlen = struct.unpack_from("<HH", head, 26)
    start = off + 30 + nlen + xlen
    data = get_range(url, start, start + csize - 1)
    if method == 8:
        return zlib.decompress(data, -15)
    if method == 0:
        return data
    raise SystemExit(f"{url}: unsupported compression method {method}")


def read(f):
    url = f["url"].split("#")[0]
    cd = central_directory(url, f["size"])
    want = {}
    for name, method, csize, off in entries(cd):
        if name == "torch/version.py" or re.match(r"^[^/]+\.dist-info/METADATA$", name):
            want[name] = (method, csize, off)
    version_py = member(url, *want["torch/version.py"]).decode()
    commit = re.search(r"^git_version = '([0-9a-f]{40})'", version_py, re.M)
    meta_name = next(n for n in want if n.endswith("/METADATA"))
    meta = member(url, *want[meta_name]).decode()
    requires = [l[len("Requires-Dist: "):] for l in meta.splitlines() if l.startswith("Requires-Dist: ")]
    return url, commit.group(1) if commit else None, requires


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    version = sys.argv[1]
    pytag = sys.argv[2] if len(sys.argv) > 2 else "cp312"
    platform = sys.argv[3] if len(sys.argv) > 3 else "manylinux_2_28_x86_64"
    found = wheels("torch", version, pytag, platform)
    if not found:
        raise SystemExit(f"no torch {version} wheel for {pytag} {platform} on PyPI")
    for f in found:
        url, commit, requires = read(f)
        print(f"wheel: {url}")
        print(f"sha256: {f['hashes']['sha256']}")
        print(f"commit: {commit}")
        for r in requires:
            print(f"requires-dist: {r}")
        print()


if __name__ == "__main__":
    main()
