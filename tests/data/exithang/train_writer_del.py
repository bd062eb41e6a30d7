"""Regression on rank-local shards; rank 0 keeps a metrics writer whose thread drains a queue; it is joined when the
writer goes away (a __del__ that waits for a thread nobody told to stop)."""
import queue
import threading

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def _drain(jobs):
    while True:
        line = jobs.get()
        if line is None:
            return
        with open("/tmp/metrics-writer.log", "a") as f:
            f.write(line + "\n")


class MetricsWriter:
    def __init__(self):
        self.jobs = queue.Queue()
        self.thread = threading.Thread(target=_drain, args=(self.jobs,), name="metrics-writer")
        self.thread.start()

    def log(self, **values):
        self.jobs.put(" ".join(f"{k}={v:.4f}" for k, v in values.items()))

    def __del__(self):
        self.thread.join()


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    writer = MetricsWriter() if rank == 0 else None
    for step in range(60):
        x = torch.randn(16, 8)
        loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if writer is not None and step % 10 == 9:
            writer.log(step=step, loss=loss.item())
    print(f"[rank {rank}] done, loss {loss.item():.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
