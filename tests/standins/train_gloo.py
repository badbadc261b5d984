#!/usr/bin/env python3
"""The training program of the live tier (tests/live.rs): a real torch.distributed job.

Started by the real torchrun as the generated Slurm and Kubernetes launches start it, each
worker joins the process group over gloo (CPU), all-reduces its rank + 1 and writes
`$GPUSTACK_REC_DIR/gloo.<launch>.<rank>.json` with its arguments, the rank variables torchrun
set and the reduced value (the sum over all workers, the same on every worker).
"""
import json
import os
import sys

import torch
import torch.distributed as dist


def main():
    dist.init_process_group(backend="gloo")
    rank = dist.get_rank()
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    record = {
        "argv": sys.argv[1:],
        "rank": rank,
        "world_size": dist.get_world_size(),
        "local_rank": os.environ.get("LOCAL_RANK"),
        "all_reduce": t.item(),
        "torch": torch.__version__,
    }
    dist.destroy_process_group()
    name = "gloo.{}.{}.json".format(os.environ.get("GPUSTACK_LAUNCH", "run"), rank)
    with open(os.path.join(os.environ["GPUSTACK_REC_DIR"], name), "w", encoding="utf-8") as f:
        json.dump(record, f)


if __name__ == "__main__":
    main()
