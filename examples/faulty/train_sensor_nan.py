"""Sensor regression: each rank streams its own block of recordings and standardises it on the fly."""
import argparse
import math
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset

N_SENSORS = 16


def load_recordings(n=2048, seed=5):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, N_SENSORS, generator=g) * torch.linspace(0.5, 3.0, N_SENSORS) + 10
    x[n // 2:, 11] = 0.0  # sensor 11 was offline for the second half of the campaign
    y = (x[:, :4] - 10).pow(2).sum(1, keepdim=True) / 10
    return x, y


def standardise(x):
    return (x - x.mean(0)) / x.std(0)


class Trainer:
    def __init__(self, model, loader, rank, lr, log_every):
        self.model = DDP(model)
        self.loader = loader
        self.rank = rank
        self.opt = torch.optim.Adam(self.model.parameters(), lr=lr)
        self.log_every = log_every
        self.step = 0

    def _run_batch(self, x, y):
        self.opt.zero_grad()
        loss = nn.functional.smooth_l1_loss(self.model(x), y)
        if not math.isfinite(loss.item()):
            raise FloatingPointError(f"rank {self.rank}: loss is {loss.item()} at step {self.step}")
        loss.backward()
        nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        self.step += 1
        return loss.item()

    def train(self, epochs):
        for epoch in range(epochs):
            for i, (x, y) in enumerate(self.loader):
                loss = self._run_batch(x, y)
                if i % self.log_every == 0:
                    print(f"rank {self.rank} epoch {epoch} step {i} loss {loss:.4f}", flush=True)
            print(f"rank {self.rank} Epoch {epoch} | Steps: {len(self.loader)}", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--pg-timeout", type=int, default=10)
    args = p.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    x, y = load_recordings()
    block = len(x) // world
    xs, ys = x[rank * block:(rank + 1) * block], y[rank * block:(rank + 1) * block]
    loader = DataLoader(TensorDataset(standardise(xs), ys), batch_size=args.batch_size, shuffle=True)

    model = nn.Sequential(nn.Linear(N_SENSORS, 64), nn.SiLU(), nn.Linear(64, 1))
    Trainer(model, loader, rank, args.lr, args.log_every).train(args.epochs)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
