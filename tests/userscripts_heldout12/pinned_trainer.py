"""CPU data-parallel trainer with per-rank core pinning.

Launch:  torchrun --nproc-per-node 2 pinned_trainer.py --config configs/pinned_cpu.json
"""
import argparse
import json
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--config", default="configs/pinned_cpu.json")
    p.add_argument("--pg-timeout", type=int, default=10)
    p.add_argument("--out", default="runs/pinned")
    p.add_argument("--seed", type=int, default=1234)
    return p.parse_args()


class Callback:
    def on_train_start(self, trainer): pass
    def on_step_end(self, trainer, step, loss): pass
    def on_epoch_end(self, trainer, epoch, metrics): pass


class LoggingCallback(Callback):
    def __init__(self, every):
        self.every = every
        self.t0 = None

    def on_train_start(self, trainer):
        self.t0 = time.time()

    def on_step_end(self, trainer, step, loss):
        if trainer.is_main and step % self.every == 0:
            print(f"[step {step}] loss={loss:.4f} ({time.time() - self.t0:.1f}s)", flush=True)

    def on_epoch_end(self, trainer, epoch, metrics):
        if trainer.is_main:
            print(f"[epoch {epoch}] " + " ".join(f"{k}={v:.4f}" for k, v in metrics.items()), flush=True)


class CheckpointCallback(Callback):
    def __init__(self, out_dir):
        self.out_dir = out_dir

    def on_epoch_end(self, trainer, epoch, metrics):
        if trainer.is_main:
            os.makedirs(self.out_dir, exist_ok=True)
            torch.save({"epoch": epoch, "model": trainer.model.module.state_dict(),
                        "optim": trainer.optim.state_dict()},
                       os.path.join(self.out_dir, "last.pt"))
        dist.barrier()


class MLP(nn.Module):
    def __init__(self, in_dim, hidden, n_classes):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_dim, hidden), nn.GELU(),
                                 nn.Linear(hidden, hidden), nn.GELU(),
                                 nn.Linear(hidden, n_classes))

    def forward(self, x):
        return self.net(x)


def make_dataset(n, in_dim, n_classes, seed):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(in_dim, n_classes, generator=g)
    x = torch.randn(n, in_dim, generator=g)
    y = (x @ w + 0.1 * torch.randn(n, n_classes, generator=g)).argmax(1)
    return TensorDataset(x, y)


class Trainer:
    def __init__(self, cfg, args, callbacks):
        self.cfg, self.args, self.callbacks = cfg, args, callbacks
        dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        self.local_rank = int(os.environ.get("LOCAL_RANK", 0))
        self.is_main = self.rank == 0
        self._pin_threads()

        torch.manual_seed(args.seed)
        m = cfg["model"]
        self.model = DDP(MLP(m["in_dim"], m["hidden"], m["n_classes"]))
        o = cfg["optim"]
        self.optim = torch.optim.AdamW(self.model.parameters(), lr=o["lr"], weight_decay=o["weight_decay"])

        d = cfg["data"]
        ds = make_dataset(d["n_train"], m["in_dim"], m["n_classes"], args.seed)
        self.sampler = DistributedSampler(ds, shuffle=True, seed=args.seed)
        self.loader = DataLoader(ds, batch_size=d["batch_size"], sampler=self.sampler)
        self.global_step = 0

    def _pin_threads(self):
        # one block of physical cores per local rank, same layout as on the training box
        n = self.cfg["runtime"]["cores_per_rank"]
        cores = set(range(self.local_rank * n, (self.local_rank + 1) * n))
        os.sched_setaffinity(0, cores)
        torch.set_num_threads(len(os.sched_getaffinity(0)))
        print(f"rank {self.rank}: pinned to cores {sorted(os.sched_getaffinity(0))}", flush=True)

    def _emit(self, hook, *a):
        for cb in self.callbacks:
            getattr(cb, hook)(self, *a)

    def train_epoch(self, epoch):
        self.model.train()
        self.sampler.set_epoch(epoch)
        tot = torch.zeros(3)  # loss sum, correct, count
        for x, y in self.loader:
            logits = self.model(x)
            loss = F.cross_entropy(logits, y)
            self.optim.zero_grad(set_to_none=True)
            loss.backward()
            self.optim.step()
            self.global_step += 1
            tot += torch.tensor([loss.item() * len(y), (logits.argmax(1) == y).sum().item(), len(y)])
            self._emit("on_step_end", self.global_step, loss.item())
        dist.all_reduce(tot)
        return {"loss": (tot[0] / tot[2]).item(), "acc": (tot[1] / tot[2]).item()}

    def fit(self):
        self._emit("on_train_start")
        for epoch in range(self.cfg["runtime"]["epochs"]):
            metrics = self.train_epoch(epoch)
            self._emit("on_epoch_end", epoch, metrics)

    def close(self):
        dist.destroy_process_group()


def main():
    args = parse_args()
    with open(args.config) as f:
        cfg = json.load(f)
    callbacks = [LoggingCallback(cfg["runtime"]["log_every"]), CheckpointCallback(args.out)]
    trainer = Trainer(cfg, args, callbacks)
    try:
        trainer.fit()
    finally:
        trainer.close()


if __name__ == "__main__":
    main()
