"""Small CNN on synthetic 16x16 "shapes" with grad accumulation, EMA weights and callbacks.

HF-style arguments dataclass; torchrun --nproc-per-node 2 accum_ema.py
"""
import argparse
import contextlib
import copy
import csv
import dataclasses
import os
import time
from dataclasses import dataclass
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
    output_dir: str = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ema_out")
    num_train_epochs: int = 3
    per_device_train_batch_size: int = 32
    gradient_accumulation_steps: int = 4
    learning_rate: float = 3e-3
    warmup_ratio: float = 0.1
    ema_decay: float = 0.99
    logging_steps: int = 10
    seed: int = 42
    pg_timeout: int = 10


def parse_dataclass(cls):
    p = argparse.ArgumentParser()
    for f in dataclasses.fields(cls):
        p.add_argument("--" + f.name.replace("_", "-"), dest=f.name, type=type(f.default), default=f.default)
    return cls(**vars(p.parse_args()))


def make_shapes(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 1, 16, 16, generator=g) * 0.3
    y = torch.randint(0, 3, (n,), generator=g)
    for i in range(n):
        r, c = torch.randint(2, 10, (2,), generator=g).tolist()
        if y[i] == 0:
            x[i, 0, r:r + 5, c:c + 5] += 1.0                 # square
        elif y[i] == 1:
            x[i, 0, r:r + 6, c + 2] += 1.0                   # vertical bar
        else:
            x[i, 0, r + 2, c:c + 6] += 1.0                   # horizontal bar
    return TensorDataset(x, y)


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 16, 3, padding=1)
        self.c2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 4 * 4, 3)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.fc(x.flatten(1))


class EMA:
    def __init__(self, model, decay):
        self.decay = decay
        self.shadow = copy.deepcopy(model).eval().requires_grad_(False)

    @torch.no_grad()
    def update(self, model):
        for s, p in zip(self.shadow.parameters(), model.parameters()):
            s.lerp_(p, 1 - self.decay)


class CSVLogger:
    """callback: only the main process writes the metrics file"""

    def __init__(self, path, enabled):
        self.enabled = enabled
        if enabled:
            self.f = open(path, "w", newline="")
            self.w = csv.writer(self.f)
            self.w.writerow(["epoch", "step", "train_loss", "acc", "ema_acc"])

    def on_epoch_end(self, **m):
        if self.enabled:
            self.w.writerow([m["epoch"], m["step"], f"{m['train_loss']:.4f}", f"{m['acc']:.4f}", f"{m['ema_acc']:.4f}"])
            self.f.flush()


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    t = torch.zeros(2)
    for x, y in loader:
        t += torch.tensor([(model(x).argmax(1) == y).sum().item(), len(y)])
    dist.all_reduce(t)
    return (t[0] / t[1]).item()


def main():
    args = parse_dataclass(TrainingArguments)
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    if rank == 0:
        os.makedirs(args.output_dir, exist_ok=True)
    dist.barrier()

    train_ds, eval_ds = make_shapes(4096, 0), make_shapes(1024, 1)
    sampler = DistributedSampler(train_ds, shuffle=True, seed=args.seed, drop_last=True)
    train_dl = DataLoader(train_ds, batch_size=args.per_device_train_batch_size, sampler=sampler)
    eval_dl = DataLoader(eval_ds, batch_size=256, sampler=DistributedSampler(eval_ds, shuffle=False))

    model = DDP(SmallCNN())
    ema = EMA(model.module, args.ema_decay)
    opt = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
    updates_per_epoch = len(train_dl) // args.gradient_accumulation_steps
    total = updates_per_epoch * args.num_train_epochs
    warm = max(1, int(args.warmup_ratio * total))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / warm, max(0.0, (total - s) / (total - warm))))
    logger = CSVLogger(os.path.join(args.output_dir, "metrics.csv"), enabled=rank == 0)

    step = 0
    for epoch in range(args.num_train_epochs):
        sampler.set_epoch(epoch)
        model.train()
        t0, run_loss, n_micro = time.time(), 0.0, 0
        for i, (x, y) in enumerate(train_dl):
            boundary = (i + 1) % args.gradient_accumulation_steps == 0
            ctx = contextlib.nullcontext() if boundary else model.no_sync()
            with ctx:
                loss = F.cross_entropy(model(x), y) / args.gradient_accumulation_steps
                loss.backward()
            run_loss += loss.item() * args.gradient_accumulation_steps
            n_micro += 1
            if boundary:
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                sched.step()
                opt.zero_grad(set_to_none=True)
                ema.update(model.module)
                step += 1
                if rank == 0 and step % args.logging_steps == 0:
                    print(f"step {step}/{total} loss {run_loss / n_micro:.4f} lr {sched.get_last_lr()[0]:.2e}", flush=True)
        # leftover micro-batches (len % accum) are dropped with their grads
        opt.zero_grad(set_to_none=True)

        loss_t = torch.tensor([run_loss, n_micro], dtype=torch.float64)
        dist.all_reduce(loss_t)
        acc, ema_acc = evaluate(model, eval_dl), evaluate(ema.shadow, eval_dl)
        if rank == 0:
            print(f"epoch {epoch} loss {loss_t[0] / loss_t[1]:.4f} acc {acc:.3f} ema_acc {ema_acc:.3f} "
                  f"({time.time() - t0:.1f}s)", flush=True)
        logger.on_epoch_end(epoch=epoch, step=step, train_loss=(loss_t[0] / loss_t[1]).item(), acc=acc, ema_acc=ema_acc)

    ckpt = os.path.join(args.output_dir, "final.pt")
    if rank == 0:
        torch.save({"model": model.module.state_dict(), "ema": ema.shadow.state_dict(), "step": step}, ckpt)
    dist.barrier()
    # sanity check: every rank reloads the EMA weights and must get the same accuracy
    reloaded = SmallCNN()
    reloaded.load_state_dict(torch.load(ckpt, map_location="cpu", weights_only=True)["ema"])
    check = evaluate(reloaded, eval_dl)
    if rank == 0:
        print(f"reloaded ema acc {check:.3f} (expected {ema_acc:.3f})", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
