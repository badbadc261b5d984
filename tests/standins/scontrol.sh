#!/usr/bin/env bash
# A stand-in for the two scontrol queries generated batch scripts make, for tests without a
# Slurm cluster: `scontrol show hostnames LIST` prints LIST's hosts one per line (a plain
# comma-separated list; no bracket ranges), and `scontrol show job ID` prints the job record's
# `Command=` line, the script's path as submitted ($GPUSTACK_TEST_SUBMITTED).
set -euo pipefail
case "${1:-} ${2:-}" in
  "show hostnames") tr ',' '\n' <<<"${3:?}" ;;
  "show job") printf 'JobId=%s JobName=test\n   Command=%s\n' "${3:?}" "${GPUSTACK_TEST_SUBMITTED:?}" ;;
  *) echo "scontrol stand-in: unsupported: $*" >&2; exit 2 ;;
esac
