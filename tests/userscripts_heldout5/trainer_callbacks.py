"""Tabular classifier with a small Trainer class, callbacks and gradient accumulation.

torchrun --nproc-per-node 2 trainer_callbacks.py --epochs 4
"""
import argparse
import json
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def make_dataset(n=4096, features=24, classes=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(classes, features, generator=g) * 2.0
    y = torch.randint(0, classes, (n,), generator=g)
    x = centers[y] + torch.randn(n, features, generator=g)
    return TensorDataset(x, y)


class Callback:
    def on_train_begin(self, trainer): pass
    def on_step_end(self, trainer, step, loss): pass
    def on_epoch_end(self, trainer, epoch, logs): pass
    def on_train_end(self, trainer): pass


class ProgressLogger(Callback):
    def __init__(self, every=20):
        self.every = every

    def on_step_end(self, trainer, step, loss):
        if trainer.is_main and step % self.every == 0:
            print(f"  step {step:5d}  loss {loss:.4f}", flush=True)


class RankStatsCallback(Callback):
    """Collect per-rank throughput/loss stats on the main process and write a json report."""

    def __init__(self, path="logs/rank_stats.jsonl"):
        self.path = path
        self._t0 = None

    def on_train_begin(self, trainer):
        self._t0 = time.time()
        if trainer.is_main:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)

    def on_epoch_end(self, trainer, epoch, logs):
        summary = {
            "rank": trainer.rank,
            "epoch": epoch,
            "samples": logs["samples"],
            "local_loss": logs["local_loss"],
            "sec": round(time.time() - self._t0, 3),
        }
        gathered = [None] * trainer.world_size
        dist.gather_object(summary, gathered, dst=0)
        if trainer.is_main:
            with open(self.path, "a") as f:
                for s in gathered:
                    f.write(json.dumps(s) + "\n")
        self._t0 = time.time()


class CheckpointCallback(Callback):
    def __init__(self, out_dir="checkpoints"):
        self.out_dir = out_dir

    def on_epoch_end(self, trainer, epoch, logs):
        if trainer.is_main:
            os.makedirs(self.out_dir, exist_ok=True)
            torch.save({"epoch": epoch, "model": trainer.model.module.state_dict(),
                        "optimizer": trainer.optimizer.state_dict()},
                       os.path.join(self.out_dir, "last.pt"))


class Trainer:
    def __init__(self, model, train_ds, val_ds, args, callbacks=()):
        self.args = args
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        self.is_main = self.rank == 0
        self.model = DDP(model)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=args.lr, momentum=0.9)
        self.sampler = DistributedSampler(train_ds, shuffle=True, seed=args.seed)
        self.train_loader = DataLoader(train_ds, batch_size=args.batch_size, sampler=self.sampler)
        self.val_loader = DataLoader(val_ds, batch_size=256,
                                     sampler=DistributedSampler(val_ds, shuffle=False))
        self.callbacks = list(callbacks)
        self.global_step = 0
        self.loss_fn = nn.CrossEntropyLoss()

    def _call(self, hook, *a):
        for cb in self.callbacks:
            getattr(cb, hook)(self, *a)

    def train_epoch(self, epoch):
        self.model.train()
        self.sampler.set_epoch(epoch)
        accum = self.args.grad_accum
        running, samples = 0.0, 0
        self.optimizer.zero_grad()
        for i, (x, y) in enumerate(self.train_loader):
            last_micro = (i + 1) % accum == 0 or (i + 1) == len(self.train_loader)
            if last_micro:
                loss = self.loss_fn(self.model(x), y) / accum
                loss.backward()
            else:
                with self.model.no_sync():
                    loss = self.loss_fn(self.model(x), y) / accum
                    loss.backward()
            running += loss.item() * accum * len(y)
            samples += len(y)
            if last_micro:
                self.optimizer.step()
                self.optimizer.zero_grad()
                self.global_step += 1
                self._call("on_step_end", self.global_step, loss.item() * accum)
        return {"samples": samples, "local_loss": running / max(samples, 1)}

    @torch.no_grad()
    def evaluate(self):
        self.model.eval()
        correct = torch.zeros(2)
        for x, y in self.val_loader:
            pred = self.model(x).argmax(-1)
            correct += torch.tensor([(pred == y).sum().item(), len(y)], dtype=torch.float)
        dist.all_reduce(correct)
        return (correct[0] / correct[1]).item()

    def fit(self):
        self._call("on_train_begin")
        for epoch in range(self.args.epochs):
            logs = self.train_epoch(epoch)
            logs["val_acc"] = self.evaluate()
            if self.is_main:
                print(f"epoch {epoch}: loss {logs['local_loss']:.4f} val_acc {logs['val_acc']:.3f}", flush=True)
            self._call("on_epoch_end", epoch, logs)
        self._call("on_train_end")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--grad-accum", type=int, default=4)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=17)
    p.add_argument("--pg-timeout", type=int, default=10)
    args = p.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    torch.manual_seed(args.seed)
    full = make_dataset(seed=args.seed)
    train_ds = TensorDataset(full.tensors[0][:3584], full.tensors[1][:3584])
    val_ds = TensorDataset(full.tensors[0][3584:], full.tensors[1][3584:])
    model = nn.Sequential(nn.Linear(24, 128), nn.ReLU(), nn.Dropout(0.1),
                          nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 5))
    trainer = Trainer(model, train_ds, val_ds, args,
                      callbacks=[ProgressLogger(), RankStatsCallback(), CheckpointCallback()])
    trainer.fit()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
