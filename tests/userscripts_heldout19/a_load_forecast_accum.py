"""Hourly load forecasting (GRU) with DDP and gradient accumulation via no_sync().
Rank 0 doubles as the evaluator: it runs the rolling multi-step backtest and keeps the best weights.
The run is capped by a CPU-time budget like the cluster queue's cput limit."""
import argparse
import gc
import math
import os
import resource
import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from a_common import get_logger, setup, teardown

NAME = "load_forecast_accum"


@dataclass
class TrainCfg:
    window: int = 48
    horizon: int = 12
    hidden: int = 64
    micro_batch: int = 16
    accum_steps: int = 4
    epochs: int = 4
    lr: float = 2e-3
    backtest_origins: int = 300
    cpu_time_limit: str = field(default="10", metadata={"help": "minutes of CPU per worker (queue cput)"})


def synth_load(n_hours, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(n_hours)
    daily = np.sin(2 * np.pi * t / 24 - 1.2) + 0.4 * np.sin(4 * np.pi * t / 24)
    weekly = 0.3 * (((t // 24) % 7) < 5)
    temp = np.convolve(rng.normal(size=n_hours), np.ones(48) / 48, mode="same")
    y = 3 + daily + weekly + 0.8 * temp ** 2 + 0.1 * rng.normal(size=n_hours)
    return ((y - y.mean()) / y.std()).astype(np.float32)


class Windows(Dataset):
    def __init__(self, series, window, horizon):
        self.s = torch.from_numpy(series)
        self.w, self.h = window, horizon

    def __len__(self):
        return len(self.s) - self.w - self.h

    def __getitem__(self, i):
        return self.s[i:i + self.w].unsqueeze(-1), self.s[i + self.w:i + self.w + self.h]


class Forecaster(nn.Module):
    def __init__(self, hidden, horizon):
        super().__init__()
        self.gru = nn.GRU(1, hidden, num_layers=2, batch_first=True)
        self.head = nn.Linear(hidden, horizon)

    def forward(self, x):
        _, h = self.gru(x)
        return self.head(h[-1])


def cpu_seconds():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def apply_cpu_budget(cfg, log):
    limit = int(cfg.cpu_time_limit)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (limit, hard))
    log.info("cpu budget set to %s (used so far %.1fs)", cfg.cpu_time_limit, cpu_seconds())


@torch.no_grad()
def rolling_backtest(net, series, cfg):
    """Forecast from many origins, feeding predictions back in for a 2x horizon."""
    net.eval()
    errs = []
    s = torch.from_numpy(series)
    starts = np.linspace(0, len(s) - cfg.window - 2 * cfg.horizon - 1, cfg.backtest_origins).astype(int)
    for o in starts:
        ctx = s[o:o + cfg.window].clone()
        preds = []
        for _ in range(2):
            p = net(ctx.view(1, -1, 1))[0]
            preds.append(p)
            ctx = torch.cat([ctx[cfg.horizon:], p])
        pred = torch.cat(preds)
        truth = s[o + cfg.window:o + cfg.window + 2 * cfg.horizon]
        errs.append(F.l1_loss(pred, truth).item())
    net.train()
    return float(np.mean(errs))


def main():
    ap = argparse.ArgumentParser()
    for k, f in TrainCfg.__dataclass_fields__.items():
        ap.add_argument(f"--{k.replace('_', '-')}", type=type(f.default), default=f.default)
    cfg = TrainCfg(**vars(ap.parse_args()))
    rank, world, out = setup(NAME, watchdog_s=170, seed=1)
    log = get_logger(NAME, rank)
    apply_cpu_budget(cfg, log)

    series = synth_load(24 * 7 * 20, seed=2)
    split = int(len(series) * 0.8)
    train_ds = Windows(series[:split], cfg.window, cfg.horizon)
    sampler = DistributedSampler(train_ds, shuffle=True, seed=3, drop_last=True)
    loader = DataLoader(train_ds, cfg.micro_batch, sampler=sampler, drop_last=True)
    steps_per_epoch = len(loader) // cfg.accum_steps

    model = DDP(Forecaster(cfg.hidden, cfg.horizon))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, cfg.lr, total_steps=cfg.epochs * steps_per_epoch)
    best = math.inf

    for epoch in range(cfg.epochs):
        sampler.set_epoch(epoch)
        t0, run = time.time(), torch.zeros(2)
        batches = iter(loader)
        for _ in range(steps_per_epoch):
            for micro in range(cfg.accum_steps):
                x, y = next(batches)
                last = micro == cfg.accum_steps - 1
                ctx = model.no_sync() if not last else torch.enable_grad()
                with ctx:
                    loss = F.mse_loss(model(x), y) / cfg.accum_steps
                    loss.backward()
                run += torch.tensor([loss.item() * cfg.accum_steps, 1.0])
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
        dist.all_reduce(run)
        if rank == 0:
            mae = rolling_backtest(model.module, series[split - cfg.window:], cfg)
            if mae < best:
                best = mae
                torch.save(model.module.state_dict(), os.path.join(out, "best.pt"))
            log.info("epoch %d train_mse %.4f backtest_mae %.4f best %.4f (%.1fs, cpu %.1fs)",
                     epoch, run[0] / run[1], mae, best, time.time() - t0, cpu_seconds())
        dist.barrier()

    log.info("finished, cpu used %.1fs", cpu_seconds())
    del model, opt, sched
    gc.collect()
    teardown()


if __name__ == "__main__":
    main()
