"""Tabular regression with a background checkpoint uploader (a thread fed by a queue), DDP on gloo."""
import os
import queue
import threading
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Uploader:
    """Copies each saved checkpoint to 'remote storage' in the background; joined when it goes away."""

    def __init__(self, root):
        self.root, self.jobs = root, queue.Queue()
        self.thread = threading.Thread(target=self._run, name="uploader")
        self.thread.start()

    def _run(self):
        while True:
            path = self.jobs.get()
            if path is None:
                return
            time.sleep(0.05)  # the copy

    def submit(self, path):
        self.jobs.put(path)

    def __del__(self):
        self.thread.join()


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    uploader = Uploader("/tmp/ckpt-remote")
    for step in range(60):
        x = torch.randn(16, 8)
        loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 20 == 19 and rank == 0:
            path = os.path.join("/tmp", f"uploader-step{step}.pt")
            torch.save(model.module.state_dict(), path)
            uploader.submit(path)
    print(f"[rank {rank}] done, loss {loss.item():.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
