"""Tabular regression with a small callback-based trainer (HF-Trainer-ish args).

Launch: torchrun --nproc-per-node 2 store_epoch_sync.py
"""
import os
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import List

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler
from transformers_lite_args import parse_into  # noqa: F401  (see below)

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass
class TrainingArguments:
    data_file: str = os.path.join(HERE, "data", "housing.npz")
    output_dir: str = os.path.join(HERE, "runs", "housing")
    num_train_epochs: int = 4
    per_device_train_batch_size: int = 64
    learning_rate: float = 1e-3
    weight_decay: float = 1e-4
    warmup_ratio: float = 0.1
    hidden_sizes: List[int] = field(default_factory=lambda: [64, 64])
    pg_timeout: int = 10
    seed: int = 42


class Callback:
    def on_train_begin(self, trainer): pass
    def on_epoch_end(self, trainer, epoch, metrics): pass
    def on_train_end(self, trainer): pass


class PrintMetrics(Callback):
    def on_epoch_end(self, trainer, epoch, metrics):
        if trainer.is_main:
            print(f"epoch {epoch} | " + " | ".join(f"{k} {v:.4f}" for k, v in metrics.items()), flush=True)


class SaveCheckpoint(Callback):
    def on_epoch_end(self, trainer, epoch, metrics):
        if trainer.is_main:
            os.makedirs(trainer.args.output_dir, exist_ok=True)
            path = os.path.join(trainer.args.output_dir, f"epoch{epoch}.pt")
            torch.save({"model": trainer.model.module.state_dict(),
                        "optim": trainer.optimizer.state_dict(), "epoch": epoch}, path)


class StoreSync(Callback):
    """Wait until every rank finished the epoch (incl. rank 0's checkpoint write).

    dist.barrier() kept timing out while rank 0 wrote checkpoints to NFS, so we
    gate on the c10d store instead: each rank checks in, and the last one to
    arrive opens the gate for this epoch.
    """

    def __init__(self, key="epoch_sync"):
        self.key = key

    def on_epoch_end(self, trainer, epoch, metrics):
        store = dist.distributed_c10d._get_default_store()
        arrived = store.add(self.key, 1)
        if arrived == trainer.world_size:
            store.set(f"{self.key}/gate/{epoch}", "open")
        store.wait([f"{self.key}/gate/{epoch}"])


def make_model(n_in, hidden):
    layers, d = [], n_in
    for h in hidden:
        layers += [nn.Linear(d, h), nn.SiLU()]
        d = h
    layers.append(nn.Linear(d, 1))
    return nn.Sequential(*layers)


class Trainer:
    def __init__(self, args: TrainingArguments, callbacks: List[Callback]):
        self.args = args
        self.callbacks = callbacks
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        self.is_main = self.rank == 0
        data = np.load(args.data_file)
        x = torch.from_numpy(data["x"]).float()
        y = torch.from_numpy(data["y"]).float().unsqueeze(1)
        self.mu, self.sd = x.mean(0), x.std(0) + 1e-6
        ds = TensorDataset((x - self.mu) / self.sd, y)
        self.sampler = DistributedSampler(ds, seed=args.seed)
        self.loader = DataLoader(ds, batch_size=args.per_device_train_batch_size, sampler=self.sampler)
        torch.manual_seed(args.seed)
        self.model = DDP(make_model(x.shape[1], args.hidden_sizes))
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=args.learning_rate,
                                           weight_decay=args.weight_decay)
        total = len(self.loader) * args.num_train_epochs
        warm = max(1, int(total * args.warmup_ratio))
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min(1.0, (s + 1) / warm) * max(0.0, (total - s) / (total - warm)))

    def _fire(self, event, *a):
        for cb in self.callbacks:
            getattr(cb, event)(self, *a)

    def train(self):
        self._fire("on_train_begin")
        for epoch in range(self.args.num_train_epochs):
            self.sampler.set_epoch(epoch)
            self.model.train()
            sums = torch.zeros(2, dtype=torch.float64)
            t0 = time.time()
            for xb, yb in self.loader:
                pred = self.model(xb)
                loss = nn.functional.mse_loss(pred, yb)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.optimizer.step()
                self.scheduler.step()
                sums += torch.tensor([loss.item() * len(xb), len(xb)], dtype=torch.float64)
            dist.all_reduce(sums)
            metrics = {"train_mse": (sums[0] / sums[1]).item(),
                       "lr": self.scheduler.get_last_lr()[0], "sec": time.time() - t0}
            self._fire("on_epoch_end", epoch, metrics)
        self._fire("on_train_end")


def main():
    args = parse_into(TrainingArguments)
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    trainer = Trainer(args, [PrintMetrics(), SaveCheckpoint(), StoreSync()])
    trainer.train()
    if trainer.is_main:
        print("training finished", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
