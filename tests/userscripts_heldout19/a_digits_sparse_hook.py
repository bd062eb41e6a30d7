"""Digits CNN with DDP and a gradient-sparsification communication hook
(deep-gradient-compression style: dense warm-up, then only large gradient entries are exchanged,
the rest is kept locally as residual and added back next step)."""
import argparse
import gc
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from sklearn.datasets import load_digits
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from a_common import get_logger, setup, teardown

NAME = "digits_sparse_hook"


class SparsifyState:
    def __init__(self, group, keep_frac, warmup_steps):
        self.group = group
        self.keep_frac = keep_frac
        self.warmup_steps = warmup_steps
        self.iter = 0
        self.residuals = {}
        self.sent = 0
        self.total = 0


def sparse_allgather_hook(state, bucket):
    world = dist.get_world_size(state.group)
    grad = bucket.buffer()
    if bucket.is_last():
        state.iter += 1
    if state.iter < state.warmup_steps:
        fut = dist.all_reduce(grad, group=state.group, async_op=True).get_future()
        return fut.then(lambda f: f.value()[0].div_(world))

    key = bucket.index()
    acc = grad + state.residuals.get(key, torch.zeros_like(grad))
    thresh = acc.abs().max() * (1.0 - state.keep_frac)
    idx = (acc.abs() >= thresh).nonzero().flatten()
    vals = acc[idx]
    resid = acc.clone()
    resid[idx] = 0
    state.residuals[key] = resid
    state.sent += idx.numel()
    state.total += grad.numel()

    packed = torch.cat([idx.to(grad.dtype), vals])
    outs = [torch.empty_like(packed) for _ in range(world)]
    fut = dist.all_gather(outs, packed, group=state.group, async_op=True).get_future()

    def decode(f):
        f.wait()
        dense = torch.zeros_like(grad)
        for p in outs:
            n = p.numel() // 2
            dense.index_add_(0, p[:n].long(), p[n:])
        return dense.div_(world)

    return fut.then(decode)


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 16, 3, padding=1)
        self.c2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Sequential(nn.Flatten(), nn.Linear(32 * 4 * 4, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x):
        x = F.relu(self.c1(x))
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.fc(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--keep-frac", type=float, default=0.3, help="keep entries above (1-k)*max|g|")
    ap.add_argument("--warmup-steps", type=int, default=50)
    args = ap.parse_args()
    rank, world, out = setup(NAME, watchdog_s=150, seed=0)
    log = get_logger(NAME, rank)

    X, y = load_digits(return_X_y=True)
    X = torch.tensor(X / 16.0, dtype=torch.float32).view(-1, 1, 8, 8)
    y = torch.tensor(y)
    n_tr = 1500
    train, val = TensorDataset(X[:n_tr], y[:n_tr]), TensorDataset(X[n_tr:], y[n_tr:])
    sampler = DistributedSampler(train, shuffle=True, seed=0, drop_last=True)
    tr = DataLoader(train, args.batch_size, sampler=sampler, drop_last=True)
    va = DataLoader(val, 128, sampler=DistributedSampler(val, shuffle=False))

    model = DDP(SmallCNN(), bucket_cap_mb=0.05)
    state = SparsifyState(dist.group.WORLD, args.keep_frac, args.warmup_steps)
    model.register_comm_hook(state, sparse_allgather_hook)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        t0, run = time.time(), torch.zeros(2)
        for xb, yb in tr:
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            run += torch.tensor([loss.item() * len(yb), len(yb)])
        model.eval()
        hits = torch.zeros(2)
        with torch.no_grad():
            for xb, yb in va:
                hits += torch.tensor([(model(xb).argmax(1) == yb).sum().item(), len(yb)])
        dist.all_reduce(run)
        dist.all_reduce(hits)
        density = state.sent / max(state.total, 1)
        if rank == 0:
            log.info("epoch %d loss %.4f val_acc %.3f density %.2f (%.1fs)", epoch, run[0] / run[1],
                     hits[0] / hits[1], density, time.time() - t0)

    if rank == 0:
        torch.save(model.module.state_dict(), f"{out}/digits_cnn.pt")
    del model, opt
    gc.collect()
    teardown()


if __name__ == "__main__":
    main()
