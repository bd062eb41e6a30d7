"""Fine-tune a small conv classifier with progressive layer freezing (FreezeOut-style).

The early blocks converge first, so after a few epochs we stop updating them to
save backward compute; only the later blocks and the head keep training.

    torchrun --nproc-per-node 2 freeze_schedule.py
"""
import argparse
import logging
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

log = logging.getLogger("freeze")


def get_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--freeze-schedule", type=str, default="2:stem,3:block1",
                   help="epoch:module pairs; module is frozen from that epoch on")
    p.add_argument("--pg-timeout", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


class SmallNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU())
        self.block1 = nn.Sequential(nn.Conv2d(16, 32, 3, padding=1, stride=2), nn.ReLU())
        self.block2 = nn.Sequential(nn.Conv2d(32, 32, 3, padding=1, stride=2), nn.ReLU())
        self.head = nn.Linear(32, num_classes)

    def forward(self, x):
        x = self.block2(self.block1(self.stem(x)))
        return self.head(x.mean(dim=(2, 3)))


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 10, (n,), generator=g)
    x = torch.randn(n, 1, 16, 16, generator=g) * 0.5
    # class-dependent blob so the task is learnable
    for c in range(10):
        idx = (y == c).nonzero().squeeze(1)
        x[idx, 0, c, :] += 1.5
    return TensorDataset(x, y)


class Callback:
    def on_epoch_start(self, trainer, epoch):
        pass

    def on_epoch_end(self, trainer, epoch, metrics):
        pass


class ProgressiveFreezing(Callback):
    def __init__(self, schedule: str):
        self.schedule = {}
        for item in schedule.split(","):
            ep, name = item.split(":")
            self.schedule.setdefault(int(ep), []).append(name)

    def on_epoch_start(self, trainer, epoch):
        for name in self.schedule.get(epoch, []):
            module = getattr(trainer.raw_model, name)
            for p in module.parameters():
                p.requires_grad_(False)
            if trainer.is_main:
                n = sum(p.numel() for p in module.parameters())
                log.info("epoch %d: froze %s (%d params)", epoch, name, n)


class MetricLogger(Callback):
    def on_epoch_end(self, trainer, epoch, metrics):
        if trainer.is_main:
            log.info("epoch %d | loss %.4f | acc %.3f | %.1fs", epoch,
                     metrics["loss"], metrics["acc"], metrics["time"])


class Trainer:
    def __init__(self, args, callbacks):
        self.args = args
        self.callbacks = callbacks
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        self.is_main = self.rank == 0

        torch.manual_seed(args.seed)
        self.raw_model = SmallNet()
        self.model = DDP(self.raw_model)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=args.lr, weight_decay=0.01)

        self.train_ds = make_data(2048, seed=1)
        self.val_ds = make_data(512, seed=2)
        self.sampler = DistributedSampler(self.train_ds, shuffle=True, seed=args.seed)
        self.loader = DataLoader(self.train_ds, batch_size=args.batch_size, sampler=self.sampler)
        self.val_loader = DataLoader(self.val_ds, batch_size=128,
                                     sampler=DistributedSampler(self.val_ds, shuffle=False))

    def _call(self, hook, *a):
        for cb in self.callbacks:
            getattr(cb, hook)(self, *a)

    def train_epoch(self, epoch):
        self.model.train()
        self.sampler.set_epoch(epoch)
        total, n = 0.0, 0
        for x, y in self.loader:
            self.opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(self.model(x), y)
            loss.backward()
            self.opt.step()
            total += loss.item() * x.size(0)
            n += x.size(0)
        return total / max(n, 1)

    @torch.no_grad()
    def evaluate(self):
        self.model.eval()
        stats = torch.zeros(3)
        for x, y in self.val_loader:
            logits = self.model(x)
            stats[0] += F.cross_entropy(logits, y, reduction="sum")
            stats[1] += (logits.argmax(1) == y).sum()
            stats[2] += y.numel()
        dist.all_reduce(stats)
        return (stats[0] / stats[2]).item(), (stats[1] / stats[2]).item()

    def fit(self):
        for epoch in range(self.args.epochs):
            t0 = time.time()
            self._call("on_epoch_start", epoch)
            train_loss = self.train_epoch(epoch)
            val_loss, acc = self.evaluate()
            metrics = {"loss": train_loss, "val_loss": val_loss, "acc": acc,
                       "time": time.time() - t0}
            self._call("on_epoch_end", epoch, metrics)


def main():
    args = get_args()
    logging.basicConfig(level=logging.INFO,
                        format=f"[rank{os.environ.get('RANK', '?')}] %(asctime)s %(message)s")
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    torch.set_num_threads(1)
    trainer = Trainer(args, [ProgressiveFreezing(args.freeze_schedule), MetricLogger()])
    trainer.fit()
    if trainer.is_main:
        torch.save(trainer.raw_model.state_dict(), os.path.join(os.path.dirname(os.path.abspath(__file__)), "final.pt"))
        log.info("done")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
