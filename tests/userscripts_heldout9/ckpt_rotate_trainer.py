"""Tabular regression trainer with callbacks (checkpointing, LR logging, final export).

torchrun --nproc-per-node 2 ckpt_rotate_trainer.py
"""
import argparse
import glob
import logging
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

log = logging.getLogger("trainer")


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=12)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--n-samples", type=int, default=2048)
    p.add_argument("--n-features", type=int, default=24)
    p.add_argument("--ckpt-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "checkpoints"))
    p.add_argument("--keep-last", type=int, default=3)
    p.add_argument("--pg-timeout", type=int, default=10)
    p.add_argument("--seed", type=int, default=1234)
    return p.parse_args()


def make_data(n, f, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, f, generator=g)
    w = torch.randn(f, 1, generator=g)
    y = x @ w + 0.1 * torch.sin(3 * x[:, :1]) + 0.05 * torch.randn(n, 1, generator=g)
    return TensorDataset(x, y)


class Callback:
    def on_train_start(self, trainer): pass
    def on_epoch_end(self, trainer, epoch, metrics): pass
    def on_train_end(self, trainer): pass


class LRLogger(Callback):
    def on_epoch_end(self, trainer, epoch, metrics):
        if trainer.is_main:
            log.info("epoch %d lr=%.2e train_loss=%.4f val_loss=%.4f", epoch,
                     trainer.optimizer.param_groups[0]["lr"], metrics["train_loss"], metrics["val_loss"])


class ModelCheckpoint(Callback):
    """Save every epoch on the main process and keep only the newest `keep_last` files."""

    def __init__(self, dirpath, keep_last=3):
        self.dirpath = dirpath
        self.keep_last = keep_last
        self.last_path = None

    def on_train_start(self, trainer):
        if trainer.is_main:
            os.makedirs(self.dirpath, exist_ok=True)

    def on_epoch_end(self, trainer, epoch, metrics):
        if not trainer.is_main:
            return
        path = os.path.join(self.dirpath, f"epoch_{epoch}.pt")
        torch.save({"epoch": epoch,
                    "model": trainer.model.module.state_dict(),
                    "optimizer": trainer.optimizer.state_dict(),
                    "metrics": metrics}, path)
        self.last_path = path
        self._rotate()

    def _rotate(self):
        ckpts = sorted(glob.glob(os.path.join(self.dirpath, "epoch_*.pt")))
        for old in ckpts[:-self.keep_last]:
            os.remove(old)


class Exporter(Callback):
    """Reload the last checkpoint and write a TorchScript artifact for serving."""

    def __init__(self, ckpt_cb, out_path):
        self.ckpt_cb = ckpt_cb
        self.out_path = out_path

    def on_train_end(self, trainer):
        if trainer.is_main:
            state = torch.load(self.ckpt_cb.last_path, map_location="cpu")
            model = trainer.build_model()
            model.load_state_dict(state["model"])
            model.eval()
            scripted = torch.jit.trace(model, torch.randn(1, trainer.args.n_features))
            scripted.save(self.out_path)
            log.info("exported epoch %d -> %s", state["epoch"], self.out_path)
        dist.barrier()


class Trainer:
    def __init__(self, args, callbacks=()):
        self.args = args
        self.callbacks = list(callbacks)
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        self.is_main = self.rank == 0

        full = make_data(args.n_samples, args.n_features, args.seed)
        n_val = args.n_samples // 8
        self.train_ds = torch.utils.data.Subset(full, range(n_val, len(full)))
        self.val_ds = torch.utils.data.Subset(full, range(0, n_val))
        self.train_sampler = DistributedSampler(self.train_ds, shuffle=True, seed=args.seed)
        self.val_sampler = DistributedSampler(self.val_ds, shuffle=False)
        self.train_loader = DataLoader(self.train_ds, batch_size=args.batch_size, sampler=self.train_sampler)
        self.val_loader = DataLoader(self.val_ds, batch_size=256, sampler=self.val_sampler)

        torch.manual_seed(args.seed)
        self.model = DDP(self.build_model())
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=args.lr, weight_decay=1e-4)
        total = args.epochs * len(self.train_loader)
        self.scheduler = torch.optim.lr_scheduler.OneCycleLR(self.optimizer, max_lr=args.lr, total_steps=total)
        self.loss_fn = nn.MSELoss()

    def build_model(self):
        f = self.args.n_features
        return nn.Sequential(nn.Linear(f, 128), nn.GELU(), nn.Linear(128, 64), nn.GELU(), nn.Linear(64, 1))

    def _emit(self, hook, *a):
        for cb in self.callbacks:
            getattr(cb, hook)(self, *a)

    def train_epoch(self, epoch):
        self.model.train()
        self.train_sampler.set_epoch(epoch)
        total, n = torch.zeros(()), 0
        for x, y in self.train_loader:
            self.optimizer.zero_grad(set_to_none=True)
            loss = self.loss_fn(self.model(x), y)
            loss.backward()
            self.optimizer.step()
            self.scheduler.step()
            total += loss.detach() * len(x)
            n += len(x)
        return total / max(n, 1)

    @torch.no_grad()
    def validate(self):
        self.model.eval()
        stats = torch.zeros(2)
        for x, y in self.val_loader:
            stats[0] += nn.functional.mse_loss(self.model(x), y, reduction="sum")
            stats[1] += len(x)
        dist.all_reduce(stats)
        return (stats[0] / stats[1]).item()

    def fit(self):
        self._emit("on_train_start")
        for epoch in range(1, self.args.epochs + 1):
            t0 = time.time()
            train_loss = self.train_epoch(epoch)
            dist.all_reduce(train_loss)
            metrics = {"train_loss": train_loss.item() / self.world_size, "val_loss": self.validate(),
                       "time": time.time() - t0}
            self._emit("on_epoch_end", epoch, metrics)
        self._emit("on_train_end")


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s [rank%(rank)s] %(message)s")
    dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
    old = logging.getLogRecordFactory()
    rank = dist.get_rank()

    def factory(*a, **k):
        rec = old(*a, **k)
        rec.rank = rank
        return rec
    logging.setLogRecordFactory(factory)

    ckpt = ModelCheckpoint(args.ckpt_dir, keep_last=args.keep_last)
    export_path = os.path.join(args.ckpt_dir, "model_traced.pt")
    trainer = Trainer(args, callbacks=[LRLogger(), ckpt, Exporter(ckpt, export_path)])
    trainer.fit()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
