#!/usr/bin/env python3
"""Records the Linux platform tags of PyPI wheels in the catalog (`platforms = [...]`).

For every `[[release]]` in catalog/torch.toml and catalog/vllm.toml, and every `[[extra]]` in
catalog/extras.toml served from https://pypi.org/simple, reads the project's file list from
PyPI's simple API (PEP 691 JSON, https://pypi.org/simple/NAME/) and keeps, per CPU architecture (x86_64, aarch64),
the wheel tag that asks the least of glibc. A release with a pure-Python wheel
(`py3-none-any`) or with no wheel at all gets no `platforms` line (no platform limit is
known). The rule `wheel.platform` reads the result.

Usage: scripts/wheel-platforms.py [--check]   (run from the repository root; needs network)
--check exits 1 when a file would change, without writing.
"""
import json
import re
import sys
import urllib.request

LEGACY = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17), "linux": (0, 0)}
CPUS = ("x86_64", "aarch64")


def glibc(tag):
    for cpu in CPUS:
        if tag.endswith("_" + cpu):
            rest = tag[: -len(cpu) - 1]
            if rest in LEGACY:
                return cpu, LEGACY[rest]
            m = re.fullmatch(r"manylinux_(\d+)_(\d+)", rest)
            if m:
                return cpu, (int(m.group(1)), int(m.group(2)))
    return None


_PROJECTS = {}


def project_files(name):
    if name not in _PROJECTS:
        req = urllib.request.Request(
            f"https://pypi.org/simple/{name}/",
            headers={"Accept": "application/vnd.pypi.simple.v1+json"},
        )
        with urllib.request.urlopen(req, timeout=120) as r:
            _PROJECTS[name] = [f["filename"] for f in json.load(r)["files"]]
    return _PROJECTS[name]


def norm(name):
    return re.sub(r"[-_.]+", "_", name).lower()


def platforms(name, version):
    wheels = [
        fn
        for fn in project_files(name)
        if fn.endswith(".whl")
        and norm(fn.split("-")[0]) == norm(name)
        and fn.split("-")[1] == version
    ]
    best = {}
    if not wheels:
        return None
    for fn in wheels:
        plat = fn[:-4].split("-")[-1]
        if plat == "any":
            return None
        for tag in plat.split("."):
            g = glibc(tag)
            if g is None:
                continue
            cpu, ver = g
            if cpu not in best or ver < best[cpu][0]:
                best[cpu] = (ver, tag)
    if not best:
        return []
    return [best[c][1] for c in CPUS if c in best]


def rewrite(path, header, name_of):
    text = open(path).read()
    parts = re.split(r"(?m)^(?=\[\[)", text)
    out = []
    for part in parts:
        if part.startswith(header):
            name = name_of(part)
            ver = re.search(r'(?m)^version = "([^"]+)"', part).group(1)
            part = re.sub(r"(?m)^platforms = \[.*\]\n", "", part)
            tags = platforms(name, ver) if name else None
            if tags:
                line = "platforms = [" + ", ".join(f'"{t}"' for t in tags) + "]\n"
                part = re.sub(r'(?m)^(version = "[^"]+"\n)', lambda m: m.group(1) + line, part, count=1)
            print(f"{path}: {name} {ver}: {tags}", file=sys.stderr)
        out.append(part)
    new = "".join(out)
    return text, new


def extra_name(block):
    index = re.search(r'(?m)^index = "([^"]+)"', block)
    if not index or index.group(1) != "https://pypi.org/simple":
        return None
    return re.search(r'(?m)^pypi_name = "([^"]+)"', block).group(1)


def main():
    check = "--check" in sys.argv
    changed = False
    for path, header, name_of in [
        ("catalog/torch.toml", "[[release]]", lambda b: "torch"),
        ("catalog/vllm.toml", "[[release]]", lambda b: "vllm"),
        ("catalog/extras.toml", "[[extra]]", extra_name),
    ]:
        old, new = rewrite(path, header, name_of)
        if old != new:
            changed = True
            if not check:
                open(path, "w").write(new)
    if check and changed:
        print("catalog platform tags are out of date; run scripts/wheel-platforms.py", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
