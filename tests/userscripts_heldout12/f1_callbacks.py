"""4-class signal classifier with callbacks: warm-up + cosine LR, grad accumulation,
distributed confusion matrix / macro-F1, best-model checkpoint and early stopping.

    torchrun --nproc-per-node 2 f1_callbacks.py
"""
import argparse
import math
import os
from contextlib import nullcontext
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, Subset, TensorDataset

NUM_CLASSES = 4
HERE = os.path.dirname(os.path.abspath(__file__))


def synthetic_signals(n, length=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, NUM_CLASSES, (n,), generator=g)
    t = torch.linspace(0, 1, length)
    freq = (y.float() + 1.0).unsqueeze(1) * 3.0
    x = torch.sin(2 * math.pi * freq * t) + 0.8 * torch.randn(n, length, generator=g)
    return TensorDataset(x.unsqueeze(1), y)


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv1d(1, 16, 5, padding=2), nn.ReLU(), nn.MaxPool1d(2),
            nn.Conv1d(16, 32, 5, padding=2), nn.ReLU(), nn.AdaptiveAvgPool1d(1))
        self.fc = nn.Linear(32, NUM_CLASSES)

    def forward(self, x):
        return self.fc(self.features(x).flatten(1))


def warmup_cosine(warmup, total):
    def f(step):
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, total - warmup)
        return 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
    return f


class Callback:
    def on_epoch_end(self, trainer, metrics):
        pass


class PrintLogger(Callback):
    def on_epoch_end(self, trainer, metrics):
        if trainer.rank == 0:
            items = " ".join(f"{k}={v:.4f}" for k, v in metrics.items())
            print(f"[epoch {trainer.epoch}] {items} lr={trainer.scheduler.get_last_lr()[0]:.2e}", flush=True)


class BestCheckpoint(Callback):
    def __init__(self, path, monitor="macro_f1"):
        self.path, self.monitor, self.best = path, monitor, -math.inf

    def on_epoch_end(self, trainer, metrics):
        if metrics[self.monitor] > self.best:       # metrics are already reduced: same on every rank
            self.best = metrics[self.monitor]
            if trainer.rank == 0:
                torch.save({"model": trainer.model.module.state_dict(),
                            "optimizer": trainer.optimizer.state_dict(),
                            "scheduler": trainer.scheduler.state_dict(),
                            "epoch": trainer.epoch, self.monitor: self.best}, self.path)
            dist.barrier()


class EarlyStopping(Callback):
    def __init__(self, monitor="macro_f1", patience=2, min_delta=1e-3):
        self.monitor, self.patience, self.min_delta = monitor, patience, min_delta
        self.best, self.wait = -math.inf, 0

    def on_epoch_end(self, trainer, metrics):
        if metrics[self.monitor] > self.best + self.min_delta:
            self.best, self.wait = metrics[self.monitor], 0
        else:
            self.wait += 1
        flag = torch.tensor([int(self.wait >= self.patience)])
        dist.broadcast(flag, src=0)                  # rank 0 decides, everyone follows
        trainer.should_stop = bool(flag.item())


class Trainer:
    def __init__(self, args, callbacks):
        self.args, self.callbacks = args, callbacks
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        train_ds = synthetic_signals(2400, seed=1)
        val_ds = synthetic_signals(601, seed=2)     # odd size on purpose: no padding in eval
        self.sampler = DistributedSampler(train_ds, shuffle=True, seed=3)
        self.train_dl = DataLoader(train_ds, batch_size=args.micro_batch, sampler=self.sampler, drop_last=True)
        self.val_dl = DataLoader(Subset(val_ds, range(self.rank, len(val_ds), self.world)), batch_size=128)
        torch.manual_seed(0)
        self.model = DDP(ConvNet())
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=args.lr, weight_decay=1e-2)
        updates_per_epoch = len(self.train_dl) // args.accum_steps
        total = updates_per_epoch * args.epochs
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, warmup_cosine(max(1, total // 10), total))
        self.epoch, self.should_stop = 0, False

    def train_one_epoch(self):
        self.model.train()
        self.sampler.set_epoch(self.epoch)
        accum = self.args.accum_steps
        for i, (x, y) in enumerate(self.train_dl):
            last_micro = (i + 1) % accum == 0
            ctx = nullcontext() if last_micro else self.model.no_sync()
            with ctx:
                loss = F.cross_entropy(self.model(x), y) / accum
                loss.backward()
            if last_micro:
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.args.clip)
                self.optimizer.step()
                self.scheduler.step()
                self.optimizer.zero_grad(set_to_none=True)
        self.optimizer.zero_grad(set_to_none=True)   # drop a trailing partial accumulation

    @torch.no_grad()
    def evaluate(self):
        self.model.eval()
        cm = torch.zeros(NUM_CLASSES, NUM_CLASSES, dtype=torch.int64)
        loss_sum = torch.zeros(1, dtype=torch.float64)
        for x, y in self.val_dl:
            logits = self.model.module(x)
            loss_sum += F.cross_entropy(logits, y, reduction="sum").item()
            cm.index_put_((y, logits.argmax(1)), torch.ones_like(y), accumulate=True)
        dist.all_reduce(cm)
        dist.all_reduce(loss_sum)
        tp = cm.diag().double()
        precision = tp / cm.sum(0).clamp(min=1)
        recall = tp / cm.sum(1).clamp(min=1)
        f1 = 2 * precision * recall / (precision + recall).clamp(min=1e-12)
        n = cm.sum().item()
        return {"val_loss": loss_sum.item() / n, "accuracy": tp.sum().item() / n, "macro_f1": f1.mean().item()}

    def fit(self):
        for self.epoch in range(self.args.epochs):
            self.train_one_epoch()
            metrics = self.evaluate()
            for cb in self.callbacks:
                cb.on_epoch_end(self, metrics)
            if self.should_stop:
                break


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--micro-batch", type=int, default=32)
    p.add_argument("--accum-steps", type=int, default=4)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--pg-timeout", type=int, default=10)
    p.add_argument("--ckpt", default=os.path.join(HERE, "best_f1.pt"))
    args = p.parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    best = BestCheckpoint(args.ckpt)
    trainer = Trainer(args, [best, EarlyStopping(patience=2), PrintLogger()])
    trainer.fit()
    state = torch.load(args.ckpt, map_location="cpu")   # every rank reloads the best weights
    trainer.model.module.load_state_dict(state["model"])
    final = trainer.evaluate()
    if trainer.rank == 0:
        print(f"best epoch {state['epoch']} macro_f1 {final['macro_f1']:.4f} acc {final['accuracy']:.4f}", flush=True)
    dist.barrier()   # let both ranks finish the last all_reduce before tearing gloo down
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
