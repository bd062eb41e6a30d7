"""Digits classifier: callback-driven DDP trainer with checkpoint + resume check.

Launch: torchrun --nproc-per-node 2 digits_callbacks.py
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from ho18_runtime import DistInfo, get_logger, init_distributed, output_dir, seed_everything, shutdown_distributed

NAME = "digits_callbacks"
log = get_logger(NAME)


@dataclass
class TrainConfig:
    epochs: int = 3
    batch_size: int = 32
    lr: float = 3e-3
    hidden: int = 128
    bucket_cap_mb: float = 0.25
    num_workers: int = 1
    seed: int = 1234
    # which rank persists checkpoints; overridable for multi-node runs
    ckpt_owner_env: str = "HO18_CKPT_OWNER"
    out: Path = field(default_factory=lambda: output_dir(NAME))


# ----------------------------------------------------------------- data ----
def build_datasets(seed: int):
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype("float32")
    xtr, xva, ytr, yva = train_test_split(x, y, test_size=0.25, random_state=seed, stratify=y)
    tr = TensorDataset(torch.from_numpy(xtr), torch.from_numpy(ytr).long())
    va = TensorDataset(torch.from_numpy(xva), torch.from_numpy(yva).long())
    return tr, va


class MLP(nn.Module):
    def __init__(self, d_in: int, hidden: int, n_cls: int):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(d_in, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU())
        self.head = nn.Linear(hidden, n_cls)

    def forward(self, x):
        return self.head(self.body(x))


# ------------------------------------------------------------ reductions ----
def _sum_across(t: torch.Tensor) -> torch.Tensor:
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t


def reduce_counters(counters: Dict[str, float]) -> Dict[str, float]:
    keys = sorted(counters)
    packed = torch.tensor([counters[k] for k in keys], dtype=torch.float64)
    packed = _sum_across(packed)
    return dict(zip(keys, packed.tolist()))


# ------------------------------------------------------------- callbacks ----
class Callback:
    def on_epoch_end(self, trainer: "Trainer", epoch: int, stats: Dict[str, float]) -> None: ...

    def on_train_end(self, trainer: "Trainer") -> None: ...


class ConsoleLogger(Callback):
    def on_epoch_end(self, trainer, epoch, stats):
        log.info("epoch %d  train_loss %.4f  val_acc %.4f", epoch, stats["train_loss"], stats["val_acc"])


class Checkpointer(Callback):
    def __init__(self, out: Path, owner: int):
        self.out = out
        self.owner = owner
        self.path = out / "last.pt"

    def on_epoch_end(self, trainer, epoch, stats):
        if trainer.info.rank == self.owner:
            tmp = self.path.with_suffix(".tmp")
            torch.save({"epoch": epoch, "model": trainer.model.module.state_dict(),
                        "optim": trainer.optim.state_dict(), "stats": stats}, tmp)
            os.replace(tmp, self.path)
        dist.barrier()

    def on_train_end(self, trainer):
        # every rank reloads the file and proves it matches its live weights
        blob = torch.load(self.path, map_location="cpu")
        fresh = MLP(64, trainer.cfg.hidden, 10)
        fresh.load_state_dict(blob["model"])
        live = trainer.model.module.state_dict()
        max_diff = max((fresh.state_dict()[k] - live[k]).abs().max().item() for k in live)
        diffs: List[float] = [0.0] * trainer.info.world_size
        dist.all_gather_object(diffs, max_diff)
        log.info("resume check: epoch=%d max|diff| per rank=%s", blob["epoch"], diffs)
        assert max(diffs) == 0.0


# --------------------------------------------------------------- trainer ----
class Trainer:
    def __init__(self, cfg: TrainConfig, info: DistInfo, callbacks: List[Callback]):
        self.cfg, self.info, self.callbacks = cfg, info, callbacks
        train_ds, val_ds = build_datasets(cfg.seed)
        self.train_sampler = DistributedSampler(train_ds, shuffle=True, seed=cfg.seed)
        self.train_loader = DataLoader(train_ds, batch_size=cfg.batch_size, sampler=self.train_sampler,
                                       num_workers=cfg.num_workers, persistent_workers=cfg.num_workers > 0)
        self.val_loader = DataLoader(val_ds, batch_size=256, sampler=DistributedSampler(val_ds, shuffle=False))
        model = MLP(64, cfg.hidden, 10)
        self.model = DDP(model, bucket_cap_mb=cfg.bucket_cap_mb, gradient_as_bucket_view=True, static_graph=True)
        self.optim = torch.optim.AdamW(self.model.parameters(), lr=cfg.lr)

    def _train_epoch(self, epoch: int) -> Dict[str, float]:
        self.model.train()
        self.train_sampler.set_epoch(epoch)
        total, n = 0.0, 0
        for xb, yb in self.train_loader:
            self.optim.zero_grad(set_to_none=True)
            loss = F.cross_entropy(self.model(xb), yb)
            loss.backward()
            self.optim.step()
            total += loss.item() * len(yb)
            n += len(yb)
        return {"loss_sum": total, "n_train": n}

    @torch.no_grad()
    def _evaluate(self) -> Dict[str, float]:
        self.model.eval()
        correct, seen = 0, 0
        for xb, yb in self.val_loader:
            correct += (self.model(xb).argmax(1) == yb).sum().item()
            seen += len(yb)
        return {"correct": correct, "n_val": seen}

    def fit(self) -> None:
        for epoch in range(self.cfg.epochs):
            local = {**self._train_epoch(epoch), **self._evaluate()}
            g = reduce_counters(local)
            stats = {"train_loss": g["loss_sum"] / g["n_train"], "val_acc": g["correct"] / g["n_val"]}
            for cb in self.callbacks:
                cb.on_epoch_end(self, epoch, stats)
        for cb in self.callbacks:
            cb.on_train_end(self)


def main() -> None:
    cfg = TrainConfig()
    info = init_distributed("gloo")
    seed_everything(cfg.seed)
    owner = int(os.environ.get(cfg.ckpt_owner_env, info.world_size - 1))
    trainer = Trainer(cfg, info, [ConsoleLogger(), Checkpointer(cfg.out, owner)])
    trainer.fit()
    log.info("done")
    shutdown_distributed()


if __name__ == "__main__":
    main()
