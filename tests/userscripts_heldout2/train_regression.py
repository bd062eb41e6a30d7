#!/usr/bin/env python
# Energy-usage regression from building sensors. Plain DDP script, CPU/gloo, launched with torchrun.
import argparse
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser()
parser.add_argument("--data", default="data/sensors.pt")
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", default="runs/energy")
parser.add_argument("--pg-timeout", type=int, default=10)
args = parser.parse_args()

dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
rank, world = dist.get_rank(), dist.get_world_size()


def log(msg):
    if rank == 0:
        print(f"{time.strftime('%H:%M:%S')} {msg}", flush=True)


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    stats = torch.zeros(2, dtype=torch.float64)
    for xb, yb in loader:
        stats[0] += F.mse_loss(model(xb).squeeze(-1), yb, reduction="sum").item()
        stats[1] += yb.numel()
    dist.all_reduce(stats)
    model.train()
    return (stats[0] / stats[1]).item()


try:
    torch.manual_seed(args.seed)
    blob = torch.load(args.data)
    x, y = blob["x"], blob["y"]
    train_ds = TensorDataset(x[:2000], y[:2000])
    val_ds = TensorDataset(x[2000:], y[2000:])
    sampler = DistributedSampler(train_ds, shuffle=True, seed=args.seed)
    train_loader = DataLoader(train_ds, batch_size=args.batch_size, sampler=sampler)
    val_loader = DataLoader(val_ds, batch_size=100, sampler=DistributedSampler(val_ds, shuffle=False))

    net = nn.Sequential(nn.Linear(x.shape[1], 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 1))
    model = DDP(net)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)

    os.makedirs(args.out, exist_ok=True)
    ckpt_path = os.path.join(args.out, "checkpoint.pt")
    start_epoch = 0
    if os.path.exists(ckpt_path):
        ckpt = torch.load(ckpt_path, map_location="cpu")
        net.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        scheduler.load_state_dict(ckpt["scheduler"])
        start_epoch = ckpt["epoch"] + 1
        log(f"resuming from epoch {start_epoch}")

    diverged = False
    for epoch in range(start_epoch, args.epochs):
        sampler.set_epoch(epoch)
        t0, running = time.time(), 0.0
        for step, (xb, yb) in enumerate(train_loader):
            loss = F.smooth_l1_loss(model(xb).squeeze(-1), yb)
            # guard against blow-ups: never step the optimizer on a non-finite loss
            if not torch.isfinite(loss):
                print(f"[rank {rank}] non-finite loss at epoch {epoch} step {step}, stopping training", flush=True)
                diverged = True
                break
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            optimizer.step()
            running += loss.item()
            if step % 10 == 0:
                log(f"epoch {epoch} step {step} loss {loss.item():.4f}")
        if diverged:
            break
        scheduler.step()
        val_mse = evaluate(model, val_loader)
        log(f"epoch {epoch} done in {time.time() - t0:.1f}s train_loss {running / (step + 1):.4f} val_mse {val_mse:.4f}")
        if rank == 0:
            torch.save({"model": net.state_dict(), "optimizer": optimizer.state_dict(),
                        "scheduler": scheduler.state_dict(), "epoch": epoch, "val_mse": val_mse}, ckpt_path)
        dist.barrier()

    final_mse = evaluate(model, val_loader)
    log(f"final val_mse {final_mse:.4f} (diverged={diverged})")
    if rank == 0:
        torch.save(net.state_dict(), os.path.join(args.out, "model_final.pt"))
finally:
    dist.destroy_process_group()
