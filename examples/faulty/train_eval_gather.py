"""1000-way classifier on synthetic embeddings; top-1/top-5 on the full validation set every epoch."""
import argparse
import os
import resource
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

NUM_CLASSES = 1000
EMB = 64


def apply_memory_budget(local_rank: int, local_world: int) -> None:
    """Cap each process's address space so one runaway rank can't take the whole node down."""
    total = float(os.environ.get("JOB_MEM_GB", "5")) * 2**30
    # local rank 0 keeps the eval copy of the model and writes checkpoints: give it the bigger share
    share = 0.6 if local_rank == 0 else 0.4 / max(1, local_world - 1)
    limit = int(total * share)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def make_split(n, seed):
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(NUM_CLASSES, EMB, generator=torch.Generator().manual_seed(0))
    y = torch.randint(0, NUM_CLASSES, (n,), generator=g)
    x = centers[y] + 0.8 * torch.randn(n, EMB, generator=g)
    return TensorDataset(x, y)


class Trainer:
    def __init__(self, model, train_set, val_set, batch_size, rank, world):
        self.rank, self.world = rank, world
        self.model = DDP(model)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1, momentum=0.9)
        self.sampler = DistributedSampler(train_set, shuffle=True)
        self.train_loader = DataLoader(train_set, batch_size=batch_size, sampler=self.sampler)
        self.val_loader = DataLoader(val_set, batch_size=4096, sampler=DistributedSampler(val_set, shuffle=False))
        self.n_val_local = len(self.val_loader.sampler)

    def _run_batch(self, x, y):
        self.opt.zero_grad()
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        self.opt.step()
        return loss.item()

    def _run_epoch(self, epoch):
        self.sampler.set_epoch(epoch)
        losses = [self._run_batch(x, y) for x, y in self.train_loader]
        print(f"[rank{self.rank}] Epoch {epoch} | Steps: {len(losses)} | loss {sum(losses) / len(losses):.3f}", flush=True)

    @torch.no_grad()
    def evaluate(self, epoch):
        self.model.eval()
        logits = torch.empty(self.n_val_local, NUM_CLASSES)
        labels = torch.empty(self.n_val_local, dtype=torch.long)
        i = 0
        for x, y in self.val_loader:
            logits[i:i + len(x)] = self.model.module(x)
            labels[i:i + len(x)] = y
            i += len(x)
        all_logits = [torch.empty_like(logits) for _ in range(self.world)]
        all_labels = [torch.empty_like(labels) for _ in range(self.world)]
        dist.all_gather(all_logits, logits)
        dist.all_gather(all_labels, labels)
        logits, labels = torch.cat(all_logits), torch.cat(all_labels)
        top5 = logits.topk(5, dim=1).indices
        top1 = (top5[:, 0] == labels).float().mean().item()
        top5 = (top5 == labels[:, None]).any(1).float().mean().item()
        if self.rank == 0:
            print(f"Epoch {epoch} | val top1 {top1:.3f} top5 {top5:.3f} (n={len(labels)})", flush=True)
        self.model.train()

    def train(self, epochs):
        for epoch in range(epochs):
            t0 = time.time()
            self._run_epoch(epoch)
            self.evaluate(epoch)
            print(f"[rank{self.rank}] epoch {epoch} took {time.time() - t0:.1f}s", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--total-epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--train-size", type=int, default=2048)
    p.add_argument("--val-size", type=int, default=150_000)
    p.add_argument("--pg-timeout", type=int, default=10)
    args = p.parse_args()

    apply_memory_budget(int(os.environ["LOCAL_RANK"]), int(os.environ["LOCAL_WORLD_SIZE"]))
    dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    model = nn.Sequential(nn.Linear(EMB, 256), nn.ReLU(), nn.Linear(256, NUM_CLASSES))
    trainer = Trainer(model, make_split(args.train_size, 1), make_split(args.val_size, 2), args.batch_size, rank, world)
    trainer.train(args.total_epochs)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
