"""Sensor-frame classifier reading packed binary records through a native
(ctypes) zero-copy decoder inside DataLoader worker processes.
"""
from __future__ import annotations

import ctypes
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import List

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from ho18_runtime import get_logger, init_distributed, output_dir, seed_everything, shutdown_distributed

NAME = "native_decoder_loader"
log = get_logger(NAME)

HEADER = struct.Struct("<4sIQH")      # magic, payload bytes, payload offset, label
MAGIC = b"SFR1"
FRAME = 48                            # float32 values per frame


@dataclass
class LoaderCfg:
    records: int = 512
    batch: int = 16
    workers: int = 1
    epochs: int = 2


# -------------------------------------------------------------- packing ----
def pack_record(values: np.ndarray, label: int) -> bytes:
    payload = values.astype(np.float32).tobytes()
    return HEADER.pack(MAGIC, len(payload), HEADER.size, label) + payload


def build_pack(path: Path, n: int) -> List[int]:
    """Writes n records; returns byte offsets. A replayed partial write from a
    flaky capture device left one record with a torn header."""
    rng = np.random.default_rng(42)
    offsets, blob = [], bytearray()
    for i in range(n):
        label = int(rng.integers(0, 3))
        rec = pack_record(rng.normal(label, 1.0, FRAME), label)
        if i == 301:
            torn = HEADER.pack(MAGIC, FRAME * 4, 0x5A5A5A5A5A5A5A, label)
            rec = torn + rec[HEADER.size:]
        offsets.append(len(blob))
        blob += rec
    path.write_bytes(bytes(blob))
    return offsets


# -------------------------------------------------------------- decoding ----
class ZeroCopyDecoder:
    """Reads the payload straight out of the mapped record buffer."""

    def __call__(self, raw: bytes) -> tuple:
        magic, nbytes, off, label = HEADER.unpack_from(raw, 0)
        if magic != MAGIC:
            raise ValueError("bad magic")
        buf = ctypes.create_string_buffer(raw, len(raw))
        data = ctypes.string_at(ctypes.addressof(buf) + off, nbytes)
        return np.frombuffer(data, dtype=np.float32).copy(), label


class PackedFrames(Dataset):
    def __init__(self, path: Path, offsets: List[int]):
        self.path, self.offsets = path, offsets
        self.size = path.stat().st_size
        self.decode = ZeroCopyDecoder()
        self._blob = None

    def __len__(self):
        return len(self.offsets)

    def _raw(self, i: int) -> bytes:
        if self._blob is None:           # opened lazily, once per worker
            self._blob = self.path.read_bytes()
        end = self.offsets[i + 1] if i + 1 < len(self.offsets) else self.size
        return self._blob[self.offsets[i]:end]

    def __getitem__(self, i):
        x, y = self.decode(self._raw(i))
        return torch.from_numpy(x), y


def make_loader(cfg: LoaderCfg, out: Path):
    pack = out / "frames.bin"
    offsets = build_pack(pack, cfg.records)
    ds = PackedFrames(pack, offsets)
    sampler = DistributedSampler(ds, shuffle=False)
    return sampler, DataLoader(ds, batch_size=cfg.batch, sampler=sampler, num_workers=cfg.workers)


def main():
    cfg = LoaderCfg()
    out = output_dir(NAME)
    info = init_distributed()
    seed_everything(8)
    local = out / f"node-cache-{info.local_rank}"      # each rank keeps its own node-local copy
    local.mkdir()
    sampler, loader = make_loader(cfg, local)
    model = DDP(nn.Sequential(nn.Linear(FRAME, 64), nn.ReLU(), nn.Linear(64, 3)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for ep in range(cfg.epochs):
        sampler.set_epoch(ep)
        for step, (xb, yb) in enumerate(loader):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
        log.info("epoch %d loss %.4f", ep, loss.item())
    dist.barrier()
    shutdown_distributed()


if __name__ == "__main__":
    main()
