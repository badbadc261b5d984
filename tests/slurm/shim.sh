#!/usr/bin/env bash
# PATH shim for tests/slurm.rs, installed (copied) under the names vllm,
# all_reduce_perf, apptainer and srun (torchrun is tests/slurm/torchrun.py, a stand-in that
# implements torchrun's command line and starts the training script). It records how it was called, exactly, and exits 0
# (as a benchmark, after printing $GPUSTACK_SHIM_STDOUT_<name> when that is set):
#   $GPUSTACK_REC_DIR/<name>.<job id>.<node>.<task id>.argv   the arguments, NUL-separated
#   $GPUSTACK_REC_DIR/<name>.<job id>.<node>.<task id>.env    `env -0`
#   $GPUSTACK_REC_DIR/<name>.<job id>.<node>.<task id>.prog   how it was invoked ($0)
# As `srun`, it then runs the real srun ($GPUSTACK_REAL_SRUN) with the same arguments.
# As `apptainer`, it then runs what `apptainer exec [--nv] [--bind X] IMAGE CMD...` would
# run inside the image: CMD, on the host.
set -euo pipefail
name="$(basename "$0")"
rec="${GPUSTACK_REC_DIR:?GPUSTACK_REC_DIR is not set}/$name.${SLURM_JOB_ID:-nojob}.${SLURMD_NODENAME:-nonode}.${SLURM_PROCID:-0}"
# A second srun in the same batch step (Slingshot's OSU run after nccl-tests) is recorded
# beside the first as <rec>.<n>, so the first call's record stands.
if [[ "$name" == srun && -e "$rec.argv" ]]; then
  n=1
  while [[ -e "$rec.$n.argv" ]]; do n=$((n + 1)); done
  rec="$rec.$n"
fi
if [[ $# -gt 0 ]]; then printf '%s\0' "$@" >"$rec.argv"; else : >"$rec.argv"; fi
env -0 >"$rec.env"
printf '%s' "$0" >"$rec.prog"
if [[ "$name" == srun ]]; then
  exec "${GPUSTACK_REAL_SRUN:?GPUSTACK_REAL_SRUN is not set}" "$@"
fi
# As a benchmark (all_reduce_perf, osu_bw): print the recorded output named by
# GPUSTACK_SHIM_STDOUT_<name>, when set (tests/workload.rs judges it).
out_var="GPUSTACK_SHIM_STDOUT_$name"
if [[ "$name" != apptainer && -n "${!out_var:-}" ]]; then
  cat -- "${!out_var}"
fi
if [[ "$name" == apptainer ]]; then
  [[ "${1:-}" == exec ]] || { echo "apptainer shim: only 'exec' is supported" >&2; exit 2; }
  shift
  binds="" pwd=""
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --nv | --cleanenv | --containall) shift ;;
      --bind | -B) binds="$binds,$2"; shift 2 ;;
      --bind=*) binds="$binds,${1#--bind=}"; shift ;;
      --pwd) pwd="$2"; shift 2 ;;
      --pwd=*) pwd="${1#--pwd=}"; shift ;;
      --env) shift 2 ;;
      --env=*) shift ;;
      -*) echo "apptainer shim: unknown option $1" >&2; exit 2 ;;
      *) break ;;
    esac
  done
  [[ $# -ge 2 ]] || { echo "apptainer shim: expected IMAGE CMD..." >&2; exit 2; }
  shift # the image
  # --pwd: start in the host directory bound at that path (the command runs on the host,
  # so the bind is emulated by its source); a path no bind provides fails, as it would in
  # the container.
  if [[ -n "$pwd" ]]; then
    found=""
    IFS=, read -ra list <<<"${binds#,}"
    for b in "${list[@]}"; do
      src="${b%%:*}" rest="${b#*:}" dst="${rest%%:*}"
      if [[ "$pwd" == "$dst" || "$pwd" == "$dst"/* ]]; then found="$src${pwd#"$dst"}"; break; fi
    done
    [[ -n "$found" ]] || { echo "apptainer shim: --pwd $pwd is not under any --bind target" >&2; exit 2; }
    cd "$found"
  fi
  exec "$@"
fi
