"""10-class classifier trained from an annotation export, DDP on CPU, gradient accumulation."""
import argparse
import logging
import os
from contextlib import nullcontext
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

NUM_CLASSES = 10
log = logging.getLogger("train")


class AnnotatedSamples(Dataset):
    """Rows of an annotation export: (features, label).  The export tool writes 'unsure' as an extra class id."""

    def __init__(self, n=2048, seed=3):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 32, generator=g)
        self.y = (self.x[:, :NUM_CLASSES].argmax(1)).tolist()
        for i in (1531, 1877):  # rows the annotators flagged as unsure
            self.y[i] = NUM_CLASSES

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return {"features": self.x[i], "label": self.y[i], "row": i}


def collate(batch):
    labels = torch.tensor([b["label"] for b in batch])
    if labels.min() < 0 or labels.max() >= NUM_CLASSES:
        bad = [b["row"] for b in batch if not 0 <= b["label"] < NUM_CLASSES]
        raise ValueError(f"labels must be in [0, {NUM_CLASSES}), got rows {bad} with {labels.max().item()}")
    return torch.stack([b["features"] for b in batch]), labels


def train(model, loader, opt, epochs, accum_steps, rank):
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(epochs):
        loader.sampler.set_epoch(epoch)
        opt.zero_grad()
        running = 0.0
        for step, (x, y) in enumerate(loader):
            sync_now = (step + 1) % accum_steps == 0 or step + 1 == len(loader)
            with (nullcontext() if sync_now else model.no_sync()):
                loss = loss_fn(model(x), y) / accum_steps
                loss.backward()
            running += loss.item()
            if sync_now:
                opt.step()
                opt.zero_grad()
        log.info("Epoch %d | Steps: %d | loss %.4f", epoch, len(loader), running * accum_steps / len(loader))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--accum-steps", type=int, default=2)
    p.add_argument("--pg-timeout", type=int, default=10)
    args = p.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank = dist.get_rank()
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s [rank {rank}] %(message)s")

    ds = AnnotatedSamples()
    loader = DataLoader(ds, batch_size=args.batch_size, sampler=DistributedSampler(ds, shuffle=False),
                        collate_fn=collate)
    model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, NUM_CLASSES)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    try:
        train(model, loader, opt, args.epochs, args.accum_steps, rank)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
