"""Rank 1's DataLoader worker is killed by SIGKILL mid-epoch (as the OOM killer kills the biggest worker): the
main process raises "DataLoader worker (pid N) is killed by signal: Killed."  The failure is the killed worker."""
import os
import signal

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset


class Images(Dataset):
    def __init__(self, rank):
        self.rank = rank

    def __len__(self):
        return 64

    def __getitem__(self, i):
        if self.rank == 1 and i == 20:
            os.kill(os.getpid(), signal.SIGKILL)
        return torch.randn(8)


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    for batch in DataLoader(Images(rank), batch_size=4, num_workers=1):
        dist.all_reduce(batch.sum())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
