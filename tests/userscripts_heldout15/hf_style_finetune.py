"""Fine-tune a small MLP classifier on a tabular CSV, HF-Trainer style arguments.

    torchrun --nproc-per-node 2 hf_style_finetune.py --train_file data/train.csv
"""
import csv
import dataclasses
import json
import logging
import os
import sys
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Optional

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

logger = logging.getLogger(__name__)


@dataclass
class DataArguments:
    train_file: str = field(default="data/train.csv", metadata={"help": "CSV with features and a label column"})
    validation_split: float = field(default=0.1)
    label_column: str = field(default="label")


@dataclass
class TrainingArguments:
    output_dir: str = field(default="outputs/mlp-run")
    num_train_epochs: int = 4
    per_device_train_batch_size: int = 64
    learning_rate: float = 2e-3
    weight_decay: float = 0.01
    warmup_ratio: float = 0.1
    seed: int = 42
    logging_steps: int = 20
    pg_timeout: int = 10
    run_name: Optional[str] = None


def parse_dataclasses(*classes):
    """Poor man's HfArgumentParser: --field value for every dataclass field."""
    import argparse
    p = argparse.ArgumentParser()
    for cls in classes:
        for f in dataclasses.fields(cls):
            default = f.default if f.default is not dataclasses.MISSING else None
            typ = type(default) if default is not None else str
            p.add_argument(f"--{f.name}", f"--{f.name.replace('_', '-')}", dest=f.name, type=typ, default=default)
    ns = vars(p.parse_args())
    return tuple(cls(**{f.name: ns[f.name] for f in dataclasses.fields(cls)}) for cls in classes)


def setup_run_dir(training_args, is_main):
    """Create the run directory and switch into it so every relative artifact
    (checkpoints/, metrics.jsonl, config.json) lands in the run folder."""
    if not is_main:
        return
    os.makedirs(training_args.output_dir, exist_ok=True)
    os.chdir(training_args.output_dir)
    os.makedirs("checkpoints", exist_ok=True)
    with open("config.json", "w") as f:
        json.dump(dataclasses.asdict(training_args), f, indent=2)


def load_csv(path, label_column):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    feats = [c for c in rows[0] if c != label_column]
    x = torch.tensor([[float(r[c]) for c in feats] for r in rows], dtype=torch.float32)
    y = torch.tensor([int(r[label_column]) for r in rows], dtype=torch.long)
    return x, y


class MLP(nn.Module):
    def __init__(self, d_in, n_classes, hidden=128):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, hidden), nn.GELU(), nn.LayerNorm(hidden),
                                 nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, n_classes))

    def forward(self, x):
        return self.net(x)


def evaluate(model, loader):
    model.eval()
    stats = torch.zeros(3)  # loss sum, correct, count
    with torch.no_grad():
        for x, y in loader:
            logits = model(x)
            stats[0] += F.cross_entropy(logits, y, reduction="sum")
            stats[1] += (logits.argmax(-1) == y).sum()
            stats[2] += len(y)
    dist.all_reduce(stats)
    model.train()
    return {"eval_loss": (stats[0] / stats[2]).item(), "eval_acc": (stats[1] / stats[2]).item()}


def main():
    data_args, training_args = parse_dataclasses(DataArguments, TrainingArguments)
    dist.init_process_group("gloo", timeout=timedelta(seconds=training_args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    is_main = rank == 0
    logging.basicConfig(stream=sys.stdout, level=logging.INFO if is_main else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    torch.manual_seed(training_args.seed)
    setup_run_dir(training_args, is_main)

    x, y = load_csv(data_args.train_file, data_args.label_column)
    n_val = int(len(x) * data_args.validation_split)
    g = torch.Generator().manual_seed(training_args.seed)
    perm = torch.randperm(len(x), generator=g)
    train_ds = TensorDataset(x[perm[n_val:]], y[perm[n_val:]])
    val_ds = TensorDataset(x[perm[:n_val]], y[perm[:n_val]])
    train_sampler = DistributedSampler(train_ds, shuffle=True, seed=training_args.seed)
    train_dl = DataLoader(train_ds, batch_size=training_args.per_device_train_batch_size, sampler=train_sampler)
    val_dl = DataLoader(val_ds, batch_size=256, sampler=DistributedSampler(val_ds, shuffle=False))
    logger.info("train %d / val %d examples, %d features", len(train_ds), len(val_ds), x.size(1))

    model = DDP(MLP(x.size(1), int(y.max()) + 1))
    opt = torch.optim.AdamW(model.parameters(), lr=training_args.learning_rate,
                            weight_decay=training_args.weight_decay)
    total_steps = training_args.num_train_epochs * len(train_dl)
    warmup = int(training_args.warmup_ratio * total_steps)
    sched = torch.optim.lr_scheduler.SequentialLR(opt, [
        torch.optim.lr_scheduler.LinearLR(opt, 0.1, 1.0, total_iters=max(warmup, 1)),
        torch.optim.lr_scheduler.LinearLR(opt, 1.0, 0.0, total_iters=max(total_steps - warmup, 1))],
        milestones=[max(warmup, 1)])

    step = 0
    for epoch in range(training_args.num_train_epochs):
        train_sampler.set_epoch(epoch)
        t0 = time.time()
        for xb, yb in train_dl:
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            if is_main and step % training_args.logging_steps == 0:
                logger.info("step %d loss %.4f lr %.2e", step, loss.item(), sched.get_last_lr()[0])
        metrics = evaluate(model, val_dl)
        metrics.update(epoch=epoch, step=step, epoch_time=round(time.time() - t0, 2))
        if is_main:
            logger.info("eval %s", metrics)
            with open("metrics.jsonl", "a") as f:
                f.write(json.dumps(metrics) + "\n")
            torch.save(model.module.state_dict(), f"checkpoints/epoch{epoch}.pt")
        dist.barrier()

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
