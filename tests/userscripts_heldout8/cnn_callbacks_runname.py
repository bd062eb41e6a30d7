"""Small CNN on synthetic 'shapes' images, HF-style arguments + callbacks.

    torchrun --nproc-per-node 2 cnn_callbacks_runname.py --num_train_epochs 3
"""
import argparse
import json
import os
import random
import time
from dataclasses import asdict, dataclass, fields
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

ADJ = ["brisk", "calm", "dark", "eager", "fancy", "gentle", "happy", "icy", "jolly", "kind"]
NOUN = ["otter", "falcon", "maple", "river", "comet", "badger", "lotus", "ember", "fjord", "heron"]


@dataclass
class TrainingArguments:
    output_dir: str = "runs"
    run_name: str = ""                 # empty -> generated, wandb style
    num_train_epochs: int = 3
    per_device_train_batch_size: int = 32
    learning_rate: float = 1e-3
    weight_decay: float = 1e-4
    warmup_ratio: float = 0.1
    logging_steps: int = 20
    seed: int = 42
    pg_timeout: int = 10


def parse_args():
    p = argparse.ArgumentParser()
    for f in fields(TrainingArguments):
        p.add_argument(f"--{f.name}", type=type(f.default), default=f.default)
        if "_" in f.name:  # accept --num-train-epochs as well as --num_train_epochs
            p.add_argument(f"--{f.name.replace('_', '-')}", dest=f.name, type=type(f.default),
                           default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return TrainingArguments(**vars(p.parse_args()))


def set_seed(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def make_shapes(n, seed, size=16):
    """class 0: horizontal bar, 1: vertical bar, 2: square, 3: noise only"""
    g = np.random.default_rng(seed)
    x = g.normal(0, 0.3, (n, 1, size, size)).astype(np.float32)
    y = g.integers(0, 4, n)
    for i in range(n):
        r, c = g.integers(2, size - 6, 2)
        if y[i] == 0:
            x[i, 0, r, c:c + 6] += 1.5
        elif y[i] == 1:
            x[i, 0, r:r + 6, c] += 1.5
        elif y[i] == 2:
            x[i, 0, r:r + 4, c:c + 4] += 1.0
    return TensorDataset(torch.from_numpy(x), torch.from_numpy(y))


class SmallCNN(nn.Module):
    def __init__(self, n_cls=4):
        super().__init__()
        self.c1 = nn.Conv2d(1, 16, 3, padding=1)
        self.c2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 4 * 4, n_cls)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.fc(x.flatten(1))


# ------------------------------------------------------------------ callbacks
class Callback:
    def on_train_begin(self, state): pass
    def on_log(self, state, logs): pass
    def on_epoch_end(self, state, metrics): pass
    def on_train_end(self, state): pass


class PrinterCallback(Callback):
    def on_log(self, state, logs):
        if state["is_main"]:
            print(json.dumps({"step": state["step"], **logs}), flush=True)


class BestCheckpointCallback(Callback):
    """Keeps <run_dir>/best.pt up to date (written by the main process)."""

    def __init__(self, metric="eval_acc"):
        self.metric, self.best = metric, -float("inf")

    def on_epoch_end(self, state, metrics):
        if metrics[self.metric] > self.best:
            self.best = metrics[self.metric]
            if state["is_main"]:
                torch.save({"model": state["model"].module.state_dict(), "epoch": state["epoch"],
                            self.metric: self.best}, os.path.join(state["run_dir"], "best.pt"))
                print(f"new best {self.metric}={self.best:.4f} at epoch {state['epoch']}", flush=True)


def evaluate(model, loader):
    model.eval()
    stats = torch.zeros(3)
    with torch.no_grad():
        for x, y in loader:
            logits = model(x)
            stats[0] += F.cross_entropy(logits, y, reduction="sum")
            stats[1] += (logits.argmax(1) == y).sum()
            stats[2] += len(y)
    dist.all_reduce(stats)
    model.train()
    return {"eval_loss": (stats[0] / stats[2]).item(), "eval_acc": (stats[1] / stats[2]).item()}


def main():
    args = parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    is_main = rank == 0
    # different seed per process so dropout / augmentation noise differs between ranks
    set_seed(args.seed + rank)

    if not args.run_name:
        args.run_name = f"{random.choice(ADJ)}-{random.choice(NOUN)}-{random.randint(100, 999)}"
    run_dir = os.path.join(args.output_dir, args.run_name)
    if is_main:
        os.makedirs(run_dir, exist_ok=True)
        with open(os.path.join(run_dir, "training_args.json"), "w") as f:
            json.dump(asdict(args), f, indent=2)
        print(f"run {args.run_name}: {world} processes, writing to {run_dir}", flush=True)

    train_ds, eval_ds = make_shapes(6000, seed=1), make_shapes(1000, seed=2)
    sampler = DistributedSampler(train_ds, shuffle=True, seed=args.seed)
    train_dl = DataLoader(train_ds, batch_size=args.per_device_train_batch_size, sampler=sampler)
    eval_dl = DataLoader(eval_ds, batch_size=200, sampler=DistributedSampler(eval_ds, shuffle=False))

    model = DDP(SmallCNN())
    opt = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, weight_decay=args.weight_decay)
    total = args.num_train_epochs * len(train_dl)
    warmup = int(args.warmup_ratio * total)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / max(1, warmup)) * max(0.0, (total - s) / max(1, total - warmup)))

    callbacks = [PrinterCallback(), BestCheckpointCallback("eval_acc")]
    state = {"model": model, "step": 0, "epoch": 0, "is_main": is_main, "run_dir": run_dir}
    for cb in callbacks:
        cb.on_train_begin(state)

    t0 = time.time()
    for epoch in range(args.num_train_epochs):
        state["epoch"] = epoch
        sampler.set_epoch(epoch)
        for x, y in train_dl:
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            state["step"] += 1
            if state["step"] % args.logging_steps == 0:
                for cb in callbacks:
                    cb.on_log(state, {"loss": round(loss.item(), 4), "lr": sched.get_last_lr()[0]})
        metrics = evaluate(model, eval_dl)
        for cb in callbacks:
            cb.on_log(state, {"epoch": epoch, **metrics, "elapsed": round(time.time() - t0, 1)})
            cb.on_epoch_end(state, metrics)
        dist.barrier()  # best.pt is on disk before anyone moves on

    for cb in callbacks:
        cb.on_train_end(state)

    # final: reload the best weights on every rank and report the eval metrics with them
    best = torch.load(os.path.join(run_dir, "best.pt"), map_location="cpu")
    model.module.load_state_dict(best["model"])
    final = evaluate(model, eval_dl)
    if is_main:
        print(f"best epoch {best['epoch']}: {final}", flush=True)
        with open(os.path.join(run_dir, "final_metrics.json"), "w") as f:
            json.dump(final, f, indent=2)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
