"""HF-Trainer-like training loop with callbacks, EMA and gradient accumulation.

    torchrun --nproc-per-node 2 callbacks_ema.py --output-dir runs/ema

Checkpoints (model, EMA, optimizer, scheduler, sampler epoch) are written every
epoch by the main process; at the end every rank evaluates the EMA weights of
the last checkpoint and the main process writes final_metrics.json.
"""
import atexit
import csv
import glob
import json
import os
import re
import sys
import time
from dataclasses import dataclass, field, fields
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset, DistributedSampler


@dataclass
class TrainingArguments:
    output_dir: str = "runs/ema"
    num_train_epochs: int = 3
    per_device_train_batch_size: int = 16
    gradient_accumulation_steps: int = 4
    learning_rate: float = 3e-3
    warmup_steps: int = 5
    ema_decay: float = 0.98
    save_total_limit: int = 2
    seed: int = 42
    pg_timeout: int = 10
    report_to: list = field(default_factory=lambda: ["csv"])

    @classmethod
    def from_argv(cls, argv):
        kw, it = {}, iter(argv)
        types = {f.name: f.type for f in fields(cls)}
        for tok in it:
            key = tok.lstrip("-").replace("-", "_")
            val = next(it)
            t = types[key]
            kw[key] = val.split(",") if t in (list, "list") else (t if callable(t) else eval(t))(val)
        return cls(**kw)


class TrainerCallback:
    def on_train_begin(self, trainer): pass
    def on_log(self, trainer, logs): pass
    def on_epoch_end(self, trainer, epoch): pass


class CSVLoggerCallback(TrainerCallback):
    def __init__(self):
        self.fh = None

    def on_train_begin(self, trainer):
        if trainer.is_main:
            self.fh = open(os.path.join(trainer.args.output_dir, "log.csv"), "w", newline="")
            self.writer = csv.writer(self.fh)
            self.writer.writerow(["step", "epoch", "loss", "lr"])
            atexit.register(self.fh.close)

    def on_log(self, trainer, logs):
        if self.fh is not None:
            self.writer.writerow([logs["step"], logs["epoch"], f"{logs['loss']:.5f}", f"{logs['lr']:.2e}"])
            self.fh.flush()


class CheckpointCallback(TrainerCallback):
    def on_epoch_end(self, trainer, epoch):
        if trainer.is_main:
            path = os.path.join(trainer.args.output_dir, f"checkpoint-{epoch}.pt")
            torch.save({"model": trainer.model.module.state_dict(), "ema": trainer.ema.state_dict(),
                        "optimizer": trainer.optimizer.state_dict(),
                        "scheduler": trainer.scheduler.state_dict(), "epoch": epoch}, path)
            ckpts = sorted(glob.glob(os.path.join(trainer.args.output_dir, "checkpoint-*.pt")),
                           key=lambda p: int(re.search(r"checkpoint-(\d+)\.pt", p).group(1)))
            for old in ckpts[:-trainer.args.save_total_limit]:
                os.remove(old)
        dist.barrier()


class EMA:
    def __init__(self, model, decay):
        self.decay = decay
        self.shadow = {k: v.detach().clone() for k, v in model.state_dict().items()}

    @torch.no_grad()
    def update(self, model):
        for k, v in model.state_dict().items():
            if v.dtype.is_floating_point:
                self.shadow[k].mul_(self.decay).add_(v.detach(), alpha=1 - self.decay)
            else:
                self.shadow[k].copy_(v)

    def state_dict(self):
        return self.shadow


class Trainer:
    def __init__(self, model, args, train_ds, eval_ds, callbacks):
        self.args, self.callbacks = args, callbacks
        self.rank = dist.get_rank()
        self.is_main = self.rank == 0
        self.model = DDP(model)
        self.ema = EMA(model, args.ema_decay)
        self.sampler = DistributedSampler(train_ds, shuffle=True, seed=args.seed)
        self.train_dl = DataLoader(train_ds, batch_size=args.per_device_train_batch_size,
                                   sampler=self.sampler, drop_last=True)
        self.eval_dl = DataLoader(eval_ds, batch_size=128,
                                  sampler=DistributedSampler(eval_ds, shuffle=False))
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=args.learning_rate)
        updates = args.num_train_epochs * (len(self.train_dl) // args.gradient_accumulation_steps)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min(1.0, (s + 1) / args.warmup_steps) * max(0.0, 1 - s / updates))
        self.step = 0

    def _fire(self, event, *a):
        for cb in self.callbacks:
            getattr(cb, event)(self, *a)

    def train(self):
        self._fire("on_train_begin")
        accum = self.args.gradient_accumulation_steps
        for epoch in range(self.args.num_train_epochs):
            self.sampler.set_epoch(epoch)
            self.model.train()
            for i, (x, y) in enumerate(self.train_dl):
                last_micro = (i + 1) % accum == 0
                ctx = self.model.no_sync() if not last_micro else torch.enable_grad()
                with ctx:
                    loss = F.cross_entropy(self.model(x), y) / accum
                    loss.backward()
                if last_micro:
                    self.optimizer.step()
                    self.scheduler.step()
                    self.optimizer.zero_grad(set_to_none=True)
                    self.ema.update(self.model.module)
                    self.step += 1
                    self._fire("on_log", {"step": self.step, "epoch": epoch, "loss": loss.item() * accum,
                                          "lr": self.scheduler.get_last_lr()[0]})
            self._fire("on_epoch_end", epoch)

    @torch.no_grad()
    def evaluate(self, model):
        model.eval()
        stats = torch.zeros(3, dtype=torch.float64)
        for x, y in self.eval_dl:
            logits = model(x)
            stats += torch.tensor([F.cross_entropy(logits, y, reduction="sum").item(),
                                   (logits.argmax(1) == y).sum().item(), len(y)], dtype=torch.float64)
        dist.all_reduce(stats)
        return {"eval_loss": stats[0].item() / stats[2].item(), "eval_acc": stats[1].item() / stats[2].item()}


def build_model():
    return nn.Sequential(nn.Linear(16, 64), nn.LayerNorm(64), nn.GELU(), nn.Linear(64, 4))


def synthetic(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, generator=g)
    y = (x[:, :4] + 0.3 * torch.randn(n, 4, generator=g)).argmax(1)
    return TensorDataset(x, y)


def main():
    args = TrainingArguments.from_argv(sys.argv[1:])
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    torch.manual_seed(args.seed)
    os.makedirs(args.output_dir, exist_ok=True)
    callbacks = [CheckpointCallback()] + ([CSVLoggerCallback()] if "csv" in args.report_to else [])
    trainer = Trainer(build_model(), args, synthetic(4096, 0), synthetic(1000, 1), callbacks)
    t0 = time.time()
    trainer.train()

    last = sorted(glob.glob(os.path.join(args.output_dir, "checkpoint-*.pt")),
                  key=lambda p: int(re.search(r"checkpoint-(\d+)\.pt", p).group(1)))[-1]
    ema_model = build_model()
    ema_model.load_state_dict(torch.load(last, map_location="cpu")["ema"])
    metrics = {"raw": trainer.evaluate(trainer.model.module), "ema": trainer.evaluate(ema_model)}
    if trainer.is_main:
        metrics["train_seconds"] = round(time.time() - t0, 2)
        with open(os.path.join(args.output_dir, "final_metrics.json"), "w") as f:
            json.dump(metrics, f, indent=2)
        print(json.dumps(metrics), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
