"""Tabular regression with an FSDP2-sharded residual MLP. Keeps the best model as a
torch.distributed.checkpoint directory and writes a small metrics file next to it."""
import argparse
import gc
import json
import os
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from sklearn.datasets import make_regression
from sklearn.preprocessing import StandardScaler
from torch.distributed.checkpoint.state_dict import get_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from a_common import get_logger, setup, teardown

NAME = "tabular_fsdp_best"


@dataclass
class HParams:
    n_samples: int = 4096
    n_features: int = 24
    width: int = 128
    depth: int = 3
    batch_size: int = 64
    epochs: int = 6
    lr: float = 2e-3
    seed: int = 11


class ResBlock(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(w), nn.Linear(w, w), nn.SiLU(), nn.Linear(w, w))

    def forward(self, x):
        return x + self.net(x)


class ResMLP(nn.Module):
    def __init__(self, d_in, w, depth):
        super().__init__()
        self.inp = nn.Linear(d_in, w)
        self.blocks = nn.ModuleList(ResBlock(w) for _ in range(depth))
        self.out = nn.Sequential(nn.LayerNorm(w), nn.Linear(w, 1))

    def forward(self, x):
        h = self.inp(x)
        for b in self.blocks:
            h = b(h)
        return self.out(h).squeeze(-1)


def load_data(hp):
    X, y = make_regression(n_samples=hp.n_samples, n_features=hp.n_features, n_informative=16,
                           noise=8.0, random_state=hp.seed)
    y = np.tanh(y / 150.0) * 3 + 0.1 * X[:, 0] ** 2
    X = StandardScaler().fit_transform(X).astype(np.float32)
    y = ((y - y.mean()) / y.std()).astype(np.float32)
    n_val = hp.n_samples // 8
    mk = lambda a, b: TensorDataset(torch.from_numpy(a), torch.from_numpy(b))
    return mk(X[n_val:], y[n_val:]), mk(X[:n_val], y[:n_val])


class BestKeeper:
    def __init__(self, root):
        self.root = root
        self.best = float("inf")

    def improved(self, val):
        if val < self.best - 1e-4:
            self.best = val
            return True
        return False

    def write(self, model, opt, epoch, val):
        path = os.path.join(self.root, "best")
        msd, osd = get_state_dict(model, opt)
        dcp.save({"model": msd, "optim": osd, "epoch": epoch}, checkpoint_id=path)
        with open(os.path.join(self.root, "best_metrics.json"), "w") as f:
            json.dump({"epoch": epoch, "val_mse": val}, f)
        return path


def run_epoch(model, opt, loader, train):
    model.train(train)
    tot = torch.zeros(2, dtype=torch.float64)
    with torch.set_grad_enabled(train):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            if train:
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            tot += torch.tensor([loss.item() * len(y), len(y)], dtype=torch.float64)
    dist.all_reduce(tot)
    return (tot[0] / tot[1]).item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=HParams.epochs)
    ap.add_argument("--lr", type=float, default=HParams.lr)
    ap.add_argument("--width", type=int, default=HParams.width)
    args = ap.parse_args()
    hp = HParams(epochs=args.epochs, lr=args.lr, width=args.width)
    rank, world, out = setup(NAME, watchdog_s=150, seed=hp.seed)
    log = get_logger(NAME, rank)
    mesh = init_device_mesh("cpu", (world,))

    train_ds, val_ds = load_data(hp)
    tr_sampler = DistributedSampler(train_ds, shuffle=True, seed=hp.seed, drop_last=True)
    tr = DataLoader(train_ds, hp.batch_size, sampler=tr_sampler, drop_last=True)
    va = DataLoader(val_ds, 256, sampler=DistributedSampler(val_ds, shuffle=False, drop_last=True))

    model = ResMLP(hp.n_features, hp.width, hp.depth)
    for blk in model.blocks:
        fully_shard(blk, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=hp.lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=hp.epochs * len(tr))
    keeper = BestKeeper(out)

    t0 = time.time()
    for epoch in range(hp.epochs):
        tr_sampler.set_epoch(epoch)
        train_mse = run_epoch(model, opt, tr, train=True)
        for _ in range(len(tr)):
            sched.step()
        val_mse = run_epoch(model, None, va, train=False)
        if rank == 0:
            log.info("epoch %d train_mse %.4f val_mse %.4f (%.1fs)", epoch, train_mse, val_mse, time.time() - t0)
            if keeper.improved(val_mse):
                path = keeper.write(model, opt, epoch, val_mse)
                log.info("new best -> %s", path)

    dist.barrier()
    if rank == 0:
        with open(os.path.join(out, "best_metrics.json")) as f:
            log.info("done, best %s", json.load(f))
    del model, opt, sched
    gc.collect()
    teardown()


if __name__ == "__main__":
    main()
