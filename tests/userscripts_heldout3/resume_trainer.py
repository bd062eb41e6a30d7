"""Churn model fine-tuning on the tabular feature store export.

HF-style TrainingArguments + a small Trainer with callbacks and EMA.  The job runs
on preemptible nodes, so the launcher always passes resume (default: latest).

    torchrun --nproc-per-node 2 resume_trainer.py [--output_dir out/churn]
"""
import copy
import json
import os
import re
import sys
from dataclasses import dataclass, fields
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

PREFIX_CHECKPOINT_DIR = "checkpoint"
_re_checkpoint = re.compile(r"^" + PREFIX_CHECKPOINT_DIR + r"\-(\d+)$")


@dataclass
class TrainingArguments:
    output_dir: str = "out/churn"
    num_train_epochs: int = 6
    per_device_train_batch_size: int = 64
    learning_rate: float = 2e-3
    weight_decay: float = 0.01
    save_steps: int = 150
    logging_steps: int = 25
    ema_decay: float = 0.999
    resume_from_checkpoint: str = "latest"  # "latest", a path, or "none"
    seed: int = 17
    pg_timeout: int = 10

    @classmethod
    def parse(cls, argv):
        out = cls()
        it = iter(argv)
        for tok in it:
            name = tok.lstrip("-").replace("-", "_")
            f = next((f for f in fields(cls) if f.name == name), None)
            if f is None:
                raise SystemExit(f"unknown argument {tok}")
            setattr(out, name, f.type(next(it)) if callable(f.type) else next(it))
        return out


def get_last_checkpoint(folder):
    content = os.listdir(folder) if os.path.isdir(folder) else []
    checkpoints = [p for p in content if _re_checkpoint.search(p) and os.path.isdir(os.path.join(folder, p))]
    if not checkpoints:
        return None
    return os.path.join(folder, max(checkpoints, key=lambda x: int(_re_checkpoint.search(x).group(1))))


def build_model(n_features=24):
    return nn.Sequential(
        nn.Linear(n_features, 128), nn.GELU(), nn.LayerNorm(128),
        nn.Linear(128, 128), nn.GELU(), nn.LayerNorm(128),
        nn.Linear(128, 1),
    )


def make_dataset(seed, n=20000, n_features=24):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, n_features, generator=g)
    w = torch.randn(n_features, generator=g)
    logits = x @ w / n_features ** 0.5 + 0.3 * torch.randn(n, generator=g)
    return TensorDataset(x, (logits > 0.4).float())


class EMA:
    def __init__(self, model, decay):
        self.decay = decay
        self.shadow = copy.deepcopy(model).eval().requires_grad_(False)

    @torch.no_grad()
    def update(self, model):
        for s, p in zip(self.shadow.parameters(), model.parameters()):
            s.mul_(self.decay).add_(p.detach(), alpha=1 - self.decay)


class TrainerCallback:
    def on_step_end(self, trainer, logs): pass
    def on_epoch_end(self, trainer, epoch): pass


class PrintCallback(TrainerCallback):
    def on_step_end(self, trainer, logs):
        if trainer.is_main and trainer.global_step % trainer.args.logging_steps == 0:
            print(json.dumps({"step": trainer.global_step, **logs}), flush=True)


class Trainer:
    def __init__(self, args, model, train_dataset, callbacks=()):
        self.args = args
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.is_main = self.rank == 0
        self.model = DDP(model)
        self.ema = EMA(model, args.ema_decay)
        self.sampler = DistributedSampler(train_dataset, shuffle=True, seed=args.seed)
        self.loader = DataLoader(train_dataset, batch_size=args.per_device_train_batch_size,
                                 sampler=self.sampler, drop_last=True)
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate,
                                           weight_decay=args.weight_decay)
        total = len(self.loader) * args.num_train_epochs
        self.scheduler = torch.optim.lr_scheduler.OneCycleLR(self.optimizer, args.learning_rate, total_steps=total)
        self.callbacks = list(callbacks)
        self.global_step = 0

    # ---- checkpointing ----
    def _save_checkpoint(self):
        if not self.is_main:
            return
        path = os.path.join(self.args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{self.global_step}")
        os.makedirs(path, exist_ok=True)
        torch.save({
            "model": self.model.module.state_dict(),
            "ema": self.ema.shadow.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "global_step": self.global_step,
        }, os.path.join(path, "state.pt"))

    def _load_checkpoint(self, path):
        state = torch.load(os.path.join(path, "state.pt"), map_location="cpu")
        self.model.module.load_state_dict(state["model"])
        self.ema.shadow.load_state_dict(state["ema"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.global_step = state["global_step"]
        if self.is_main:
            print(f"resumed from {path} at step {self.global_step}", flush=True)

    # ---- loop ----
    def train(self, resume_from_checkpoint=None):
        if resume_from_checkpoint:
            self._load_checkpoint(resume_from_checkpoint)
        steps_per_epoch = len(self.loader)
        start_epoch = self.global_step // steps_per_epoch
        skip = self.global_step % steps_per_epoch
        for epoch in range(start_epoch, self.args.num_train_epochs):
            self.sampler.set_epoch(epoch)
            self.model.train()
            for i, (x, y) in enumerate(self.loader):
                if epoch == start_epoch and i < skip:
                    continue
                logits = self.model(x).squeeze(-1)
                loss = F.binary_cross_entropy_with_logits(logits, y)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                self.optimizer.step()
                self.scheduler.step()
                self.ema.update(self.model.module)
                self.global_step += 1
                logs = {"loss": round(loss.item(), 4), "lr": self.scheduler.get_last_lr()[0]}
                for cb in self.callbacks:
                    cb.on_step_end(self, logs)
                if self.global_step % self.args.save_steps == 0:
                    self._save_checkpoint()
            for cb in self.callbacks:
                cb.on_epoch_end(self, epoch)
        return self.global_step


def main():
    args = TrainingArguments.parse(sys.argv[1:])
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    checkpoint = None
    if args.resume_from_checkpoint == "latest":
        checkpoint = get_last_checkpoint(args.output_dir)
    elif args.resume_from_checkpoint not in ("", "none"):
        checkpoint = args.resume_from_checkpoint

    trainer = Trainer(args, build_model(), make_dataset(args.seed), callbacks=[PrintCallback()])
    steps = trainer.train(resume_from_checkpoint=checkpoint)
    if trainer.is_main:
        torch.save(trainer.ema.shadow.state_dict(), os.path.join(args.output_dir, "ema_final.pt"))
        print(f"finished at step {steps}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
