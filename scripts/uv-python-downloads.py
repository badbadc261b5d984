#!/usr/bin/env python3
"""Print catalog `[[package]]` entries for the CPython builds a uv release installs.

uv embeds its Python download table (crates/uv-python/download-metadata.json in the uv
repository) in the binary; `uv python install X.Y.Z` downloads the listed URL and checks
the listed sha256. gpustack pins the exact patch per Python minor so that a build installs
the interpreter the lock names. Usage:

    scripts/uv-python-downloads.py UV_BINARY_OR_METADATA_JSON UV_VERSION

Reads the JSON (from the file, or from the binary's embedded copy), keeps CPython builds
for linux x86_64/aarch64 with glibc, default variant, no prereleases, and prints the newest
patch per minor for 3.9 and later.
"""
import json
import re
import sys


def load(path):
    data = open(path, "rb").read()
    if data.lstrip().startswith(b"{"):
        return json.loads(data)
    # The embedded table: the JSON object that begins with the first "cpython-…" key.
    start = data.find(b'{"cpython-')
    if start < 0:
        sys.exit(f"{path}: no embedded download table")
    depth = 0
    for i in range(start, len(data)):
        c = data[i : i + 1]
        if c == b"{":
            depth += 1
        elif c == b"}":
            depth -= 1
            if depth == 0:
                return json.loads(data[start : i + 1])
    sys.exit(f"{path}: unterminated download table")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    table = load(sys.argv[1])
    uv = sys.argv[2]
    best = {}
    for key, e in table.items():
        if e.get("name") != "cpython" or e.get("os") != "linux" or e.get("libc") != "gnu":
            continue
        if e.get("variant") or e.get("prerelease") or e.get("arch", {}).get("variant"):
            continue
        arch = e["arch"]["family"]
        if arch not in ("x86_64", "aarch64") or (e["major"], e["minor"]) < (3, 9):
            continue
        k = (e["minor"], arch)
        if k not in best or e["patch"] > best[k][1]["patch"]:
            best[k] = (key, e)
    for (minor, arch), (key, e) in sorted(best.items()):
        version = f"{e['major']}.{e['minor']}.{e['patch']}"
        assert re.fullmatch(r"[0-9a-f]{64}", e["sha256"]), key
        print("[[package]]")
        print('name = "cpython"')
        print(f'version = "{version}"')
        print(f'variant = "{arch}-gnu"')
        print(f'url = "{e["url"]}"')
        print(f'sha256 = "{e["sha256"]}"')
        print(
            f'note = "`uv python install {version}` with uv {uv} on linux {arch} (glibc) downloads this python-build-standalone {e["build"]} build and checks this sha256 ({key})."'
        )
        print(
            f'source = "https://github.com/astral-sh/uv/blob/{uv}/crates/uv-python/download-metadata.json ({key}), read from the uv {uv} binary\'s embedded copy by scripts/uv-python-downloads.py"'
        )
        print()


main()
