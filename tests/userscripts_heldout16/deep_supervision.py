"""Image-ish classifier with deep supervision, trained with DDP + callbacks.

The auxiliary classifier on the intermediate features is switched on by a callback
after the warm-up epoch (it is noisy while the stem is still random).

    torchrun --nproc-per-node 2 deep_supervision.py
"""
import argparse
import json
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class Net(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.stage2 = nn.Sequential(nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
                                    nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fc = nn.Linear(32, num_classes)
        self.aux_fc = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, num_classes))
        self.use_aux = False

    def forward(self, x):
        h = self.stem(x)
        out = self.fc(self.stage2(h))
        if self.training and self.use_aux:
            return out, self.aux_fc(h)
        return out, None


class Callback:
    def on_train_start(self, trainer): pass
    def on_epoch_start(self, trainer, epoch): pass
    def on_step_end(self, trainer, step, logs): pass
    def on_epoch_end(self, trainer, epoch, logs): pass


class AuxLossWarmup(Callback):
    """Turn the deep-supervision head on once the stem has warmed up."""

    def __init__(self, start_epoch=1, weight=0.3):
        self.start_epoch, self.weight = start_epoch, weight

    def on_epoch_start(self, trainer, epoch):
        enable = epoch >= self.start_epoch
        trainer.raw_model.use_aux = enable
        trainer.aux_weight = self.weight if enable else 0.0


class ProgressLogger(Callback):
    def __init__(self, every=10):
        self.every = every

    def on_step_end(self, trainer, step, logs):
        if trainer.rank == 0 and step % self.every == 0:
            print(f"  step {step:4d} loss {logs['loss']:.4f} aux {logs['aux']:.4f}", flush=True)

    def on_epoch_end(self, trainer, epoch, logs):
        if trainer.rank == 0:
            print(f"epoch {epoch}: {json.dumps(logs)}", flush=True)


class JsonHistory(Callback):
    def __init__(self, path):
        self.path, self.history = path, []

    def on_epoch_end(self, trainer, epoch, logs):
        self.history.append({"epoch": epoch, **logs})
        if trainer.rank == 0:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with open(self.path, "w") as f:
                json.dump(self.history, f, indent=1)


def synthetic_digits(n, seed):
    """10 classes of 16x16 blobs at class-dependent positions plus noise."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 10, (n,), generator=g)
    x = 0.3 * torch.randn(n, 1, 16, 16, generator=g)
    rows, cols = (y // 5) * 8 + 2, (y % 5) * 3 + 1
    for i in range(n):
        x[i, 0, rows[i]:rows[i] + 4, cols[i]:cols[i] + 3] += 1.0
    return x, y


class Trainer:
    def __init__(self, args, callbacks):
        self.args, self.callbacks = args, callbacks
        self.rank = dist.get_rank()
        x, y = synthetic_digits(4096, seed=0)
        self.ds = TensorDataset(x, y)
        self.sampler = DistributedSampler(self.ds, shuffle=True, seed=0)
        self.loader = DataLoader(self.ds, batch_size=args.batch_size, sampler=self.sampler,
                                 drop_last=True)
        torch.manual_seed(0)
        self.raw_model = Net()
        # the graph is the same every step, so let DDP skip the unused-parameter search
        self.model = DDP(self.raw_model, static_graph=True)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=args.lr, momentum=0.9,
                                   nesterov=True, weight_decay=5e-4)
        steps = args.epochs * len(self.loader)
        self.sched = torch.optim.lr_scheduler.OneCycleLR(self.opt, max_lr=args.lr, total_steps=steps)
        self.aux_weight = 0.0

    def fire(self, hook, *a):
        for cb in self.callbacks:
            getattr(cb, hook)(self, *a)

    def fit(self):
        self.fire("on_train_start")
        step = 0
        for epoch in range(self.args.epochs):
            self.sampler.set_epoch(epoch)
            self.model.train()
            self.fire("on_epoch_start", epoch)
            t0, tot, correct, seen = time.time(), 0.0, 0, 0
            for x, y in self.loader:
                logits, aux_logits = self.model(x)
                loss = F.cross_entropy(logits, y)
                aux = torch.zeros(())
                if aux_logits is not None:
                    aux = F.cross_entropy(aux_logits, y)
                    loss = loss + self.aux_weight * aux
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
                self.opt.step()
                self.sched.step()
                step += 1
                tot += loss.item() * len(y)
                correct += (logits.argmax(1) == y).sum().item()
                seen += len(y)
                self.fire("on_step_end", step, {"loss": loss.item(), "aux": aux.item()})
            stats = torch.tensor([tot, correct, seen], dtype=torch.float64)
            dist.all_reduce(stats)
            logs = {"loss": round(stats[0].item() / stats[2].item(), 4),
                    "acc": round(stats[1].item() / stats[2].item(), 4),
                    "time": round(time.time() - t0, 2)}
            self.fire("on_epoch_end", epoch, logs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--pg-timeout", type=int, default=10)
    args = ap.parse_args()
    dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
    callbacks = [AuxLossWarmup(start_epoch=1), ProgressLogger(every=10),
                 JsonHistory("runs/deep_supervision/history.json")]
    Trainer(args, callbacks).fit()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
