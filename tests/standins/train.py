#!/usr/bin/env python3
"""The training program of the workload tests: it records how it was started.

Copied into a test project as `train.py` and `pkg/train.py`, it is started by a torchrun
(the stand-in in tests/standins/torchrun.py, or the real one) as `train.py …`,
`-m pkg.train …` or `-m train …`. Each worker writes
`$GPUSTACK_REC_DIR/script.<job>.<node>.<local rank>.json` with its arguments, its
interpreter's command line, its working directory and the rank variables torchrun sets.
"""
import json
import os
import sys


def main():
    rec = os.environ["GPUSTACK_REC_DIR"]
    record = {
        "argv": sys.argv[1:],
        "orig_argv": getattr(sys, "orig_argv", []),
        "module": __spec__.name if __spec__ is not None else None,
        "cwd": os.getcwd(),
        "code_in_cwd": os.path.exists("train.py"),
        "env": {
            k: os.environ.get(k)
            for k in [
                "LOCAL_RANK",
                "RANK",
                "WORLD_SIZE",
                "LOCAL_WORLD_SIZE",
                "MASTER_ADDR",
                "MASTER_PORT",
                "DATASETS_DIR",
                "CHECKPOINTS_DIR",
            ]
        },
    }
    name = "script.{}.{}.{}.json".format(
        os.environ.get("SLURM_JOB_ID", "nojob"),
        os.environ.get("SLURMD_NODENAME", "nonode"),
        os.environ["LOCAL_RANK"],
    )
    with open(os.path.join(rec, name), "w", encoding="utf-8") as f:
        json.dump(record, f)


if __name__ == "__main__":
    main()
