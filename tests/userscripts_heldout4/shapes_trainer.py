"""Blob-position classifier on synthetic 16x16 images.

Small Trainer class with callbacks (logging, checkpointing, LR schedule).
Launch:  torchrun --nproc-per-node 2 shapes_trainer.py
"""
import argparse
import json
import os
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

HERE = Path(__file__).resolve().parent


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--n-train", type=int, default=2048)
    p.add_argument("--n-val", type=int, default=512)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-dir", default=str(HERE / "runs" / "shapes"))
    p.add_argument("--pg-timeout", type=int, default=10)
    return p.parse_args()


def make_blobs(n, seed):
    """Class = quadrant that contains the bright blob (4 classes)."""
    g = torch.Generator().manual_seed(seed)
    x = 0.3 * torch.randn(n, 1, 16, 16, generator=g)
    y = torch.randint(0, 4, (n,), generator=g)
    for i in range(n):
        r0 = 8 * (int(y[i]) // 2) + int(torch.randint(1, 5, (1,), generator=g))
        c0 = 8 * (int(y[i]) % 2) + int(torch.randint(1, 5, (1,), generator=g))
        x[i, 0, r0:r0 + 3, c0:c0 + 3] += 1.5
    return TensorDataset(x, y)


class SmallCNN(nn.Module):
    def __init__(self, n_classes=4):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.head = nn.Linear(32 * 4 * 4, n_classes)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


# ----------------------------------------------------------------- callbacks
class Callback:
    def on_train_batch_end(self, trainer, step, loss): pass
    def on_epoch_end(self, trainer, epoch, train_loss): pass
    def on_validation_end(self, trainer, epoch, metrics): pass


class PrintLogger(Callback):
    def __init__(self, every=5):
        self.every = every

    def on_train_batch_end(self, trainer, step, loss):
        if trainer.is_main and step % self.every == 0:
            print(f"  step {step:4d} loss {loss:.4f} lr {trainer.sched.get_last_lr()[0]:.2e}", flush=True)

    def on_epoch_end(self, trainer, epoch, train_loss):
        print(f"[rank {trainer.rank}] epoch {epoch} train_loss {train_loss:.4f}", flush=True)

    def on_validation_end(self, trainer, epoch, metrics):
        print(f"[rank {trainer.rank}] epoch {epoch} val {json.dumps(metrics)}", flush=True)


class BestCheckpoint(Callback):
    def __init__(self, out_dir, monitor="val_acc"):
        self.out_dir = Path(out_dir)
        self.monitor = monitor
        self.best = -1.0

    def on_validation_end(self, trainer, epoch, metrics):
        if metrics[self.monitor] > self.best:
            self.best = metrics[self.monitor]
            self.out_dir.mkdir(parents=True, exist_ok=True)
            torch.save({"epoch": epoch, "model": trainer.model.module.state_dict(),
                        "metrics": metrics}, self.out_dir / "best.pt")


# ------------------------------------------------------------------- trainer
class Trainer:
    def __init__(self, args, model, train_ds, val_ds, callbacks=()):
        self.args = args
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        self.is_main = self.rank == 0
        self.model = DDP(model)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=args.lr, weight_decay=1e-4)
        self.sampler = DistributedSampler(train_ds, shuffle=True, seed=args.seed)
        self.train_loader = DataLoader(train_ds, batch_size=args.batch_size, sampler=self.sampler,
                                       drop_last=True)
        # validation is cheap, so the main process does it on the full set
        self.val_loader = DataLoader(val_ds, batch_size=256) if self.is_main else None
        steps = args.epochs * len(self.train_loader)
        self.sched = torch.optim.lr_scheduler.OneCycleLR(self.opt, max_lr=args.lr, total_steps=steps)
        self.callbacks = list(callbacks)
        self.global_step = 0

    def _fire(self, hook, **kw):
        for cb in self.callbacks:
            getattr(cb, hook)(self, **kw)

    def train_one_epoch(self, epoch):
        self.model.train()
        self.sampler.set_epoch(epoch)
        total, n = 0.0, 0
        for x, y in self.train_loader:
            loss = F.cross_entropy(self.model(x), y)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
            self.sched.step()
            total += loss.item() * len(y)
            n += len(y)
            self._fire("on_train_batch_end", step=self.global_step, loss=loss.item())
            self.global_step += 1
        return total / max(n, 1)

    @torch.no_grad()
    def evaluate(self):
        self.model.eval()
        correct, total, loss_sum = 0, 0, 0.0
        for x, y in self.val_loader:
            logits = self.model(x)
            loss_sum += F.cross_entropy(logits, y, reduction="sum").item()
            correct += (logits.argmax(1) == y).sum().item()
            total += len(y)
        self.model.train()
        return {"val_loss": round(loss_sum / total, 4), "val_acc": round(correct / total, 4)}

    def fit(self):
        t0 = time.time()
        for epoch in range(self.args.epochs):
            train_loss = self.train_one_epoch(epoch)
            self._fire("on_epoch_end", epoch=epoch, train_loss=train_loss)
            if self.is_main:
                metrics = self.evaluate()
                self._fire("on_validation_end", epoch=epoch, metrics=metrics)
            # keep everybody together before the next epoch starts
            dist.barrier()
        if self.is_main:
            print(f"training done in {time.time() - t0:.1f}s", flush=True)


def main():
    args = parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank = dist.get_rank()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    train_ds = make_blobs(args.n_train, seed=args.seed)
    val_ds = make_blobs(args.n_val, seed=args.seed + 1)
    model = SmallCNN()
    if rank == 0:
        n_params = sum(p.numel() for p in model.parameters())
        print(f"world_size={dist.get_world_size()} params={n_params}", flush=True)

    callbacks = [PrintLogger(every=10), BestCheckpoint(args.out_dir)]
    trainer = Trainer(args, model, train_ds, val_ds, callbacks)
    trainer.fit()

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
