import argparse
import math
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, Sampler

HERE = os.path.dirname(os.path.abspath(__file__))


def shard_path(root, k):
    return os.path.join(root, f"features-{k:05d}.pt")


def prepare_features(root, num_samples, shard_size):
    """Write the feature shards once (rank 0); the other ranks read them over the shared filesystem."""
    os.makedirs(root, exist_ok=True)
    g = torch.Generator().manual_seed(1234)
    w = torch.randn(24, generator=g)
    for k in range(num_samples // shard_size):
        x = torch.randn(shard_size, 24, generator=g)
        y = (x @ w > 0).long()
        tmp = shard_path(root, k) + ".tmp"
        torch.save({"x": x, "y": y}, tmp)
        os.replace(tmp, shard_path(root, k))


def wait_for(path, poll=0.5):
    # NFS attribute caching: a file written on another host can take a moment to show up
    while not os.path.exists(path):
        time.sleep(poll)


class ShardedFeatures(Dataset):
    def __init__(self, root, num_samples, shard_size):
        self.root, self.n, self.shard_size = root, num_samples, shard_size
        self._shard_id, self._shard = None, None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        k, j = divmod(i, self.shard_size)
        if k != self._shard_id:
            path = shard_path(self.root, k)
            wait_for(path)
            self._shard, self._shard_id = torch.load(path), k
        return self._shard["x"][j], self._shard["y"][j]


class ContiguousDistributedSampler(Sampler):
    """Each rank reads one contiguous block so it touches as few shard files as possible."""

    def __init__(self, n, rank, world):
        per = math.ceil(n / world)
        self.indices = list(range(rank * per, min(n, (rank + 1) * per)))

    def __iter__(self):
        return iter(self.indices)

    def __len__(self):
        return len(self.indices)


def train(args):
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        prepare_features(args.data_dir, args.num_samples, args.shard_size)
    dist.barrier()

    ds = ShardedFeatures(args.data_dir, args.num_samples, args.shard_size)
    loader = DataLoader(ds, batch_size=args.batch_size, sampler=ContiguousDistributedSampler(len(ds), rank, world),
                        num_workers=1, persistent_workers=True)
    model = DDP(nn.Sequential(nn.Linear(24, 48), nn.Tanh(), nn.Linear(48, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    for epoch in range(args.epochs):
        correct = seen = 0
        for step, (x, y) in enumerate(loader):
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            correct += (logits.argmax(1) == y).sum().item()
            seen += len(y)
        print(f"[rank {rank}] Epoch {epoch} | Steps: {len(loader)} | train acc {correct / seen:.3f}", flush=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--num-samples", type=int, default=2000)
    p.add_argument("--shard-size", type=int, default=256)
    p.add_argument("--data-dir", default=os.path.join(HERE, "checkpoints", "train_sharded_files", "features"))
    p.add_argument("--pg-timeout", type=int, default=10)
    args = p.parse_args()

    dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
    try:
        train(args)
    finally:
        dist.destroy_process_group()
