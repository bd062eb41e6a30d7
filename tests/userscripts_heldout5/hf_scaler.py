"""Churn classifier trained with an HF-Trainer-like argument dataclass, callbacks,
gradient accumulation and a dynamic loss scaler (kept from the fp16 GPU version).

torchrun --nproc-per-node 2 hf_scaler.py --num-train-epochs 3
"""
import argparse
import dataclasses
import gc
import math
import time
from dataclasses import dataclass, field
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


@dataclass
class TrainingArguments:
    num_train_epochs: int = 3
    per_device_train_batch_size: int = 32
    gradient_accumulation_steps: int = 2
    learning_rate: float = 1e-3
    warmup_ratio: float = 0.1
    max_grad_norm: float = 1.0
    init_loss_scale: float = 2.0 ** 16
    scale_growth_interval: int = 20
    early_stopping_patience: int = 2
    logging_steps: int = 5
    seed: int = 17
    pg_timeout: int = 10
    report_to: list = field(default_factory=lambda: ["stdout"])


def parse_args():
    ap = argparse.ArgumentParser()
    for f in dataclasses.fields(TrainingArguments):
        if f.type in (int, float, "int", "float"):
            ap.add_argument("--" + f.name.replace("_", "-"), type=f.type if callable(f.type) else eval(f.type),
                            default=f.default)
    return TrainingArguments(**vars(ap.parse_args()))


def make_data(n, seed, glitch_at=None):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 24, generator=g)
    y = ((x[:, :6].sum(1) - x[:, 6:10].sum(1) + 0.3 * torch.randn(n, generator=g)) > 0).long()
    if glitch_at is not None:
        x[glitch_at, 5] = 3.0e38  # logger glitch: counter overflowed to float max
    return TensorDataset(x, y)


class DynamicLossScaler:
    """Same bookkeeping as torch.cuda.amp.GradScaler, but explicit so it also works with gloo."""

    def __init__(self, init_scale, growth_interval):
        self.scale, self.growth_interval, self._good = init_scale, growth_interval, 0

    def unscale_and_check(self, params):
        found = torch.zeros(1)
        for p in params:
            if p.grad is not None:
                p.grad.div_(self.scale)
                if not torch.isfinite(p.grad).all():
                    found.fill_(1.0)
        dist.all_reduce(found, op=dist.ReduceOp.MAX)  # every rank must agree on skipping
        return bool(found.item())

    def update(self, found_inf):
        if found_inf:
            self.scale, self._good = self.scale / 2, 0
        else:
            self._good += 1
            if self._good % self.growth_interval == 0:
                self.scale *= 2


class Callback:
    def on_log(self, state, logs): ...
    def on_evaluate(self, state, metrics): ...


class PrintCallback(Callback):
    def on_log(self, state, logs):
        if state["rank"] == 0:
            print(f"[{time.strftime('%H:%M:%S')}] step {state['global_step']} " +
                  " ".join(f"{k}={v:.4g}" for k, v in logs.items()), flush=True)


class EarlyStoppingCallback(Callback):
    def __init__(self, patience):
        self.patience, self.best, self.bad = patience, math.inf, 0

    def on_evaluate(self, state, metrics):
        # metrics are already all-reduced, so every rank takes the same decision
        if metrics["eval_loss"] < self.best - 1e-4:
            self.best, self.bad = metrics["eval_loss"], 0
        else:
            self.bad += 1
            state["should_stop"] = self.bad >= self.patience


def main():
    args = parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    train = make_data(4096, seed=args.seed, glitch_at=1500)
    evald = make_data(512, seed=args.seed + 1)
    sampler = DistributedSampler(train, shuffle=True, seed=args.seed)
    train_dl = DataLoader(train, batch_size=args.per_device_train_batch_size, sampler=sampler, drop_last=True)
    eval_dl = DataLoader(evald, batch_size=128, sampler=DistributedSampler(evald, shuffle=False))

    model = DDP(nn.Sequential(nn.Linear(24, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 64), nn.ReLU(),
                              nn.Linear(64, 2)))
    opt = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
    updates_per_epoch = len(train_dl) // args.gradient_accumulation_steps
    total = updates_per_epoch * args.num_train_epochs
    warm = int(args.warmup_ratio * total)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / max(1, warm)) * max(0.0, (total - s) / max(1, total - warm)))
    scaler = DynamicLossScaler(args.init_loss_scale, args.scale_growth_interval)
    callbacks = [PrintCallback(), EarlyStoppingCallback(args.early_stopping_patience)]
    state = {"rank": rank, "global_step": 0, "should_stop": False, "skipped": 0}

    for epoch in range(args.num_train_epochs):
        sampler.set_epoch(epoch)
        model.train()
        acc_loss = 0.0
        for i, (x, y) in enumerate(train_dl):
            boundary = (i + 1) % args.gradient_accumulation_steps == 0
            ctx = model.no_sync() if not boundary else torch.enable_grad()
            with ctx:
                loss = F.cross_entropy(model(x), y) / args.gradient_accumulation_steps
                (loss * scaler.scale).backward()
            acc_loss += loss.item()
            if not boundary:
                continue
            found_inf = scaler.unscale_and_check(model.parameters())
            if found_inf:
                state["skipped"] += 1
                if rank == 0:
                    print(f"non-finite gradients at step {state['global_step']}, skipping update "
                          f"(loss scale -> {scaler.scale / 2:g})", flush=True)
            else:
                gnorm = nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                opt.step()
                sched.step()
            scaler.update(found_inf)
            opt.zero_grad(set_to_none=True)
            state["global_step"] += 1
            if state["global_step"] % args.logging_steps == 0 and not found_inf:
                for cb in callbacks:
                    cb.on_log(state, {"loss": acc_loss, "grad_norm": float(gnorm), "scale": scaler.scale,
                                      "lr": sched.get_last_lr()[0]})
            acc_loss = 0.0

        model.eval()
        m = torch.zeros(3)
        with torch.no_grad():
            for x, y in eval_dl:
                out = model.module(x)
                m += torch.tensor([F.cross_entropy(out, y, reduction="sum").item(),
                                   (out.argmax(1) == y).sum().item(), len(y)])
        dist.all_reduce(m)
        metrics = {"eval_loss": (m[0] / m[2]).item(), "eval_acc": (m[1] / m[2]).item(), "epoch": epoch}
        for cb in callbacks:
            cb.on_log(state, metrics)
            cb.on_evaluate(state, metrics)
        if state["should_stop"]:
            break

    if rank == 0:
        print(f"done: {state['global_step']} updates, {state['skipped']} skipped", flush=True)
    del model, opt, sched
    gc.collect()
    dist.barrier()  # let every rank finish before tearing down gloo
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
