"""Binary classifier with a validation loop and early stopping; DDP on CPU (gloo)."""
import argparse
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset, random_split
from torch.utils.data.distributed import DistributedSampler


def is_main_process():
    return dist.get_rank() == 0


class EarlyStopping:
    def __init__(self, patience=3, min_delta=1e-4):
        self.patience, self.min_delta = patience, min_delta
        self.best, self.bad_epochs = float("inf"), 0

    def step(self, val_loss):
        if val_loss < self.best - self.min_delta:
            self.best, self.bad_epochs = val_loss, 0
        else:
            self.bad_epochs += 1
        return self.bad_epochs >= self.patience


def make_data(n=2560, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 12, generator=g)
    y = ((x[:, 0] * x[:, 1] + x[:, 2]) > 0).float()
    return TensorDataset(x, y)


@torch.no_grad()
def validate(model, loader, stopper):
    model.eval()
    stats = torch.zeros(2)  # [sum of losses, number of samples]
    for x, y in loader:
        stats[0] += F.binary_cross_entropy_with_logits(model(x).squeeze(1), y, reduction="sum")
        stats[1] += len(y)
    model.train()

    stop = torch.zeros(1)
    if is_main_process():
        # rank 0 owns the early-stopping state; tell everybody whether to stop
        stop[0] = float(stopper.step((stats[0] / stats[1]).item()))
        dist.broadcast(stop, src=0)
        dist.all_reduce(stats)
        print(f"  val loss {(stats[0] / stats[1]).item():.4f} (best {stopper.best:.4f}, bad epochs {stopper.bad_epochs})")
    else:
        dist.all_reduce(stats)
        dist.broadcast(stop, src=0)
    return bool(stop.item())


def train(args):
    rank = dist.get_rank()
    train_set, val_set = random_split(make_data(), [2048, 512], generator=torch.Generator().manual_seed(1))
    train_sampler = DistributedSampler(train_set)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, sampler=train_sampler)
    val_loader = DataLoader(val_set, batch_size=256, sampler=DistributedSampler(val_set, shuffle=False))

    model = DDP(nn.Sequential(nn.Linear(12, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1)))
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    stopper = EarlyStopping(patience=args.patience) if is_main_process() else None

    for epoch in range(args.max_epochs):
        train_sampler.set_epoch(epoch)
        for x, y in train_loader:
            loss = F.binary_cross_entropy_with_logits(model(x).squeeze(1), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if rank == 0:
            print(f"Epoch {epoch} | Steps: {len(train_loader)} | last batch loss {loss.item():.4f}")
        if validate(model, val_loader, stopper):
            if rank == 0:
                print(f"early stop at epoch {epoch}")
            break


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--max-epochs", type=int, default=4)
    p.add_argument("--patience", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--pg-timeout", type=int, default=10)
    args = p.parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    train(args)
    dist.destroy_process_group()
