"""Activity recognition (synthetic accelerometer windows) with a HF-Trainer-like setup:
TrainingArguments dataclass, gradient accumulation, linear warmup/decay, EMA weights,
per-epoch evaluation + save, load_best_model_at_end.

    bash setup/hf_ema.sh
    torchrun --nproc-per-node 2 hf_ema.py --num_train_epochs 3
"""
import argparse
import copy
import dataclasses
import json
import os
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass
class TrainingArguments:
    data_file: str = os.path.join(HERE, "data", "har", "windows.npz")
    output_dir: str = os.path.join(HERE, "runs", "hf_ema")
    num_train_epochs: int = 3
    per_device_train_batch_size: int = 32
    per_device_eval_batch_size: int = 128
    gradient_accumulation_steps: int = 2
    learning_rate: float = 3e-3
    weight_decay: float = 0.01
    warmup_ratio: float = 0.1
    max_grad_norm: float = 1.0
    ema_decay: float = 0.99
    logging_steps: int = 10
    load_best_model_at_end: bool = True
    metric_for_best_model: str = "eval_accuracy"
    seed: int = 42
    pg_timeout: int = field(default=10, metadata={"help": "process group timeout (s)"})


def parse_args():
    p = argparse.ArgumentParser()
    for f in dataclasses.fields(TrainingArguments):
        kw = {"default": f.default, "help": f.metadata.get("help")}
        if f.type is bool:
            kw["type"] = lambda s: s.lower() in ("1", "true", "yes")
        else:
            kw["type"] = f.type
        flags = [f"--{f.name}"] + ([f"--{f.name.replace('_', '-')}"] if "_" in f.name else [])
        p.add_argument(*flags, **kw)
    return TrainingArguments(**vars(p.parse_args()))


class ConvNet(nn.Module):
    def __init__(self, channels=3, n_classes=6, width=32):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv1d(channels, width, 5, padding=2), nn.GroupNorm(8, width), nn.ReLU(),
            nn.Conv1d(width, width * 2, 5, padding=2, stride=2), nn.GroupNorm(8, width * 2), nn.ReLU(),
            nn.AdaptiveAvgPool1d(1))
        self.classifier = nn.Linear(width * 2, n_classes)

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))


class EMA:
    def __init__(self, model, decay):
        self.decay, self.num_updates = decay, 0
        self.shadow = copy.deepcopy(model).eval()
        for p in self.shadow.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def update(self, model):
        # short runs: ramp the decay up so the average is not dominated by the random init
        self.num_updates += 1
        d = min(self.decay, (1 + self.num_updates) / (10 + self.num_updates))
        for s, p in zip(self.shadow.parameters(), model.parameters()):
            s.lerp_(p.detach(), 1.0 - d)


def main():
    args = parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    is_main = rank == 0
    torch.manual_seed(args.seed)
    os.makedirs(args.output_dir, exist_ok=True)

    data = np.load(args.data_file)
    train_ds = TensorDataset(torch.from_numpy(data["x_train"]).float(), torch.from_numpy(data["y_train"]).long())
    eval_ds = TensorDataset(torch.from_numpy(data["x_eval"]).float(), torch.from_numpy(data["y_eval"]).long())
    sampler = DistributedSampler(train_ds, shuffle=True, seed=args.seed)
    train_dl = DataLoader(train_ds, batch_size=args.per_device_train_batch_size, sampler=sampler)
    eval_dl = DataLoader(eval_ds, batch_size=args.per_device_eval_batch_size,
                         sampler=DistributedSampler(eval_ds, shuffle=False))

    model = ConvNet()
    ddp = DDP(model)
    ema = EMA(model, args.ema_decay)
    opt = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, weight_decay=args.weight_decay)
    updates_per_epoch = -(-len(train_dl) // args.gradient_accumulation_steps)
    total = updates_per_epoch * args.num_train_epochs
    warmup = int(args.warmup_ratio * total)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / max(1, warmup) if s < warmup else max(0.0, (total - s) / max(1, total - warmup)))
    if is_main:
        print(f"***** Running training *****\n  Num examples = {len(train_ds)}\n  Num epochs = "
              f"{args.num_train_epochs}\n  Total batch size = "
              f"{args.per_device_train_batch_size * world * args.gradient_accumulation_steps}\n"
              f"  Optimization steps = {total}", flush=True)

    @torch.no_grad()
    def evaluate(net):
        net.eval()
        sums = torch.zeros(3, dtype=torch.float64)
        for x, y in eval_dl:
            logits = net(x)
            sums += torch.tensor([F.cross_entropy(logits, y, reduction="sum").item(),
                                  (logits.argmax(1) == y).sum().item(), len(y)], dtype=torch.float64)
        dist.all_reduce(sums)
        return {"eval_loss": (sums[0] / sums[2]).item(), "eval_accuracy": (sums[1] / sums[2]).item()}

    best_metric, best_ckpt, global_step, history = None, None, 0, []
    t0 = time.time()
    for epoch in range(args.num_train_epochs):
        sampler.set_epoch(epoch)
        ddp.train()
        for i, (x, y) in enumerate(train_dl):
            last_micro = (i + 1) % args.gradient_accumulation_steps == 0 or i + 1 == len(train_dl)
            with ddp.no_sync() if not last_micro else nullcontext():
                loss = F.cross_entropy(ddp(x), y) / args.gradient_accumulation_steps
                loss.backward()
            if not last_micro:
                continue
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            ema.update(model)
            global_step += 1
            if is_main and global_step % args.logging_steps == 0:
                print(json.dumps({"loss": round(loss.item() * args.gradient_accumulation_steps, 4),
                                  "learning_rate": sched.get_last_lr()[0], "epoch": round(epoch + i / len(train_dl), 2),
                                  "step": global_step}), flush=True)

        metrics = evaluate(ema.shadow)
        metrics.update(epoch=epoch, step=global_step, elapsed=round(time.time() - t0, 1))
        history.append(metrics)
        if is_main:
            print(json.dumps(metrics), flush=True)
        ckpt_dir = os.path.join(args.output_dir, f"checkpoint-{global_step}")
        if is_main:
            os.makedirs(ckpt_dir, exist_ok=True)
            tmp = os.path.join(ckpt_dir, "state.pt.tmp")
            torch.save({"model": model.state_dict(), "ema": ema.shadow.state_dict(),
                        "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                        "global_step": global_step, "epoch": epoch}, tmp)
            os.replace(tmp, os.path.join(ckpt_dir, "state.pt"))
        # every rank sees the same all-reduced metrics, so they all agree on the best checkpoint
        if best_metric is None or metrics[args.metric_for_best_model] > best_metric:
            best_metric, best_ckpt = metrics[args.metric_for_best_model], ckpt_dir
        dist.barrier()

    if args.load_best_model_at_end and best_ckpt is not None:
        state = torch.load(os.path.join(best_ckpt, "state.pt"), map_location="cpu")
        ema.shadow.load_state_dict(state["ema"])
        final = evaluate(ema.shadow)
        if is_main:
            print(f"Loading best model from {os.path.relpath(best_ckpt, HERE)} "
                  f"({args.metric_for_best_model}={best_metric:.4f}); re-eval: {json.dumps(final)}", flush=True)
    if is_main:
        with open(os.path.join(args.output_dir, "trainer_state.json"), "w") as f:
            json.dump({"best_metric": best_metric, "best_model_checkpoint": best_ckpt,
                       "log_history": history}, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
