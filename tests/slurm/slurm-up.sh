#!/usr/bin/env bash
# Starts a throw-away Slurm cluster on loopback for tests/slurm.rs: munged with a private
# key and socket, slurmctld, and one slurmd per node (multiple-slurmd mode, `slurmd -N`),
# all in the foreground under setsid with their PIDs in $BASE/pids/ (slurm-down.sh stops
# exactly those). The configuration follows Slurm's slurm.conf(5), gres.conf(5) and
# slurmd(8) (`-N NODENAME` for the multiple-slurmd mode), https://slurm.schedmd.com/.
#
# usage: PARTITIONS="gpu:8:8 normal:16:4" [NODE_CPUS=16] [CTLD_PORT=6817] \
#        [SPANK_PLUGIN=/abs/stub.so] slurm-up.sh BASE_DIR
#   PARTITIONS: NAME:NODES:GPUS_PER_NODE, one node group each (nodes NAME1..NAMEn); the
#   first is the default partition. Fake GPUs are gres File= symlinks to /dev/null.
#   slurmd ports are CTLD_PORT+1, +2, ...
# Needs: slurmctld slurmd slurm-client munge (Debian 12), root, /sys/fs/cgroup.
set -euo pipefail
BASE="${1:?usage: slurm-up.sh BASE_DIR}"
PARTITIONS="${PARTITIONS:-gpu:1:8}"
NODE_CPUS="${NODE_CPUS:-16}"
CTLD_PORT="${CTLD_PORT:-6817}"

rm -rf "${BASE:?}"/{state,spool,log,run,etc,dev,pids}
mkdir -p "$BASE"/{etc,munge,state,spool,log,run,dev,pids}
chmod 0700 "$BASE/munge"

stop_started() { # kill only the PIDs recorded here
  local f pid
  for f in "$BASE"/pids/*.pid; do
    [[ -s "$f" ]] || continue
    pid="$(cat "$f")"
    kill "$pid" 2>/dev/null || continue
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  return 0
}
trap 'stop_started' ERR

start_bg() { # start_bg NAME CMD...: a foreground daemon in its own session, PID recorded
  local name="$1"
  shift
  setsid "$@" </dev/null >>"$BASE/log/$name.out" 2>&1 &
  echo $! >"$BASE/pids/$name.pid"
}

[[ -s "$BASE/munge/munge.key" ]] || mungekey --create --keyfile="$BASE/munge/munge.key" --force
chmod 0400 "$BASE/munge/munge.key"
MUNGE_SOCKET="$BASE/munge/munge.socket.2"
start_bg munged munged --foreground --force \
  --socket="$MUNGE_SOCKET" --key-file="$BASE/munge/munge.key" \
  --pid-file="$BASE/munge/munged.pid" --log-file="$BASE/munge/munged.log" \
  --seed-file="$BASE/munge/munged.seed"
for _ in $(seq 50); do [[ -S "$MUNGE_SOCKET" ]] && break; sleep 0.1; done
munge --socket="$MUNGE_SOCKET" -n | unmunge --socket="$MUNGE_SOCKET" >/dev/null

max_gpus=0
for p in $PARTITIONS; do
  IFS=: read -r _ _ gpus <<<"$p"
  ((gpus > max_gpus)) && max_gpus=$gpus
done
# slurmd refuses a gres File= that is not a device; a machine whose /dev/null was replaced
# by a regular file (a stray `rm /dev/null` followed by `> /dev/null`) fails here, loudly.
if [[ ! -c /dev/null ]]; then
  echo "slurm-up: /dev/null is not a character device here ($(stat -c %F /dev/null)); the fake GPUs need one" >&2
  echo "slurm-up: repair it as root: rm -f /dev/null && mknod -m 666 /dev/null c 1 3" >&2
  exit 1
fi
for ((i = 0; i < max_gpus; i++)); do ln -sf /dev/null "$BASE/dev/nvidia$i"; done

cat >"$BASE/etc/slurm.conf" <<CONF
ClusterName=ci
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=${CTLD_PORT}
AuthType=auth/munge
AuthInfo=socket=${MUNGE_SOCKET}
CredType=cred/munge
StateSaveLocation=${BASE}/state
SlurmdSpoolDir=${BASE}/spool/%n
SlurmctldPidFile=${BASE}/run/slurmctld.pid
SlurmdPidFile=${BASE}/run/slurmd-%n.pid
SlurmctldLogFile=${BASE}/log/slurmctld.log
SlurmdLogFile=${BASE}/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
SlurmdParameters=config_overrides
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1,bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MinJobAge=600
GresTypes=gpu
CONF
: >"$BASE/etc/gres.conf"
echo "AutoDetect=off" >>"$BASE/etc/gres.conf"
port=$((CTLD_PORT + 1))
nodes_all=()
default=YES
for p in $PARTITIONS; do
  IFS=: read -r name count gpus <<<"$p"
  if ((count == 1)); then list="${name}1"; else list="${name}[1-$count]"; fi
  echo "NodeName=$list NodeHostname=localhost NodeAddr=127.0.0.1 Port=$port-$((port + count - 1)) CPUs=$NODE_CPUS RealMemory=2097152 Gres=gpu:$gpus State=UNKNOWN" >>"$BASE/etc/slurm.conf"
  echo "PartitionName=$name Nodes=$list Default=$default MaxTime=INFINITE State=UP" >>"$BASE/etc/slurm.conf"
  echo "NodeName=$list Name=gpu File=$BASE/dev/nvidia[0-$((gpus - 1))]" >>"$BASE/etc/gres.conf"
  for ((n = 1; n <= count; n++)); do nodes_all+=("$name$n"); done
  port=$((port + count))
  default=NO
done
if [[ -n "${SPANK_PLUGIN:-}" ]]; then echo "required ${SPANK_PLUGIN}" >"$BASE/etc/plugstack.conf"; fi
export SLURM_CONF="$BASE/etc/slurm.conf"

start_bg slurmctld slurmctld -D -i
for _ in $(seq 100); do
  (: >"/dev/tcp/127.0.0.1/$CTLD_PORT") 2>/dev/null && break
  sleep 0.05
done
for node in "${nodes_all[@]}"; do
  mkdir -p "$BASE/spool/$node"
  start_bg "slurmd-$node" slurmd -D -N "$node"
done

want=${#nodes_all[@]}
idle=0
for _ in $(seq 150); do
  idle="$( (sinfo -h -N -t idle -o '%N' 2>/dev/null || true) | sort -u | wc -l)"
  ((idle == want)) && break
  for f in "$BASE"/pids/*.pid; do
    kill -0 "$(cat "$f")" 2>/dev/null || {
      echo "$(basename "$f" .pid) exited" >&2
      idle=-1
      break 2
    }
  done
  sleep 0.2
done
if ((idle != want)); then
  echo "slurm-up: only $idle of $want nodes became idle" >&2
  tail -n 5 "$BASE"/log/*.log 2>/dev/null | head -n 60 >&2 || true
  stop_started
  exit 1
fi
echo "slurm up: $want nodes; export SLURM_CONF=$SLURM_CONF"
