"""The hang after rank 0 loads a checkpoint: a collective inside rank-0-only checkpoint loading code.

    if rank == 0:
        state = torch.load(path)
        dist.broadcast(step, src=0)      # BUG: only rank 0 calls it
    dist.all_reduce(grad)                # the next training step, on every rank

Rank 0 waits in its broadcast, the others in the all_reduce: neither completes, and both time out
after the process group timeout (with a 30 min timeout: ``Timed out waiting 1800000ms for recv operation
to complete``).  ``--fixed`` moves the broadcast out of the ``if``: every rank calls it, and the step goes
through.

Run by hand::

    torchrun --nproc-per-node 2 -m nbhelpers.workers.ckpt_deadlock --timeout 3
    torchrun --nproc-per-node 2 -m nbhelpers.workers.ckpt_deadlock --timeout 3 --fixed
"""
from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

from nbhelpers.runtime.events import emit, stage
from nbhelpers.workers.common import init, log


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m nbhelpers.workers.ckpt_deadlock", description=__doc__.split("\n")[0])
    p.add_argument("--timeout", type=float, default=3.0, help="process group timeout, seconds")
    p.add_argument("--fixed", action="store_true", help="every rank calls the broadcast")
    p.add_argument("--dir", default=None)
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    import torch

    from nbhelpers.checkpoint import atomic_save

    dist = init("gloo", args.timeout)
    rank = dist.get_rank()
    base = Path(args.dir or Path(os.environ.get("NBH_RUN_DIR", ".")) / "ckpt-deadlock")
    path = base / "best_stg1.pt"
    try:
        with stage("save"):
            if rank == 0:
                atomic_save({"step": torch.tensor([42.0]), "w": torch.ones(1000)}, path)
            dist.barrier()
        step = torch.zeros(1)
        with stage("load", fixed=args.fixed):
            if rank == 0:
                state = torch.load(path, map_location="cpu")
                step.copy_(state["step"])
                if not args.fixed:
                    dist.broadcast(step, src=0)  # the bug: a collective only rank 0 reaches
            if args.fixed:
                dist.broadcast(step, src=0)
        with stage("train_step"):
            grad = torch.ones(1000)
            dist.all_reduce(grad)
        log(f"resumed at step {step.item():.0f}; the training step went through")
        emit("done", "ok")
    finally:
        if rank == 0:
            shutil.rmtree(base, ignore_errors=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
