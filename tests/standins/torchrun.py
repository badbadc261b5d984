#!/usr/bin/env python3
"""A stand-in for torchrun (torch.distributed.run) that implements its documented command line.

It parses torchrun's options as torchrun does (dash and underscore spellings, `PET_<NAME>`
environment defaults, `training_script` followed by its arguments, unparsed), checks them as
torchrun does, and starts `--nproc-per-node` workers of the training script the way torchrun's
launcher does:

  * by default `python -u training_script args...` (sys.executable),
  * with `-m`/`--module` `python -u -m training_script args...`,
  * with `--no-python` `training_script args...`,

each with LOCAL_RANK, RANK, GROUP_RANK, LOCAL_WORLD_SIZE, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT and TORCHELASTIC_RUN_ID set. It does not rendezvous: a node's rank is
`--node-rank`, else SLURM_NODEID, else 0. It exits with the first failing worker's code.
Reference: https://docs.pytorch.org/docs/stable/elastic/run.html and torch/distributed/run.py.

When GPUSTACK_REC_DIR is set it also records its own argv and environment (NUL-separated)
and how it was invoked as `torchrun.<job>.<node>.<task>.{argv,env,prog}`, as
tests/slurm/shim.sh records the other programs.
"""
import argparse
import os
import subprocess
import sys


class Env(argparse.Action):
    """torchrun's `env` action: the default comes from PET_<DEST> when set."""

    def __init__(self, dest, default=None, required=False, **kwargs):
        env_name = f"PET_{dest.upper()}"
        default = os.environ.get(env_name, default)
        if default:
            required = False
        super().__init__(dest=dest, default=default, required=required, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)


class Check(argparse.Action):
    """torchrun's `check_env` flag: true when given or when PET_<DEST> is 1."""

    def __init__(self, dest, default=False, **kwargs):
        env_name = f"PET_{dest.upper()}"
        default = bool(int(os.environ.get(env_name, "1" if default else "0")))
        super().__init__(dest=dest, const=True, default=default, nargs=0, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, self.const)


def parser():
    p = argparse.ArgumentParser(prog="torchrun", allow_abbrev=False)
    o = p.add_argument
    o("--nnodes", action=Env, type=str, default="1:1")
    o("--nproc-per-node", "--nproc_per_node", action=Env, type=str, default="1")
    o("--rdzv-backend", "--rdzv_backend", action=Env, type=str, default="static")
    o("--rdzv-endpoint", "--rdzv_endpoint", action=Env, type=str, default="")
    o("--rdzv-id", "--rdzv_id", action=Env, type=str, default="none")
    o("--rdzv-conf", "--rdzv_conf", action=Env, type=str, default="")
    o("--standalone", action=Check)
    o("--max-restarts", "--max_restarts", action=Env, type=int, default=0)
    o("--monitor-interval", "--monitor_interval", action=Env, type=float, default=0.1)
    o("--start-method", "--start_method", action=Env, type=str, default="spawn",
      choices=["spawn", "fork", "forkserver"])
    o("--role", action=Env, type=str, default="default")
    o("-m", "--module", action=Check)
    o("--no-python", "--no_python", action=Check)
    o("--run-path", "--run_path", action=Check)
    o("--log-dir", "--log_dir", action=Env, type=str, default=None)
    o("-r", "--redirects", action=Env, type=str, default="0")
    o("-t", "--tee", action=Env, type=str, default="0")
    o("--local-ranks-filter", "--local_ranks_filter", action=Env, type=str, default="")
    o("--node-rank", "--node_rank", action=Env, type=int, default=0)
    o("--master-addr", "--master_addr", action=Env, type=str, default="127.0.0.1")
    o("--master-port", "--master_port", action=Env, type=int, default=29500)
    o("--local-addr", "--local_addr", action=Env, type=str, default=None)
    o("training_script", type=str)
    o("training_script_args", nargs=argparse.REMAINDER)
    return p


def record():
    rec = os.environ.get("GPUSTACK_REC_DIR")
    if not rec:
        return
    stem = "torchrun.{}.{}.{}".format(
        os.environ.get("SLURM_JOB_ID", "nojob"),
        os.environ.get("SLURMD_NODENAME", "nonode"),
        os.environ.get("SLURM_PROCID", "0"),
    )
    with open(os.path.join(rec, stem + ".argv"), "wb") as f:
        f.write(b"".join(a.encode() + b"\0" for a in sys.argv[1:]))
    with open(os.path.join(rec, stem + ".env"), "wb") as f:
        f.write(b"".join(f"{k}={v}".encode() + b"\0" for k, v in os.environ.items()))
    with open(os.path.join(rec, stem + ".prog"), "w", encoding="utf-8") as f:
        f.write(sys.argv[0])


def main():
    record()
    args = parser().parse_args()
    nnodes = args.nnodes.split(":")
    if len(nnodes) not in (1, 2) or not all(n.isdigit() and int(n) > 0 for n in nnodes):
        sys.exit(f"torchrun: invalid --nnodes {args.nnodes!r}: expected N or MIN:MAX")
    max_nodes = int(nnodes[-1])
    if args.nproc_per_node in ("cpu", "gpu", "auto"):
        nproc = 1
    elif args.nproc_per_node.isdigit() and int(args.nproc_per_node) > 0:
        nproc = int(args.nproc_per_node)
    else:
        sys.exit(f"torchrun: unsupported nproc_per_node value: {args.nproc_per_node}")
    if args.module and args.no_python:
        sys.exit("torchrun: Don't use both the '--no-python' flag and the '--module' flag at the same time.")
    if args.run_path and (args.module or args.no_python):
        sys.exit("torchrun: --run-path cannot be used with --module or --no-python")
    if args.standalone:
        args.rdzv_backend, args.rdzv_endpoint, args.rdzv_id = "c10d", "localhost:0", "standalone"
    if args.rdzv_backend == "c10d" and not args.rdzv_endpoint:
        sys.exit("torchrun: the c10d rendezvous needs --rdzv-endpoint HOST[:PORT]")
    if args.rdzv_backend not in ("static", "c10d", "etcd", "etcd-v2"):
        sys.exit(f"torchrun: unknown rendezvous backend {args.rdzv_backend!r}")
    if args.rdzv_endpoint:
        host, _, port = args.rdzv_endpoint.rpartition(":")
        if not host or not port.isdigit():
            host, port = args.rdzv_endpoint, "29400"
        master_addr, master_port = host, port
    else:
        master_addr, master_port = args.master_addr, str(args.master_port)
    node_rank = args.node_rank
    if node_rank == 0 and args.rdzv_backend != "static":
        node_rank = int(os.environ.get("SLURM_NODEID", "0"))
    if node_rank >= max_nodes:
        sys.exit(f"torchrun: node rank {node_rank} is not below --nnodes {args.nnodes}")

    if args.no_python:
        cmd = [args.training_script]
    else:
        cmd = [sys.executable, "-u"] + (["-m"] if args.module else []) + [args.training_script]
    cmd += args.training_script_args

    workers = []
    for local in range(nproc):
        env = dict(os.environ)
        env.update(
            LOCAL_RANK=str(local),
            RANK=str(node_rank * nproc + local),
            GROUP_RANK=str(node_rank),
            ROLE_RANK=str(node_rank * nproc + local),
            ROLE_NAME=args.role,
            LOCAL_WORLD_SIZE=str(nproc),
            WORLD_SIZE=str(max_nodes * nproc),
            ROLE_WORLD_SIZE=str(max_nodes * nproc),
            MASTER_ADDR=master_addr,
            MASTER_PORT=str(master_port),
            TORCHELASTIC_RUN_ID=args.rdzv_id,
            TORCHELASTIC_RESTART_COUNT="0",
            TORCHELASTIC_MAX_RESTARTS=str(args.max_restarts),
        )
        try:
            workers.append(subprocess.Popen(cmd, env=env))
        except OSError as e:
            sys.exit(f"torchrun: cannot start {cmd[0]!r}: {e}")
    code = 0
    for w in workers:
        rc = w.wait()
        if rc != 0 and code == 0:
            code = rc
    sys.exit(code)


if __name__ == "__main__":
    main()
