#!/usr/bin/env python3
"""Lists the NCCL package builds NVIDIA's own CUDA container images install: every
`<nccl>+cuda<X.Y>` pair that a Dockerfile of NVIDIA's container-images/cuda repository
(https://gitlab.com/nvidia/container-images/cuda) installs, over the repository's whole
git history, with the first commit and file that show it.

NVIDIA's Dockerfiles pin the NCCL package exactly, for example (dist/12.8.1/ubuntu2204/runtime):

    ENV NV_LIBNCCL_PACKAGE_VERSION=2.25.1-1
    ENV NV_LIBNCCL_PACKAGE=${NV_LIBNCCL_PACKAGE_NAME}=${NV_LIBNCCL_PACKAGE_VERSION}+cuda12.8

so each pinned pair of an x86_64 build stage is an observation that NVIDIA published NCCL <nccl> built for CUDA <X.Y>
(`libnccl2=<nccl>-1+cuda<X.Y>` on apt, `libnccl-<nccl>-1+cuda<X.Y>` on dnf). Pairs are only
read, never inferred: a release appears for a CUDA minor only if some commit pins it in a
stage or directory for x86_64 (stages and paths named arm64/aarch64/sbsa/ppc64le are skipped).

Usage: scripts/nccl-builds-from-cuda-images.py GIT_DIR [URL_PREFIX]
  GIT_DIR: a clone of the repository or of a mirror of it, e.g. the GitHub mirror
  https://github.com/pranavmishra90/nvidia-container-images-cuda (git clone --bare).
  URL_PREFIX (default: that mirror's https://github.com/.../blob) builds the cited URLs.
Prints one line per pair, sorted by NCCL version then CUDA minor:
  <nccl> <X.Y> <commit> <commit date> <url of the file at that commit>
Read 2026-11-26 for catalog/nccl.toml.
"""
import re
import subprocess
import sys

PREFIX = "https://github.com/pranavmishra90/nvidia-container-images-cuda/blob"
# A version assignment (the value may end in the package revision "-1").
VERSION = re.compile(r"^\s*ENV\s+(NV_LIBNCCL_PACKAGE_VERSION|NV_LIBNCCL_DEV_PACKAGE_VERSION|NCCL_VERSION)[= ](\S+)")
# The package spelling with its CUDA build suffix.
SUFFIX = re.compile(r"^\s*ENV\s+(NV_LIBNCCL_PACKAGE|NV_LIBNCCL_DEV_PACKAGE)[= ].*\+cuda(\d+\.\d+)")
# Older Dockerfiles spell the package inline: libnccl2=$NCCL_VERSION-1+cuda10.2, or a literal version.
INLINE = re.compile(r"libnccl[-\w]*[=-](\$\{?NCCL_VERSION\}?|[0-9][0-9.]*)(-1)?\+cuda(\d+\.\d+)")


def git(gitdir, *args):
    return subprocess.run(
        ["git", "--git-dir", gitdir, *args], check=True, capture_output=True, text=True
    ).stdout


def nccl_version(raw):
    """2.25.1-1 -> 2.25.1; a 3-part version (with an optional package revision) or nothing:
    a malformed pin such as `2.19.3--1` (some generated end-of-life Dockerfiles) is no observation."""
    m = re.fullmatch(r"(\d+\.\d+\.\d+)(-\d+)?", raw)
    return m.group(1) if m else None


# Build stages for another CPU architecture (`FROM base AS base-arm64`): their pins are not x86_64 builds.
STAGE = re.compile(r"^\s*FROM\s+\S+\s+(?:as|AS)\s+(\S+)")
OTHER_ARCH = ("arm64", "aarch64", "sbsa", "ppc64le")


def pairs_in(text):
    """The (nccl, cuda minor) pairs one Dockerfile pins."""
    found, current, other_arch = set(), {}, False
    for line in text.splitlines():
        m = STAGE.match(line)
        if m:
            other_arch = any(a in m.group(1) for a in OTHER_ARCH)
            continue
        if other_arch:
            continue
        m = VERSION.match(line)
        if m:
            current[m.group(1)] = m.group(2)
            continue
        m = SUFFIX.match(line)
        if m:
            key = "NV_LIBNCCL_DEV_PACKAGE_VERSION" if m.group(1).endswith("DEV_PACKAGE") else "NV_LIBNCCL_PACKAGE_VERSION"
            raw = current.get(key) or current.get("NCCL_VERSION")
            v = raw and nccl_version(raw)
            if v:
                found.add((v, m.group(2)))
            continue
        for m in INLINE.finditer(line):
            raw = current.get("NCCL_VERSION") if m.group(1).startswith("$") else m.group(1)
            v = raw and nccl_version(raw)
            if v:
                found.add((v, m.group(3)))
    return found


class Blobs:
    """Blob contents through one `git cat-file --batch` process, each blob parsed once."""

    def __init__(self, gitdir):
        self.proc = subprocess.Popen(
            ["git", "--git-dir", gitdir, "cat-file", "--batch"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )
        self.cache = {}

    def pairs(self, blob):
        if blob not in self.cache:
            self.proc.stdin.write(blob.encode() + b"\n")
            self.proc.stdin.flush()
            size = int(self.proc.stdout.readline().split()[2])
            text = self.proc.stdout.read(size + 1)[:-1].decode("utf-8", "replace")
            self.cache[blob] = pairs_in(text) if "nccl" in text.lower() else set()
        return self.cache[blob]


def main():
    gitdir = sys.argv[1]
    prefix = sys.argv[2] if len(sys.argv) > 2 else PREFIX
    blobs = Blobs(gitdir)
    # Oldest first, so the first observation of a pair is its earliest commit.
    commits = git(gitdir, "rev-list", "--all", "--reverse", "--topo-order").split()
    first = {}
    for c in commits:
        for line in git(gitdir, "ls-tree", "-r", c).splitlines():
            meta, path = line.split("\t", 1)
            if "Dockerfile" not in path or any(a in path for a in OTHER_ARCH):
                continue
            for pair in blobs.pairs(meta.split()[2]):
                if pair not in first:
                    first[pair] = (c, path)
    key = lambda p: (tuple(int(x) for x in p[0].split(".")), tuple(int(x) for x in p[1].split(".")))
    for pair in sorted(first, key=key):
        c, path = first[pair]
        date = git(gitdir, "show", "-s", "--format=%cs", c).strip()
        print(f"{pair[0]} {pair[1]} {c} {date} {prefix}/{c}/{path}")


if __name__ == "__main__":
    main()
