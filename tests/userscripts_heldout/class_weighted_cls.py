"""Long-tailed classification with inverse-frequency class weights.

Rank 0 owns the run config and hands it to everybody; class frequencies are
counted on each rank's shard and reduced on rank 0, which turns them into loss
weights for all ranks.

    torchrun --nproc-per-node 2 class_weighted_cls.py
"""
import argparse
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset

N_CLASSES = 10
# samples per class in the labelled pool (long tail)
CLASS_SIZES = [1800, 1100, 700, 450, 300, 200, 130, 80, 40, 1]
N_FEATURES = 32


def labelled_pool(seed=0):
    g = torch.Generator().manual_seed(seed)
    labels = torch.cat([torch.full((n,), c) for c, n in enumerate(CLASS_SIZES)])
    labels = labels[torch.randperm(len(labels), generator=g)]
    centers = torch.randn(N_CLASSES, N_FEATURES, generator=g) * 2
    x = centers[labels] + torch.randn(len(labels), N_FEATURES, generator=g)
    return x, labels


def default_config():
    return {"epochs": 4, "batch_size": 64, "lr": 2e-3, "label_smoothing": 0.05, "weight_power": 0.5}


def class_weights(x_labels, power):
    counts = torch.bincount(x_labels).float()
    dist.reduce(counts, dst=0, op=dist.ReduceOp.SUM)
    weights = [None]
    if dist.get_rank() == 0:
        w = counts.clamp(min=1).pow(-power)
        weights[0] = (w / w.mean()).tolist()
    dist.broadcast_object_list(weights, src=0)
    return torch.tensor(weights[0])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--pg-timeout", type=float, default=10.0)
    args = p.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()

    cfg = [default_config() if rank == 0 else None]
    dist.broadcast_object_list(cfg, src=0)
    cfg = cfg[0]

    x, y = labelled_pool()
    x, y = x[rank::world], y[rank::world]
    weights = class_weights(y, cfg["weight_power"])
    if rank == 0:
        print("class weights:", [round(w, 2) for w in weights.tolist()], flush=True)

    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(N_FEATURES, 128), nn.ReLU(), nn.Linear(128, N_CLASSES)))
    opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"])
    loader = DataLoader(TensorDataset(x, y), batch_size=cfg["batch_size"], shuffle=True, drop_last=True)

    for epoch in range(cfg["epochs"]):
        t0 = time.time()
        seen, loss_sum = 0, 0.0
        for xb, yb in loader:
            loss = F.cross_entropy(model(xb), yb, weight=weights, label_smoothing=cfg["label_smoothing"])
            opt.zero_grad()
            loss.backward()
            opt.step()
            seen += len(yb)
            loss_sum += loss.item() * len(yb)
        local = torch.tensor([loss_sum / seen, seen / (time.time() - t0)])
        per_rank = torch.empty(world * 2)
        dist.all_gather_into_tensor(per_rank, local)
        if rank == 0:
            per_rank = per_rank.view(world, 2)
            print(f"epoch {epoch} loss {per_rank[:, 0].mean():.4f} "
                  f"throughput {per_rank[:, 1].sum():.0f} samples/s", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
