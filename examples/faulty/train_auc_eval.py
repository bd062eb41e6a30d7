"""Click-through model; ROC-AUC over the whole validation set needs every rank's predictions."""
import argparse
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Subset, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def roc_auc(scores, labels):
    order = scores.argsort()
    ranks = torch.empty_like(order, dtype=torch.float)
    ranks[order] = torch.arange(1, len(scores) + 1, dtype=torch.float)
    pos = labels.bool()
    n_pos, n_neg = pos.sum().item(), (~pos).sum().item()
    return (ranks[pos].sum().item() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def make_clicks(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 24, generator=g)
    logit = x[:, :6].sum(1) - 1.0
    y = (torch.rand(n, generator=g) < torch.sigmoid(logit)).float()
    return TensorDataset(x, y)


def val_shard(ds, rank, world):
    """Plain contiguous split: no padding, no duplicated samples, so the AUC is exact."""
    idx = torch.tensor_split(torch.arange(len(ds)), world)[rank]
    return Subset(ds, idx.tolist())


@torch.no_grad()
def predict(model, loader):
    model.eval()
    out = torch.cat([torch.sigmoid(model(x).squeeze(1)) for x, _ in loader])
    labels = torch.cat([y for _, y in loader])
    model.train()
    return out, labels


def gather_all(t):
    parts = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, t)
    return torch.cat(parts)


def run(args):
    rank, world = dist.get_rank(), dist.get_world_size()
    train_set, val_set = make_clicks(2048, 0), make_clicks(args.val_size, 1)
    sampler = DistributedSampler(train_set)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)
    val_loader = DataLoader(val_shard(val_set, rank, world), batch_size=256)

    model = DDP(nn.Sequential(nn.Linear(24, 32), nn.ReLU(), nn.Linear(32, 1)))
    opt = torch.optim.Adagrad(model.parameters(), lr=0.05)
    bce = nn.BCEWithLogitsLoss()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        t0 = time.time()
        for x, y in train_loader:
            opt.zero_grad()
            bce(model(x).squeeze(1), y).backward()
            opt.step()
        scores, labels = predict(model, val_loader)
        scores, labels = gather_all(scores), gather_all(labels)
        if rank == 0:
            print(f"Epoch {epoch} | Steps: {len(train_loader)} | val AUC {roc_auc(scores, labels):.4f} "
                  f"(n={len(scores)}) | {time.time() - t0:.1f}s", flush=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--val-size", type=int, default=1001)
    p.add_argument("--pg-timeout", type=int, default=10)
    args = p.parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    try:
        run(args)
    finally:
        dist.destroy_process_group()
