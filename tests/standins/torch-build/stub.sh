#!/usr/bin/env bash
# A stand-in for the tools build-torch.sh runs (uv, git, python, nproc, gcc), linked under each
# tool's name: it records the command line, and for the build itself (`python -m pip wheel`)
# the environment, into $STUB_LOG, then does the least the script needs to go on:
#   nproc              prints $STUB_NPROC
#   gcc -dumpversion   prints $STUB_GCC
#   python -c …        prints $STUB_SITE (the script asks for site-packages)
#   python -c CODE URL FILE            copies $STUB_ARCHIVE to FILE (the archive download)
#   python -m pip wheel … -w DIR SRC   writes DIR/torch-<PYTORCH_BUILD_VERSION>-stub.whl
#   git clone … URL DIR                creates DIR
set -euo pipefail
tool="$(basename "$0")"
printf 'cmd %s' "${tool}" >> "${STUB_LOG}"
printf ' %s' "$@" >> "${STUB_LOG}"
printf '\n' >> "${STUB_LOG}"
case "${tool}" in
  nproc) echo "${STUB_NPROC}" ;;
  gcc) echo "${STUB_GCC}" ;;
  git)
    if [ "${1:-}" = clone ]; then mkdir -p "${!#}"; fi ;;
  python)
    if [ "${1:-}" = -c ] && [ "$#" -eq 4 ]; then cp "${STUB_ARCHIVE}" "$4"; exit 0; fi
    if [ "${1:-}" = -c ]; then echo "${STUB_SITE}"; exit 0; fi
    if [ "${1:-} ${2:-} ${3:-}" = "-m pip wheel" ]; then
      env | LC_ALL=C sort | sed 's/^/env /' >> "${STUB_LOG}"
      dir=""
      prev=""
      for a in "$@"; do
        if [ "${prev}" = -w ]; then dir="${a}"; fi
        prev="${a}"
      done
      mkdir -p "${dir}"
      : > "${dir}/torch-${PYTORCH_BUILD_VERSION}-stub.whl"
    fi ;;
  uv) ;;
esac
