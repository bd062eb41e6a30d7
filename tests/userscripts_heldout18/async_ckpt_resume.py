"""Autoencoder with asynchronous checkpoint upload and EMA weight swap.

Checkpoints are staged in memory and uploaded by a background thread to
slow shared storage so training is not blocked. After each epoch every
rank swaps in the EMA weights stored in the newest checkpoint.
"""
from __future__ import annotations

import io
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from ho18_runtime import get_logger, init_distributed, output_dir, seed_everything, shutdown_distributed

NAME = "async_ckpt_resume"
log = get_logger(NAME)


@dataclass
class Config:
    width: int = 512
    depth: int = 3
    epochs: int = 2
    batch: int = 64
    lr: float = 1e-3
    ema_decay: float = 0.9
    upload_chunk: int = 512 * 1024
    upload_mb_per_s: float = 4.0   # shared storage throughput seen from one host


class SlowSharedStorage:
    """Writes a byte payload to a path in chunks at a bounded rate."""

    def __init__(self, chunk: int, mb_per_s: float):
        self.chunk = chunk
        self.pause = chunk / (mb_per_s * 1024 * 1024)

    def upload(self, fh, payload: bytes, started: threading.Event):
        for off in range(0, len(payload), self.chunk):
            fh.write(payload[off: off + self.chunk])
            fh.flush()
            started.set()
            time.sleep(self.pause)
        fh.close()


class AsyncCheckpointer:
    def __init__(self, storage: SlowSharedStorage):
        self.storage = storage
        self._thread: Optional[threading.Thread] = None

    def save(self, state: dict, path: Path) -> None:
        self.wait()
        buf = io.BytesIO()
        torch.save(state, buf)                     # stage synchronously (cheap)
        fh = open(path, "wb")
        started = threading.Event()
        self._thread = threading.Thread(target=self.storage.upload, args=(fh, buf.getvalue(), started),
                                        name="ckpt-upload", daemon=True)
        self._thread.start()
        started.wait()                             # surface open/permission errors early

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None


class AutoEncoder(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        layers, d = [], 64
        for _ in range(cfg.depth):
            layers += [nn.Linear(d, cfg.width), nn.ReLU()]
            d = cfg.width
        self.enc = nn.Sequential(*layers)
        self.dec = nn.Linear(cfg.width, 64)

    def forward(self, x):
        return self.dec(self.enc(x))


class EMATrainer:
    def __init__(self, cfg: Config, out: Path, rank: int, world: int):
        self.cfg, self.out, self.rank = cfg, out, rank
        self.writer_rank = world - 1          # last rank has the spare host-RAM for staging
        data = torch.randn(2048, 64, generator=torch.Generator().manual_seed(0))
        ds = TensorDataset(data)
        self.sampler = DistributedSampler(ds, seed=0)
        self.loader = DataLoader(ds, batch_size=cfg.batch, sampler=self.sampler)
        self.model = DDP(AutoEncoder(cfg))
        self.ema = {k: v.detach().clone() for k, v in self.model.module.state_dict().items()}
        self.opt = torch.optim.Adam(self.model.parameters(), lr=cfg.lr)
        self.ckpt = AsyncCheckpointer(SlowSharedStorage(cfg.upload_chunk, cfg.upload_mb_per_s))
        self.latest = out / "latest.pt"

    def _update_ema(self):
        d = self.cfg.ema_decay
        with torch.no_grad():
            for k, v in self.model.module.state_dict().items():
                self.ema[k].mul_(d).add_(v, alpha=1 - d)

    def _publish(self, epoch: int):
        if self.rank == self.writer_rank:
            self.ckpt.save({"epoch": epoch, "ema": self.ema, "model": self.model.module.state_dict(),
                            "opt": self.opt.state_dict()}, self.latest)
            log.info("checkpoint for epoch %d queued (%s)", epoch, self.latest.name)
        dist.barrier()

    def _swap_in_ema(self):
        if self.rank == self.writer_rank:
            self.model.module.load_state_dict(self.ema)
            return
        blob = torch.load(self.latest, map_location="cpu")
        self.model.module.load_state_dict(blob["ema"])
        self.ema = {k: v.clone() for k, v in blob["ema"].items()}

    def train(self):
        for epoch in range(self.cfg.epochs):
            self.sampler.set_epoch(epoch)
            for (xb,) in self.loader:
                self.opt.zero_grad()
                loss = nn.functional.mse_loss(self.model(xb), xb)
                loss.backward()
                self.opt.step()
                self._update_ema()
            log.info("epoch %d recon %.4f", epoch, loss.item())
            self._publish(epoch)
            self._swap_in_ema()
        self.ckpt.wait()


def main():
    cfg = Config()
    out = output_dir(NAME)
    info = init_distributed()
    seed_everything(0)
    EMATrainer(cfg, out, info.rank, info.world_size).train()
    dist.barrier()
    shutdown_distributed()


if __name__ == "__main__":
    main()
