#!/usr/bin/env python3
"""Lists the cuDNN releases on PyPI (nvidia-cudnn-cu11/-cu12/-cu13, 8.9 and newer, final
releases only) and the CUDA majors each has a wheel for, and reports those that
catalog/cudnn.toml lacks or whose `cuda_majors` differ. With --toml it prints `[[release]]`
entries for the missing ones (review, then paste; min_cc is never guessed).

Usage: scripts/cudnn-releases.py [--toml]   (run from the repository root; needs PyPI)
"""
import json
import re
import sys
import urllib.request


def versions(name):
    req = urllib.request.Request(
        f"https://pypi.org/simple/{name}/",
        headers={"Accept": "application/vnd.pypi.simple.v1+json"},
    )
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.load(r)["versions"]


def key(v):
    return tuple(int(x) for x in v.split("."))


def main():
    majors = {}
    for m in (11, 12, 13):
        for v in versions(f"nvidia-cudnn-cu{m}"):
            if re.fullmatch(r"\d+\.\d+\.\d+\.\d+", v) and key(v) >= (8, 9):
                majors.setdefault(v, []).append(m)
    text = open("catalog/cudnn.toml").read()
    have = {}
    for block in text.split("[[release]]")[1:]:
        v = re.search(r'version = "([^"]+)"', block).group(1)
        cm = re.search(r"cuda_majors = \[([^\]]*)\]", block)
        have[v] = [int(x) for x in cm.group(1).split(",")] if cm else []
    missing = [v for v in sorted(majors, key=key) if v not in have]
    differ = [v for v in sorted(majors, key=key) if v in have and have[v] != majors[v]]
    for v in missing:
        if "--toml" in sys.argv:
            srcs = "; ".join(f"https://pypi.org/project/nvidia-cudnn-cu{m}/{v}/" for m in majors[v])
            print(f'[[release]]\nversion = "{v}"\ncuda_majors = {majors[v]}\nsource = "{srcs}"\n')
        else:
            print(f"missing {v} cuda_majors={majors[v]}")
    for v in differ:
        print(f"differs {v}: catalog {have[v]}, PyPI {majors[v]}", file=sys.stderr)


if __name__ == "__main__":
    main()
