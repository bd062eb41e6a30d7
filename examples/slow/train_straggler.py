"""A DDP job that runs, but slower than it should: one rank holds the others back, or none does.

    torchrun --nproc-per-node 2 train_straggler.py --cause data --slow-rank 1 --steps 60

--cause data    the slow rank's shard needs heavier preprocessing (its __getitem__ works longer per item)
--cause extra   rank --slow-rank computes extra metrics after every step while the others go on to the next
                all_reduce (rank-0 logging)
--cause none    a balanced job: every rank does the same work
"""
import argparse
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler


def burn(seconds):
    """CPU work for about ``seconds`` (tokenising, augmenting, decoding: anything that keeps a core busy)."""
    x, t0 = torch.randn(64, 64), time.monotonic()
    while time.monotonic() - t0 < seconds:
        x = torch.tanh(x @ x)
    return x


class Shard(Dataset):
    def __init__(self, n, per_item_s):
        self.n, self.per_item_s = n, per_item_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        burn(self.per_item_s)  # preprocessing
        return torch.randn(32), torch.randn(8)


def metrics(model, seconds):
    burn(seconds)  # e.g. a confusion matrix over the whole buffer, every step
    return sum(p.norm().item() for p in model.parameters())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cause", choices=["data", "extra", "none"], default="data")
    p.add_argument("--slow-rank", type=int, default=1)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--item-s", type=float, default=0.004, help="preprocessing per item on a normal rank")
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    slow = rank == args.slow_rank
    per_item = args.item_s * (8 if slow and args.cause == "data" else 1)
    batch = 8
    ds = Shard(args.steps * batch * world, per_item)
    loader = DataLoader(ds, batch_size=batch, sampler=DistributedSampler(ds, shuffle=False))
    model = DDP(nn.Sequential(nn.Linear(32, 256), nn.ReLU(), nn.Linear(256, 8)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    t0 = time.monotonic()
    for step, (x, y) in enumerate(loader, 1):
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if slow and args.cause == "extra":
            metrics(model, 8 * batch * args.item_s)
        if step % 20 == 0:
            print(f"[rank {rank}] step {step} loss {loss.item():.3f} {step / (time.monotonic() - t0):.1f} steps/s",
                  flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
