#!/usr/bin/env bash
# A one-node stand-in for srun, for tests that run a generated batch script without a Slurm
# cluster (tests/workload.rs; tests/slurm.rs runs the real srun). It reads srun's options as
# srun documents them (`--opt=value` or `--opt value`, up to the first word that is not an
# option), with pyxis' `--container-*` options, and runs the command once, as task 0 on
# node 0 (SLURM_NODEID=0, SLURM_PROCID=0, SLURMD_NODENAME=$SLURM_JOB_NODELIST):
#   --chdir DIR            the task starts in DIR;
#   --container-workdir P  the task starts in the host directory mounted at P by
#                          --container-mounts (the command runs on the host, so the mount is
#                          emulated by its source); a workdir no mount provides fails;
# the other options are accepted and checked for a value where srun needs one.
set -euo pipefail
chdir="" mounts="" workdir=""
while [[ $# -gt 0 ]]; do
  opt="$1"
  case "$opt" in
    --*=*) name="${opt%%=*}" value="${opt#*=}"; shift ;;
    --kill-on-bad-exit | --exclusive | --overlap) name="$opt" value=""; shift ;;
    --*) name="$opt" value="${2:?srun: $opt needs a value}"; shift 2 ;;
    -*) echo "srun stand-in: unsupported option $opt" >&2; exit 2 ;;
    *) break ;;
  esac
  case "$name" in
    --chdir | -D) chdir="$value" ;;
    --container-mounts) mounts="$value" ;;
    --container-workdir) workdir="$value" ;;
    --nodes | -N | --ntasks | --ntasks-per-node | --cpus-per-task | --kill-on-bad-exit | \
      --mpi | --network | --container-image | --exclusive | --overlap) ;;
    *) echo "srun stand-in: unknown option $name" >&2; exit 2 ;;
  esac
done
[[ $# -gt 0 ]] || { echo "srun: no command" >&2; exit 2; }
if [[ -n "$workdir" ]]; then
  found=""
  IFS=, read -ra list <<<"$mounts"
  for m in "${list[@]}"; do
    src="${m%%:*}" rest="${m#*:}" dst="${rest%%:*}"
    if [[ "$workdir" == "$dst" || "$workdir" == "$dst"/* ]]; then found="$src${workdir#"$dst"}"; break; fi
  done
  [[ -n "$found" ]] || { echo "srun stand-in: --container-workdir $workdir is not under any mount" >&2; exit 1; }
  cd "$found"
elif [[ -n "$chdir" ]]; then
  cd "$chdir"
fi
export SLURM_NODEID=0 SLURM_PROCID=0 SLURM_LOCALID=0 SLURMD_NODENAME="${SLURM_JOB_NODELIST:-node0}"
exec "$@"
