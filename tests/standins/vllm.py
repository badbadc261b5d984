#!/usr/bin/env python3
"""A stand-in for vLLM's CLI, `vllm serve`, that parses the command line as vLLM does.

`vllm serve [model_tag] [options]`: the model is the positional `model_tag` (or `--model`),
options are vLLM's engine and server arguments, spelled with dashes or underscores (vLLM's
FlexibleArgumentParser accepts both). Only the options gpustack writes are modelled; any
other option is an error, so a typo fails the test. It records what the server would start
with as JSON in $GPUSTACK_REC_DIR/vllm.<job>.<node>.json and exits 0.
Reference: https://docs.vllm.ai/en/stable/cli/serve.html
"""
import argparse
import json
import os
import sys


def main():
    argv = [a.replace("_", "-") if a.startswith("--") and "=" not in a else a for a in sys.argv[1:]]
    p = argparse.ArgumentParser(prog="vllm", allow_abbrev=False)
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", allow_abbrev=False)
    s.add_argument("model_tag", nargs="?")
    s.add_argument("--model")
    s.add_argument("--host")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    s.add_argument("--pipeline-parallel-size", "-pp", type=int, default=1)
    s.add_argument("--max-model-len", type=int)
    # Multi-node multiprocessing (vLLM's LeaderWorkerSet form): the group's size, this
    # node's rank, the first node's address; `--headless` runs the engine without the API.
    s.add_argument("--nnodes", "-n", type=int, default=1)
    s.add_argument("--node-rank", "-r", type=int, default=0)
    s.add_argument("--master-addr")
    s.add_argument("--headless", action="store_true")
    args = p.parse_args(argv)
    model = args.model_tag or args.model
    if not model:
        sys.exit("vllm serve: no model given")
    if args.nnodes > 1 and not args.master_addr:
        sys.exit("vllm serve: --nnodes > 1 needs --master-addr")
    if not 0 <= args.node_rank < args.nnodes:
        sys.exit("vllm serve: --node-rank must be in [0, --nnodes)")
    if args.headless and args.node_rank == 0:
        sys.exit("vllm serve: node 0 serves the API; --headless is for the other nodes")
    rec = os.environ["GPUSTACK_REC_DIR"]
    name = "vllm.{}.{}.json".format(
        os.environ.get("SLURM_JOB_ID", "nojob"), os.environ.get("SLURMD_NODENAME", "nonode")
    )
    with open(os.path.join(rec, name), "w", encoding="utf-8") as f:
        json.dump(
            {
                "model": model,
                "port": args.port,
                "tensor_parallel_size": args.tensor_parallel_size,
                "pipeline_parallel_size": args.pipeline_parallel_size,
                "max_model_len": args.max_model_len,
                "nnodes": args.nnodes,
                "node_rank": args.node_rank,
                "master_addr": args.master_addr,
                "headless": args.headless,
                "model_visible": os.path.isabs(model) and os.path.isdir(model),
            },
            f,
        )


if __name__ == "__main__":
    main()
