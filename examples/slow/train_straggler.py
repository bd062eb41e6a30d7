"""A DDP job that runs, but slower than it should: one rank holds the others back, or none does.

    torchrun --nproc-per-node 2 train_straggler.py --cause data --slow-rank 1 --steps 60
    torchrun --nproc-per-node 2 train_straggler.py --cause data --seconds 20    # as many steps as fit in 20 s

--cause data    the slow rank's shard needs heavier preprocessing (its __getitem__ works longer per item)
--cause extra   rank --slow-rank computes extra metrics after every step while the others go on to the next
                all_reduce (rank-0 logging)
--cause workers the slow rank's DataLoader has no worker processes while the others have two (each item's
                preprocessing then runs in its training loop)
--cause cpu     another process shares the slow rank's core (every rank pinned to one core; on rank --slow-rank's
                a busy neighbour, as another job's process on a shared node)
--cause none    a balanced job: every rank does the same work
"""
import argparse
import atexit
import os
import subprocess
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler


def burn(units):
    """A fixed amount of CPU work (tokenising, augmenting, decoding): ``units`` small matmuls, 25-60 us each."""
    x = torch.randn(64, 64)
    for _ in range(units):
        x = torch.tanh(x @ x / 64)
    return x


class Shard(Dataset):
    def __init__(self, n, per_item):
        self.n, self.per_item = n, per_item

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        burn(self.per_item)  # preprocessing
        return torch.randn(32), torch.randn(8)


def metrics(model, units):
    burn(units)  # e.g. a confusion matrix over the whole buffer, every step
    return sum(p.norm().item() for p in model.parameters())


def busy_neighbour(core):
    """Another process spinning on ``core``; it ends with this rank (killed at exit, or when its parent is gone)."""
    spin = "import os\np = os.getppid()\nwhile os.getppid() == p:\n    pass\n"
    neighbour = subprocess.Popen([sys.executable, "-c", spin], preexec_fn=lambda: os.sched_setaffinity(0, {core}))
    atexit.register(neighbour.kill)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cause", choices=["data", "extra", "workers", "cpu", "none"], default="data")
    p.add_argument("--slow-rank", type=int, default=1)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--seconds", type=float, default=None,
                   help="stop after this many seconds of training instead (the ranks agree every 10 steps, as "
                        "Lightning's max_time does); --steps is then the most")
    p.add_argument("--item-work", type=int, default=300, help="preprocessing per item on a normal rank (burn units)")
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    slow = rank == args.slow_rank
    per_item = args.item_work * (8 if slow and args.cause == "data" else 4 if args.cause == "workers" else 1)
    if args.cause == "cpu":  # one core each; the slow rank's is shared with a busy neighbour
        cores = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cores[rank % len(cores)]})
        if slow:
            busy_neighbour(cores[rank % len(cores)])
    workers = (0 if slow else 2) if args.cause == "workers" else 0
    batch = 8
    steps = args.steps if args.seconds is None else max(args.steps, 100000)
    ds = Shard(steps * batch * world, per_item)
    loader = DataLoader(ds, batch_size=batch, sampler=DistributedSampler(ds, shuffle=False), num_workers=workers,
                        persistent_workers=workers > 0)
    model = DDP(nn.Sequential(nn.Linear(32, 256), nn.ReLU(), nn.Linear(256, 8)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    t0 = time.monotonic()
    for step, (x, y) in enumerate(loader, 1):
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if slow and args.cause == "extra":
            metrics(model, 8 * batch * args.item_work)
        if step % 20 == 0:
            print(f"[rank {rank}] step {step} loss {loss.item():.3f} {step / (time.monotonic() - t0):.1f} steps/s",
                  flush=True)
        if args.seconds is not None and step % 10 == 0:
            late = torch.tensor([float(time.monotonic() - t0 > args.seconds)])
            dist.all_reduce(late, op=dist.ReduceOp.MAX)  # every rank stops at the same step
            if late.item():
                break
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
