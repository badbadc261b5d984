#!/usr/bin/env bash
# Stops the daemons slurm-up.sh started: exactly the PIDs it recorded (never by name).
# slurmd may sit in a register retry and ignore TERM for a while: KILL after 5 s.
BASE="${1:?usage: slurm-down.sh BASE_DIR}"
pids=()
for f in "$BASE"/pids/slurmd-*.pid "$BASE/pids/slurmctld.pid" "$BASE/pids/munged.pid"; do
  [[ -s "$f" ]] || continue
  pid="$(cat "$f")"
  kill "$pid" 2>/dev/null && pids+=("$pid")
  rm -f "$f"
done
for _ in $(seq 50); do
  alive=0
  for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
  ((alive)) || exit 0
  sleep 0.1
done
for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null; done
exit 0
