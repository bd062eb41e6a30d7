"""A healthy DDP job with the most common pause in training: every few steps rank 0 evaluates (seconds of
CPU work) while the other ranks wait at a barrier.  It ends `ok`; nothing in it hangs.

    torchrun --nproc-per-node 2 train_eval_pause.py [--steps 12] [--every 4] [--eval-s 5]
"""
import argparse
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def evaluate(model, seconds):
    """Score a held-out set: CPU work for about ``seconds`` (timed by the work done, not by sleeping)."""
    x = torch.randn(256, 256)
    t0, batches = time.monotonic(), 0
    with torch.no_grad():
        while time.monotonic() - t0 < seconds:
            x = torch.tanh(x @ x.T / 256)
            batches += 1
    return batches


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--every", type=int, default=4)
    p.add_argument("--eval-s", type=float, default=5.0)
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = DDP(nn.Linear(32, 32))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(1, args.steps + 1):
        loss = model(torch.randn(16, 32)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % args.every == 0:
            if rank == 0:
                print(f"step {step}: evaluated {evaluate(model, args.eval_s)} batches", flush=True)
            dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank}: done", flush=True)


if __name__ == "__main__":
    main()
