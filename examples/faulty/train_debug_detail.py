import os

os.environ.setdefault("TORCH_DISTRIBUTED_DEBUG", "DETAIL")  # more info from c10d while we chase the hang

import argparse
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class Waveforms(Dataset):
    def __init__(self, n=2048, length=64, seed=0):
        g = torch.Generator().manual_seed(seed)
        freq = torch.rand(n, 1, generator=g) * 4
        t = torch.linspace(0, 1, length)
        self.x = torch.sin(2 * torch.pi * freq * t).unsqueeze(1)
        self.y = freq.squeeze(1)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class FreqNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv1d(1, 8, 5, padding=2), nn.ReLU(), nn.AdaptiveAvgPool1d(8))
        self.fc = nn.Linear(64, 1)

    def forward(self, x):
        return self.fc(self.conv(x).flatten(1)).squeeze(1)


class Trainer:
    def __init__(self, model, loader, rank):
        self.rank = rank
        self.model = DDP(model)
        self.loader = loader
        self.opt = torch.optim.Adam(self.model.parameters(), lr=3e-3)

    def _run_batch(self, x, y):
        self.opt.zero_grad()
        loss = nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        self.opt.step()
        return loss.item()

    def _run_epoch(self, epoch):
        self.loader.sampler.set_epoch(epoch)
        losses = [self._run_batch(x, y) for x, y in self.loader]
        print(f"[RANK{self.rank}] Epoch {epoch} | Steps: {len(losses)} | loss {sum(losses) / len(losses):.4f}", flush=True)

    def train(self, epochs):
        for epoch in range(epochs):
            self._run_epoch(epoch)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--total_epochs", type=int, default=3)
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--pg-timeout", type=int, default=10)
    args = p.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank = dist.get_rank()
    ds = Waveforms()
    loader = DataLoader(ds, batch_size=args.batch_size, sampler=DistributedSampler(ds))
    Trainer(FreqNet(), loader, rank).train(args.total_epochs)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
