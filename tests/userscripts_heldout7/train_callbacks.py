"""Classifier on pre-sharded jsonl data, Trainer + callbacks style.

torchrun --nproc-per-node 2 train_callbacks.py
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
from torch.utils.data import DataLoader, Dataset

IGNORE = -1


class JsonlShard(Dataset):
    def __init__(self, path):
        with open(path) as f:
            rows = [json.loads(line) for line in f]
        self.x = torch.tensor([r["x"] for r in rows], dtype=torch.float32)
        self.y = torch.tensor([r["label"] for r in rows], dtype=torch.long)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class JsonlWriter:
    def __init__(self, path):
        self.f = open(path, "a")

    def write(self, record):
        record["time"] = round(time.time(), 3)
        self.f.write(json.dumps(record) + "\n")
        self.f.flush()

    def close(self):
        self.f.close()


class Callback:
    def on_train_begin(self, trainer): pass
    def on_step_end(self, trainer, step, logs): pass
    def on_epoch_end(self, trainer, epoch, logs): pass
    def on_train_end(self, trainer): pass


class PrintProgress(Callback):
    def __init__(self, every=10):
        self.every = every

    def on_step_end(self, trainer, step, logs):
        if trainer.is_main and step % self.every == 0:
            print(f"step {step:4d} loss {logs['loss']:.4f} lr {logs['lr']:.2e}", flush=True)


class MetricsFile(Callback):
    def on_epoch_end(self, trainer, epoch, logs):
        if trainer.writer is not None:
            trainer.writer.write({"event": "epoch", "epoch": epoch, **logs})

    def on_train_end(self, trainer):
        if trainer.writer is not None:
            trainer.writer.close()


class Trainer:
    def __init__(self, model, args, callbacks=()):
        self.args = args
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        self.is_main = self.rank == 0
        self.model = DDP(model)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=args.lr, weight_decay=0.01)
        self.sched = torch.optim.lr_scheduler.OneCycleLR(
            self.opt, max_lr=args.lr, total_steps=args.epochs * args.steps_per_epoch)
        self.callbacks = list(callbacks)
        os.makedirs(args.out_dir, exist_ok=True)
        # only the main process writes the metrics file
        self.writer = JsonlWriter(os.path.join(args.out_dir, "metrics.jsonl")) if self.is_main else None
        self.global_step = 0

    def _call(self, hook, *a):
        for cb in self.callbacks:
            getattr(cb, hook)(self, *a)

    def compute_loss(self, x, y):
        logits = self.model(x)
        labelled = y != IGNORE
        n_lab = int(labelled.sum())
        if n_lab == 0:
            # keep every parameter in the graph so DDP's reducer still fires
            self.writer.write({"event": "skip_unlabelled_batch", "step": self.global_step, "rank": self.rank})
            return logits.sum() * 0.0, 0
        return F.cross_entropy(logits[labelled], y[labelled]), n_lab

    def fit(self, loader):
        self._call("on_train_begin")
        for epoch in range(self.args.epochs):
            self.model.train()
            tot = torch.zeros(3)  # loss*n, n, correct
            for x, y in loader:
                loss, n = self.compute_loss(x, y)
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.opt.step()
                self.sched.step()
                tot[0] += loss.item() * n
                tot[1] += n
                self.global_step += 1
                self._call("on_step_end", self.global_step,
                           {"loss": loss.item(), "lr": self.sched.get_last_lr()[0]})
            dist.all_reduce(tot)
            logs = {"train_loss": (tot[0] / tot[1].clamp(min=1)).item(), "labelled": int(tot[1])}
            if self.is_main:
                print(f"epoch {epoch} {logs}", flush=True)
            self._call("on_epoch_end", epoch, logs)
        self._call("on_train_end")


def build_model(d_in=32, n_cls=5, hidden=128):
    return nn.Sequential(nn.Linear(d_in, hidden), nn.GELU(), nn.Dropout(0.1),
                         nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, n_cls))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "callbacks"))
    p.add_argument("--out-dir", default="runs/callbacks")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--pg-timeout", type=int, default=10)
    args = p.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank = dist.get_rank()
    torch.manual_seed(0)

    # data is already shuffled and split into one shard per rank by the export job
    ds = JsonlShard(os.path.join(args.data_dir, f"shard-{rank:05d}.jsonl"))
    loader = DataLoader(ds, batch_size=args.batch_size, shuffle=False, drop_last=True)
    args.steps_per_epoch = len(loader)
    print(f"[rank {rank}] {len(ds)} examples, {len(loader)} batches", flush=True)

    trainer = Trainer(build_model(), args, callbacks=[PrintProgress(10), MetricsFile()])
    trainer.fit(loader)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
