import argparse
import os
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset


def load_table(n_rows, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_rows, 16)).astype(np.float32)
    y = (x[:, :4].sum(1, keepdims=True) + 0.1 * rng.normal(size=(n_rows, 1))).astype(np.float32)
    return x, y


def shard_rows(n_rows, rank, world):
    rows_per_rank = n_rows // world
    start = rank * rows_per_rank
    # the last rank also takes the leftover rows so no sample is dropped
    stop = n_rows if rank == world - 1 else start + rows_per_rank
    return start, stop


def train(args):
    rank, world = dist.get_rank(), dist.get_world_size()
    x, y = load_table(args.rows)
    start, stop = shard_rows(len(x), rank, world)
    ds = TensorDataset(torch.from_numpy(x[start:stop]), torch.from_numpy(y[start:stop]))
    loader = DataLoader(ds, batch_size=args.batch_size, shuffle=True, generator=torch.Generator().manual_seed(rank))

    model = DDP(nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 1)))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs * len(loader))

    for epoch in range(args.epochs):
        model.train()
        total, n = 0.0, 0
        for xb, yb in loader:
            loss = nn.functional.mse_loss(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item() * len(xb)
            n += len(xb)
        print(f"rank {rank}: Epoch {epoch} | Steps: {len(loader)} | rows {start}:{stop} | mse {total / n:.4f}", flush=True)

    if rank == 0:
        torch.save(model.module.state_dict(), args.out)
        print(f"saved {args.out}")


def main():
    p = argparse.ArgumentParser(description="tabular regression, DDP on CPU")
    p.add_argument("--rows", type=int, default=2049)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--out", default="/tmp/tabular_mlp.pt")
    p.add_argument("--pg-timeout", type=int, default=10)
    args = p.parse_args()

    dist.init_process_group("gloo", init_method="env://", timeout=timedelta(seconds=args.pg_timeout))
    train(args)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
