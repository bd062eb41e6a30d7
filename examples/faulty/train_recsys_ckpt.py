"""Rating model with a large user-embedding table.  Rank 0 writes one checkpoint per epoch;
the last rank evaluates exactly what is on disk (so eval numbers match the saved artefact)."""
import argparse
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))


class RatingModel(nn.Module):
    def __init__(self, n_users, n_items, dim=32):
        super().__init__()
        self.users = nn.Embedding(n_users, dim)
        self.items = nn.Embedding(n_items, dim)
        self.head = nn.Sequential(nn.Linear(2 * dim, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, u, i):
        return self.head(torch.cat([self.users(u), self.items(i)], dim=1)).squeeze(1)


class CheckpointManager:
    def __init__(self, directory):
        self.directory = directory
        os.makedirs(directory, exist_ok=True)

    def path(self, epoch):
        return os.path.join(self.directory, f"epoch_{epoch:03d}.pt")

    def save(self, epoch, model, optimizer):
        torch.save({"epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict()}, self.path(epoch))

    def wait_and_load(self, epoch, poll=0.05):
        path = self.path(epoch)
        while not os.path.exists(path):
            time.sleep(poll)
        return torch.load(path, map_location="cpu")


def synthetic_ratings(n, n_users, n_items, seed=0):
    g = torch.Generator().manual_seed(seed)
    u = torch.randint(0, n_users, (n,), generator=g)
    i = torch.randint(0, n_items, (n,), generator=g)
    r = ((u % 7).float() + (i % 5).float()) / 10
    return TensorDataset(u, i, r)


@torch.no_grad()
def evaluate(model, ds):
    u, i, r = ds.tensors
    return nn.functional.mse_loss(model(u, i), r).item()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--n-users", type=int, default=400_000)
    p.add_argument("--n-items", type=int, default=1000)
    p.add_argument("--ckpt-dir", default=os.path.join(HERE, "checkpoints", "train_recsys_ckpt"))
    p.add_argument("--pg-timeout", type=int, default=10)
    args = p.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    train_set = synthetic_ratings(2048, args.n_users, args.n_items, seed=1)
    val_set = synthetic_ratings(512, args.n_users, args.n_items, seed=2)
    sampler = DistributedSampler(train_set)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)

    net = RatingModel(args.n_users, args.n_items)
    model = DDP(net)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    ckpt = CheckpointManager(args.ckpt_dir)
    evaluator = RatingModel(args.n_users, args.n_items) if rank == world - 1 else None

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        t0 = time.time()
        for u, i, r in loader:
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(u, i), r)
            loss.backward()
            opt.step()
        print(f"[rank {rank}] Epoch {epoch} | Steps: {len(loader)} | loss {loss.item():.4f} | {time.time() - t0:.1f}s", flush=True)

        if rank == 0:
            ckpt.save(epoch, net, opt)
            print(f"[rank 0] saved {ckpt.path(epoch)}", flush=True)
        if evaluator is not None:
            evaluator.load_state_dict(ckpt.wait_and_load(epoch)["model"])
            print(f"[rank {rank}] epoch {epoch} val mse (from checkpoint) {evaluate(evaluator, val_set):.4f}", flush=True)

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
