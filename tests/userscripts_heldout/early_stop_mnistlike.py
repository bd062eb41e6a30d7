"""Conv net on synthetic 16x16 'digits' with early stopping.

Validation runs on rank 0 only (the held-out set is small); rank 0 decides
whether to stop and tells the other ranks.

    torchrun --nproc-per-node 2 early_stop_mnistlike.py --patience 2
"""
import argparse
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def synthetic_digits(n, seed):
    g = torch.Generator().manual_seed(seed)
    protos = torch.rand(10, 1, 16, 16, generator=torch.Generator().manual_seed(1234)) > 0.6
    y = torch.randint(0, 10, (n,), generator=g)
    x = protos[y].float() + 0.8 * torch.randn(n, 1, 16, 16, generator=g)
    return TensorDataset(x, y)


class SmallConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 16, 3, padding=1)
        self.c2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 4 * 4, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.fc(x.flatten(1))


class EarlyStopping:
    def __init__(self, patience=2, min_delta=1e-3):
        self.patience, self.min_delta = patience, min_delta
        self.best = float("inf")
        self.bad_epochs = 0

    def step(self, val_loss):
        if val_loss < self.best - self.min_delta:
            self.best, self.bad_epochs = val_loss, 0
        else:
            self.bad_epochs += 1
        return self.bad_epochs > self.patience


def train_epoch(model, loader, opt):
    model.train()
    loss_sum = torch.zeros(2)
    for x, y in loader:
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss_sum += torch.tensor([loss.item() * len(y), len(y)])
    return loss_sum


@torch.no_grad()
def validate(model, loader):
    model.eval()
    total, correct, loss = 0, 0, 0.0
    for x, y in loader:
        out = model(x)
        loss += F.cross_entropy(out, y, reduction="sum").item()
        correct += (out.argmax(1) == y).sum().item()
        total += len(y)
    return loss / total, correct / total


def reduce_mean(t):
    t = t.clone()
    dist.all_reduce(t)
    return (t[0] / t[1]).item()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--patience", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--pg-timeout", type=float, default=10.0)
    args = p.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank = dist.get_rank()
    torch.manual_seed(0)

    train_ds = synthetic_digits(4096, seed=1)
    sampler = DistributedSampler(train_ds, shuffle=True)
    train_dl = DataLoader(train_ds, batch_size=args.batch_size, sampler=sampler)
    model = DDP(SmallConvNet())
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    if rank == 0:
        val_dl = DataLoader(synthetic_digits(1024, seed=2), batch_size=256)
        stopper = EarlyStopping(args.patience)

    for epoch in range(args.epochs):
        t0 = time.time()
        sampler.set_epoch(epoch)
        local = train_epoch(model, train_dl, opt)

        stop = torch.zeros(1, dtype=torch.int64)
        if rank == 0:
            val_loss, val_acc = validate(model.module, val_dl)
            stop[0] = int(stopper.step(val_loss))
            dist.broadcast(stop, src=0)
            train_loss = reduce_mean(local)
            print(f"epoch {epoch} train {train_loss:.4f} val {val_loss:.4f} acc {val_acc:.3f} "
                  f"({time.time() - t0:.1f}s)", flush=True)
        else:
            train_loss = reduce_mean(local)
            dist.broadcast(stop, src=0)
        if stop.item():
            if rank == 0:
                print(f"early stop after epoch {epoch}", flush=True)
            break
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
