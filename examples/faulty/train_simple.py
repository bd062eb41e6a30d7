import argparse
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def get_args():
    p = argparse.ArgumentParser(description="minimal DDP training on CPU")
    p.add_argument("total_epochs", type=int, nargs="?", default=3)
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--pg-timeout", type=int, default=10)
    return p.parse_args()


def main():
    args = get_args()
    dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank = int(os.environ["RANK"])

    torch.manual_seed(1)
    data = TensorDataset(torch.randn(2048, 20), torch.randint(0, 4, (2048,)))
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler)

    model = DDP(nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 4)))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    criterion = nn.CrossEntropyLoss()

    for epoch in range(args.total_epochs):
        sampler.set_epoch(epoch)
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = criterion(model(inputs), targets)
            loss.backward()
            optimizer.step()
        print(f"[RANK{rank}] Epoch {epoch} | Steps: {len(loader)} | loss {loss.item():.4f}")

    if rank == 0:
        print("training finished")


if __name__ == "__main__":
    main()
