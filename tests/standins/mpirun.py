#!/usr/bin/env python3
"""A one-rank stand-in for Open MPI's `mpirun`, for tests that run the Kubernetes acceptance
TrainJob's command without a cluster (tests/workload.rs).

It reads mpirun's options as the Open MPI 4.1 and 5.0 `mpirun(1)` man pages document them,
up to the first word that is not an option (the program):
  --prefix DIR        Open MPI's install prefix on the remote nodes (must be absolute);
  --hostfile FILE     (also -hostfile, --machinefile) the hosts and their slots;
  -np N, -n N         the number of ranks (a positive integer);
  -N N                ranks per node (a positive integer; -np must be a multiple of it);
  -x NAME[=VALUE]     export NAME (from mpirun's environment, or VALUE) to every rank;
  --map-by X, --bind-to X, --mca NAME VALUE   accepted;
any other option is refused (exit 2). It records the parsed options as JSON in
$GPUSTACK_REC_DIR/mpirun.json and starts rank 0 as a process started over SSH would be: with
an environment holding only the exported variables (plus OMPI_COMM_WORLD_RANK=0 and
OMPI_COMM_WORLD_SIZE), so a program that is only on mpirun's PATH is not found unless PATH
is exported.
"""
import json
import os
import sys


def fail(msg):
    sys.stderr.write(f"mpirun stand-in: {msg}\n")
    sys.exit(2)


def positive(opt, v):
    if not v.isdigit() or int(v) < 1:
        fail(f"{opt} needs a positive integer, got {v!r}")
    return int(v)


args = sys.argv[1:]
rec = {"prefix": None, "hostfile": None, "np": None, "per_node": None, "export": [], "mca": []}
env = {}
i = 0
while i < len(args) and args[i].startswith("-"):
    opt = args[i]

    def value(n=1):
        if i + n >= len(args):
            fail(f"{opt} needs a value")
        return args[i + 1 : i + 1 + n]

    if opt == "--prefix":
        (v,) = value()
        if not v.startswith("/"):
            fail(f"--prefix must be absolute, got {v!r}")
        rec["prefix"] = v
        i += 2
    elif opt in ("--hostfile", "-hostfile", "--machinefile"):
        (rec["hostfile"],) = value()
        i += 2
    elif opt in ("-np", "-n"):
        rec["np"] = positive(opt, value()[0])
        i += 2
    elif opt == "-N":
        rec["per_node"] = positive(opt, value()[0])
        i += 2
    elif opt == "-x":
        (v,) = value()
        name, sep, val = v.partition("=")
        if not name or not (name[0].isalpha() or name[0] == "_"):
            fail(f"-x needs a variable name, got {v!r}")
        rec["export"].append(name)
        if sep:
            env[name] = val
        elif name in os.environ:
            env[name] = os.environ[name]
        i += 2
    elif opt in ("--map-by", "--bind-to"):
        value()
        i += 2
    elif opt == "--mca":
        rec["mca"].append(value(2))
        i += 3
    else:
        fail(f"unknown option {opt}")
if i == len(args):
    fail("no program")
if rec["np"] is None:
    fail("-np is required here (the hostfile's slots would otherwise decide)")
if rec["per_node"] is not None and rec["np"] % rec["per_node"] != 0:
    fail(f"-np {rec['np']} is not a multiple of -N {rec['per_node']}")
rec["program"] = args[i]
rec["args"] = args[i + 1 :]
with open(os.path.join(os.environ["GPUSTACK_REC_DIR"], "mpirun.json"), "w") as f:
    json.dump(rec, f)
env["OMPI_COMM_WORLD_RANK"] = "0"
env["OMPI_COMM_WORLD_SIZE"] = str(rec["np"])
# The recorder the test puts on the exported PATH needs to know where to write.
env["GPUSTACK_REC_DIR"] = os.environ["GPUSTACK_REC_DIR"]
# And the recorded output it prints (tests/slurm/shim.sh).
for k, v in os.environ.items():
    if k.startswith("GPUSTACK_SHIM_STDOUT_"):
        env[k] = v
path = env.get("PATH", "/usr/bin:/bin")
for d in path.split(":"):
    p = os.path.join(d, rec["program"])
    if "/" not in rec["program"] and os.path.isfile(p) and os.access(p, os.X_OK):
        os.execve(p, [rec["program"]] + rec["args"], env)
if "/" in rec["program"] and os.access(rec["program"], os.X_OK):
    os.execve(rec["program"], [rec["program"]] + rec["args"], env)
fail(f"{rec['program']}: not found on the ranks' PATH ({path})")
