"""Synchronous parameter-server training, written by hand on top of torch.distributed.

rank 0 is the parameter server (it also computes gradients on its own shard),
every other rank is a worker.  Initial weights are broadcast by hand, gradients go
worker -> server with isend/irecv, fresh parameters come back the same way.
An EMA of the weights and a couple of callbacks run on the server.

    torchrun --nproc-per-node 2 ps_handbcast.py
"""
import argparse
import copy
import json
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import parameters_to_vector, vector_to_parameters
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))


def synthetic_regression(n=4096, d=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(d, 1, generator=g)
    X = torch.randn(n, d, generator=g)
    y = torch.sin(X @ w) + 0.1 * torch.randn(n, 1, generator=g)
    return TensorDataset(X, y)


class Net(nn.Module):
    def __init__(self, d=32, h=128):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(d, h), nn.LayerNorm(h), nn.GELU(),
                                  nn.Linear(h, h), nn.GELU(), nn.Linear(h, 1))

    def forward(self, x):
        return self.body(x)


class Callback:
    def on_epoch_end(self, trainer, epoch, logs):
        pass


class PrintLogger(Callback):
    def on_epoch_end(self, trainer, epoch, logs):
        if trainer.rank == 0:
            print(f"epoch {epoch}: " + " ".join(f"{k}={v:.4f}" for k, v in logs.items()), flush=True)


class SaveEMA(Callback):
    def __init__(self, out_dir):
        self.out_dir = out_dir

    def on_epoch_end(self, trainer, epoch, logs):
        if trainer.rank != 0:
            return
        os.makedirs(self.out_dir, exist_ok=True)
        torch.save(trainer.ema.state_dict(), os.path.join(self.out_dir, "ema.pt"))
        with open(os.path.join(self.out_dir, "history.jsonl"), "a") as f:
            f.write(json.dumps({"epoch": epoch, **{k: float(v) for k, v in logs.items()}}) + "\n")


class PSTrainer:
    def __init__(self, model, args, callbacks=()):
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.model, self.args, self.callbacks = model, args, list(callbacks)
        self.params = [p for p in model.parameters()]
        self.broadcast_initial_weights()
        if self.rank == 0:
            self.opt = torch.optim.SGD(self.params, lr=args.lr, momentum=0.9, nesterov=True)
            self.sched = torch.optim.lr_scheduler.CosineAnnealingLR(self.opt, T_max=args.epochs)
            self.ema = copy.deepcopy(model).requires_grad_(False)

    def broadcast_initial_weights(self):
        for t in self.model.state_dict().values():
            dist.broadcast(t, src=0)

    @torch.no_grad()
    def update_ema(self):
        d = self.args.ema_decay
        for pe, p in zip(self.ema.parameters(), self.model.parameters()):
            pe.mul_(d).add_(p, alpha=1 - d)

    def sync_step(self):
        grad = parameters_to_vector([p.grad for p in self.params])
        flat = parameters_to_vector(self.params).detach()
        if self.rank == 0:
            bufs = [torch.empty_like(grad) for _ in range(1, self.world)]
            reqs = [dist.irecv(b, src=r) for r, b in zip(range(1, self.world), bufs)]
            for r in reqs:
                r.wait()
            grad = (grad + sum(bufs)) / self.world
            vector_to_parameters(grad, [p.grad for p in self.params])
            self.opt.step()
            self.update_ema()
            flat = parameters_to_vector(self.params).detach()
            reqs = [dist.isend(flat, dst=r) for r in range(1, self.world)]
            for r in reqs:
                r.wait()
        else:
            dist.isend(grad, dst=0).wait()
            dist.irecv(flat, src=0).wait()
            with torch.no_grad():
                vector_to_parameters(flat, self.params)

    def fit(self, train_dl, val_dl):
        for epoch in range(self.args.epochs):
            train_dl.sampler.set_epoch(epoch)
            self.model.train()
            t0, tot, n = time.time(), 0.0, 0
            for x, y in train_dl:
                for p in self.params:
                    p.grad = None
                loss = F.mse_loss(self.model(x), y)
                loss.backward()
                self.sync_step()
                tot, n = tot + loss.item(), n + 1
            if self.rank == 0:
                self.sched.step()
            logs = {"train_loss": tot / n, "val_loss": self.validate(val_dl),
                    "sec": time.time() - t0}
            for cb in self.callbacks:
                cb.on_epoch_end(self, epoch, logs)

    @torch.no_grad()
    def validate(self, dl):
        self.model.eval()
        s = torch.zeros(2, dtype=torch.float64)
        for x, y in dl:
            s[0] += F.mse_loss(self.model(x), y, reduction="sum").item()
            s[1] += len(y)
        dist.all_reduce(s)
        return (s[0] / s[1]).item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--ema-decay", type=float, default=0.99)
    ap.add_argument("--out", default=os.path.join(HERE, "runs", "ps"))
    ap.add_argument("--pg-timeout", type=int, default=10)
    args = ap.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1000 + rank)   # different init per rank, fixed by the broadcast

    full = synthetic_regression()
    train_ds = torch.utils.data.Subset(full, range(0, 3584))
    val_ds = torch.utils.data.Subset(full, range(3584, len(full)))
    train_dl = DataLoader(train_ds, batch_size=args.batch_size, drop_last=True,
                          sampler=DistributedSampler(train_ds, world, rank, drop_last=True))
    val_dl = DataLoader(val_ds, batch_size=256,
                        sampler=DistributedSampler(val_ds, world, rank, shuffle=False))

    trainer = PSTrainer(Net(), args, callbacks=[PrintLogger(), SaveEMA(args.out)])
    trainer.fit(train_dl, val_dl)
    dist.barrier()
    if rank == 0:
        print("training finished", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
