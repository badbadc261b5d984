#!/usr/bin/env python3
"""Writes the `[[release]]` entries of catalog/deepspeed.toml from PyPI.

For every DeepSpeed release on PyPI from 0.12.0 on (pre-releases and dev releases left
out), downloads its sdist (the URL and sha256 from PyPI's simple API, PEP 691 JSON) and reads:
  * requirements/requirements.txt: the `torch` requirement (`torch` alone -> no `torch`);
  * PKG-INFO: Requires-Python (no DeepSpeed release declares one so far) and the
    Programming Language :: Python :: 3.N classifiers (recorded in the note);
  * op_builder/builder.py: `cuda_minor_mismatch_ok`, the CUDA minors nvcc and torch may
    differ within (flattened to `cuda_mismatch_ok`).
Everything after the release entries (the `[[torch_minimum]]` table) is kept as it is.

Usage: scripts/deepspeed-releases.py [CACHE_DIR]   (run from the repository root; needs PyPI)
"""
import ast
import hashlib
import io
import json
import os
import re
import sys
import tarfile
import urllib.request

FIRST = (0, 12, 0)
PATH = "catalog/deepspeed.toml"


def simple(name):
    req = urllib.request.Request(
        f"https://pypi.org/simple/{name}/",
        headers={"Accept": "application/vnd.pypi.simple.v1+json"},
    )
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.load(r)


def vkey(v):
    return tuple(int(x) for x in v.split("."))


def read_sdist(url, sha, cache):
    fn = os.path.join(cache, url.rsplit("/", 1)[1])
    if not os.path.exists(fn):
        with urllib.request.urlopen(url, timeout=300) as r:
            data = r.read()
        open(fn, "wb").write(data)
    data = open(fn, "rb").read()
    if hashlib.sha256(data).hexdigest() != sha:
        sys.exit(f"sha256 mismatch for {url}")
    out = {}
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        for m in t.getmembers():
            parts = m.name.split("/", 1)
            if len(parts) == 2 and parts[1] in (
                "requirements/requirements.txt",
                "PKG-INFO",
                "op_builder/builder.py",
            ):
                out[parts[1]] = t.extractfile(m).read().decode()
    return out


def mismatch_ok(builder):
    m = re.search(r"cuda_minor_mismatch_ok\s*=\s*(\{.*?\n\})", builder, re.S)
    if not m:
        return []
    d = ast.literal_eval(m.group(1))
    out = []
    for major in sorted(d):
        out.extend(d[major])
    return out


def torch_req(reqs):
    for line in reqs.splitlines():
        line = line.split("#")[0].strip()
        m = re.match(r"torch\b(.*)$", line)
        if m:
            spec = m.group(1).strip()
            return spec or None
    return None


def main():
    cache = sys.argv[1] if len(sys.argv) > 1 else "/tmp/deepspeed-sdists"
    os.makedirs(cache, exist_ok=True)
    idx = simple("deepspeed")
    sdists = {}
    for f in idx["files"]:
        m = re.fullmatch(r"deepspeed-(\d+\.\d+\.\d+)\.tar\.gz", f["filename"])
        if m and vkey(m.group(1)) >= FIRST and not f.get("yanked"):
            sdists[m.group(1)] = (f["url"], f["hashes"]["sha256"])
    entries = []
    for v in sorted(sdists, key=vkey):
        url, sha = sdists[v]
        files = read_sdist(url, sha, cache)
        torch = torch_req(files.get("requirements/requirements.txt", ""))
        pkg = files.get("PKG-INFO", "")
        rp = re.search(r"(?m)^Requires-Python: (.+)$", pkg)
        pys = sorted(
            set(re.findall(r"Programming Language :: Python :: (3\.\d+)", pkg)),
            key=lambda s: int(s.split(".")[1]),
        )
        mm = mismatch_ok(files.get("op_builder/builder.py", ""))
        lines = ["[[release]]", f'version = "{v}"']
        if torch:
            lines.append(f'torch = "{torch}"')
        if rp:
            lines.append(f'python = "{rp.group(1).strip()}"')
        if mm:
            lines.append("cuda_mismatch_ok = [" + ", ".join(f'"{x}"' for x in mm) + "]")
        lines.append(
            f'source = "https://pypi.org/project/deepspeed/{v}/ (sdist {url.rsplit("/", 1)[1]}, sha256 {sha}: '
            'requirements/requirements.txt, PKG-INFO, op_builder/builder.py cuda_minor_mismatch_ok), read by scripts/deepspeed-releases.py"'
        )
        note = [f"requirements.txt torch entry: 'torch{(' ' + torch) if torch else ''}'."]
        if not rp:
            note.append("No Requires-Python.")
        if pys:
            note.append(f"Classifiers list Python {pys[0]}-{pys[-1]}.")
        if not mm:
            note.append("No cuda_minor_mismatch_ok found in op_builder/builder.py.")
        lines.append('note = "' + " ".join(note) + '"')
        entries.append("\n".join(lines) + "\n")
        print(v, torch, mm[-1] if mm else None, file=sys.stderr)
    old = open(PATH).read()
    tail = old[old.index("# ----------------------------------------------------------------"):]
    head = f'''family = "deepspeed"
description = """
Every DeepSpeed release on PyPI from 0.12.0 on ({len(entries)} releases, {min(sdists, key=vkey)} .. {max(sdists, key=vkey)}),
written by scripts/deepspeed-releases.py from each release's sdist (downloaded from PyPI, sha256 checked):
`torch` is the requirements.txt requirement where it has a version (plain `torch` -> left out); `python` is
Requires-Python where declared (no release declares one; the classifiers are in each note);
`cuda_mismatch_ok` is the flattened `cuda_minor_mismatch_ok` dict of op_builder/builder.py (with CUDA 13, no
release lists minors, so nvcc must equal torch.version.cuda major.minor or DS_SKIP_CUDA_CHECK=1 is needed).
`[[torch_minimum]]` records the oldest DeepSpeed per torch minor where a source states one (rule
`deepspeed.torch-minimum`).
"""

'''
    open(PATH, "w").write(head + "\n".join(entries) + "\n" + tail)


if __name__ == "__main__":
    main()
