"""Sensor-window classifier, HF-style arguments + callbacks, DDP on CPU.

    torchrun --nproc-per-node 2 finetune_sensors.py

Feature normalisation statistics are computed once on the main process (the CSV is
large in production) and shared with the other ranks.
"""
import csv
import os
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import List

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from transformers_lite import HfArgumentParser  # local helper, see transformers_lite.py

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass
class TrainingArguments:
    data_file: str = "data/sensors.csv"
    output_dir: str = "outputs/sensors"
    num_train_epochs: int = 5
    per_device_train_batch_size: int = 32
    learning_rate: float = 1e-3
    warmup_ratio: float = 0.1
    logging_steps: int = 10
    seed: int = 42
    pg_timeout: int = 10
    label_names: List[str] = field(default_factory=lambda: ["idle", "walk", "run", "stairs"])


# ---------------------------------------------------------------- callbacks
class TrainerCallback:
    def on_train_begin(self, state): ...
    def on_log(self, state, logs): ...
    def on_epoch_end(self, state): ...


class PrinterCallback(TrainerCallback):
    def on_log(self, state, logs):
        if state["is_main"]:
            print(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in logs.items()),
                  flush=True)


class TimingCallback(TrainerCallback):
    def on_train_begin(self, state):
        state["t0"] = time.time()

    def on_epoch_end(self, state):
        if state["is_main"]:
            print(f"epoch {state['epoch']} finished after {time.time() - state['t0']:.1f}s", flush=True)


# ---------------------------------------------------------------- data
def read_csv(path):
    feats, labels = [], []
    with open(path, newline="") as f:
        reader = csv.reader(f)
        next(reader)
        for row in reader:
            feats.append([float(v) for v in row[:-1]])
            labels.append(int(row[-1]))
    return torch.tensor(feats), torch.tensor(labels)


def compute_feature_stats(x):
    return {"mean": x.mean(0).tolist(), "std": x.std(0).clamp_min(1e-6).tolist(), "n": len(x)}


class Normalize(nn.Module):
    def __init__(self, mean, std):
        super().__init__()
        self.register_buffer("mean", torch.tensor(mean))
        self.register_buffer("std", torch.tensor(std))

    def forward(self, x):
        return (x - self.mean) / self.std


def build_model(n_in, n_classes, stats):
    return nn.Sequential(
        Normalize(stats["mean"], stats["std"]),
        nn.Linear(n_in, 96), nn.ReLU(), nn.Dropout(0.1),
        nn.Linear(96, 96), nn.ReLU(),
        nn.Linear(96, n_classes),
    )


# ---------------------------------------------------------------- main
def main():
    (args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()
    dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    is_main = rank == 0
    torch.manual_seed(args.seed)

    x, y = read_csv(os.path.join(HERE, args.data_file))

    # stats on main process only, then share them
    stats = compute_feature_stats(x) if is_main else None
    dist.broadcast_object_list([stats], src=0)

    model = DDP(build_model(x.shape[1], len(args.label_names), stats))
    ds = TensorDataset(x, y)
    sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True, seed=args.seed)
    loader = DataLoader(ds, batch_size=args.per_device_train_batch_size, sampler=sampler, drop_last=True)

    opt = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
    total = args.num_train_epochs * len(loader)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.learning_rate, total_steps=total,
                                                pct_start=args.warmup_ratio)
    callbacks = [PrinterCallback(), TimingCallback()]
    state = {"is_main": is_main, "epoch": 0, "global_step": 0}
    for cb in callbacks:
        cb.on_train_begin(state)

    for epoch in range(args.num_train_epochs):
        state["epoch"] = epoch
        sampler.set_epoch(epoch)
        model.train()
        correct = torch.zeros(2)
        for xb, yb in loader:
            logits = model(xb)
            loss = F.cross_entropy(logits, yb, label_smoothing=0.05)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            state["global_step"] += 1
            correct += torch.tensor([(logits.argmax(1) == yb).sum().item(), len(yb)])
            if state["global_step"] % args.logging_steps == 0:
                for cb in callbacks:
                    cb.on_log(state, {"step": state["global_step"], "loss": loss.item(),
                                      "lr": sched.get_last_lr()[0]})
        dist.all_reduce(correct)
        for cb in callbacks:
            cb.on_log(state, {"epoch": epoch, "train_acc": (correct[0] / correct[1]).item()})
            cb.on_epoch_end(state)

    if is_main:
        os.makedirs(os.path.join(HERE, args.output_dir), exist_ok=True)
        torch.save({"model": model.module.state_dict(), "feature_stats": stats},
                   os.path.join(HERE, args.output_dir, "model.pt"))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
