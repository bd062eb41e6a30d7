"""Multi-task forecaster: next-hour electricity load and temperature.

Shared MLP trunk over a 24h window of (load, temperature, hour-of-day)
features with two regression heads.  Trainer classes are shared with our
other forecasting jobs: BaseTrainer owns the loop, subclasses define the
loss/metrics, and a RunReporter collects per-rank histories at the end into
one summary file (on its own process group so reporting traffic never
interleaves with gradient buckets).
"""
import json
import logging
import os
import shutil
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

OUT = "/tmp/ho17_multitask_load"
CONFIG = {
    "window": 24,
    "n_days": 240,
    "hidden": 128,
    "epochs": 5,
    "batch_size": 64,
    "lr": 2e-3,
    "loss_weights": {"load": 1.0, "temp": 0.5},
    "seed": 4,
}
log = logging.getLogger("forecast")


def synth_series(n_days, seed):
    rng = np.random.default_rng(seed)
    t = np.arange(n_days * 24)
    hour = t % 24
    temp = 12 + 8 * np.sin(2 * np.pi * t / (24 * 365)) + 5 * np.sin(2 * np.pi * (hour - 9) / 24)
    temp += rng.normal(0, 1.0, size=t.shape)
    load = 50 + 15 * np.exp(-((hour - 19) ** 2) / 8) + 10 * np.exp(-((hour - 8) ** 2) / 6)
    load += 0.8 * np.abs(temp - 18) + rng.normal(0, 2.0, size=t.shape)
    return load.astype(np.float32), temp.astype(np.float32), hour


def make_windows(load, temp, hour, w):
    feats = np.stack([(load - load.mean()) / load.std(), (temp - temp.mean()) / temp.std(),
                      np.sin(2 * np.pi * hour / 24), np.cos(2 * np.pi * hour / 24)], axis=1)
    X = np.stack([feats[i:i + w].ravel() for i in range(len(load) - w)])
    Y = np.stack([load[w:], temp[w:]], axis=1)
    return torch.from_numpy(X.astype(np.float32)), torch.from_numpy(Y)


class Forecaster(nn.Module):
    def __init__(self, in_dim, hidden):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(in_dim, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU())
        self.load_head = nn.Linear(hidden, 1)
        self.temp_head = nn.Linear(hidden, 1)

    def forward(self, x):
        h = self.trunk(x)
        return torch.cat([self.load_head(h), self.temp_head(h)], dim=1)


class RunReporter:
    def __init__(self):
        self.group = dist.new_group(ranks=list(range(dist.get_world_size())), backend="gloo",
                                    timeout=timedelta(seconds=30))

    def collect(self, record):
        records = [None] * dist.get_world_size(self.group)
        dist.all_gather_object(records, record, group=self.group)
        return records


class BaseTrainer:
    def __init__(self, model, opt, train_dl, val_dl, cfg):
        self.rank = dist.get_rank()
        self.model, self.opt = model, opt
        self.train_dl, self.val_dl, self.cfg = train_dl, val_dl, cfg
        self.history = []
        self.reporter = RunReporter()
        # which rank writes artifacts can be moved off rank 0 on busy nodes
        self.exports_artifacts = str(self.rank) == os.environ.get("EXPORT_RANK", "0")

    def loss(self, pred, y):
        raise NotImplementedError

    def metrics(self, pred, y):
        raise NotImplementedError

    def fit(self):
        for epoch in range(self.cfg["epochs"]):
            self.train_dl.sampler.set_epoch(epoch)
            t0 = time.time()
            self.model.train()
            for x, y in self.train_dl:
                self.opt.zero_grad(set_to_none=True)
                self.loss(self.model(x), y).backward()
                self.opt.step()
            m = self.evaluate()
            m.update(epoch=epoch, seconds=round(time.time() - t0, 2))
            self.history.append(m)
            log.info("epoch %d %s", epoch, {k: round(v, 3) for k, v in m.items()})

    @torch.no_grad()
    def evaluate(self):
        self.model.eval()
        acc = None
        for x, y in self.val_dl:
            part = self.metrics(self.model(x), y)
            acc = part if acc is None else acc + part
        dist.all_reduce(acc)
        return self.summarise(acc)

    def export(self):
        path = os.path.join(OUT, "forecaster.pt")
        torch.save({"model": self.model.module.state_dict(), "config": self.cfg}, path)
        log.info("exported %s", path)

    def finish(self):
        if not self.exports_artifacts:
            log.info("no artifacts to export from this rank")
            return
        self.export()
        records = self.reporter.collect({"rank": self.rank, "history": self.history})
        with open(os.path.join(OUT, "summary.json"), "w") as f:
            json.dump(records, f, indent=1)
        log.info("summary written for %d ranks", len(records))
        dist.destroy_process_group()


class MultiTaskTrainer(BaseTrainer):
    def loss(self, pred, y):
        w = self.cfg["loss_weights"]
        return w["load"] * F.mse_loss(pred[:, 0], y[:, 0]) + w["temp"] * F.mse_loss(pred[:, 1], y[:, 1])

    def metrics(self, pred, y):
        err = (pred - y).abs()
        return torch.stack([err[:, 0].sum(), err[:, 1].sum(), torch.tensor(float(len(y)))])

    def summarise(self, acc):
        return {"mae_load": (acc[0] / acc[2]).item(), "mae_temp": (acc[1] / acc[2]).item()}


def main():
    cfg = CONFIG
    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    rank = dist.get_rank()
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s <{rank}> %(message)s")
    if rank == 0:
        shutil.rmtree(OUT, ignore_errors=True)
        os.makedirs(OUT)
    dist.barrier()

    load, temp, hour = synth_series(cfg["n_days"], cfg["seed"])
    X, Y = make_windows(load, temp, hour, cfg["window"])
    split = int(0.85 * len(X))
    train_ds, val_ds = TensorDataset(X[:split], Y[:split]), TensorDataset(X[split:], Y[split:])
    train_dl = DataLoader(train_ds, batch_size=cfg["batch_size"],
                          sampler=DistributedSampler(train_ds, shuffle=True, seed=cfg["seed"]))
    val_dl = DataLoader(val_ds, batch_size=256, sampler=DistributedSampler(val_ds, shuffle=False))

    torch.manual_seed(cfg["seed"])
    model = DDP(Forecaster(X.shape[1], cfg["hidden"]))
    opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"])
    trainer = MultiTaskTrainer(model, opt, train_dl, val_dl, cfg)
    trainer.fit()
    trainer.finish()


if __name__ == "__main__":
    main()
