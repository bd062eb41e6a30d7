"""Audio-clip classifier on a packed binary record file with PyTorch Lightning (CPU, DDP/gloo).

prepare_data() packs the clip features into one record file plus an index;
the Dataset decodes records zero-copy with ctypes inside DataLoader worker
processes.  Validation metrics use sync_dist=True, checkpoints keep the best
val_acc, and a small callback reports throughput per epoch.

    torchrun --nproc-per-node 2 lightning_worker_segfault.py
"""
import ctypes
import struct
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from lightning.pytorch import Callback, LightningDataModule, LightningModule, Trainer, seed_everything
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.strategies import DDPStrategy
from torch import nn
from torch.utils.data import DataLoader, Dataset

from fw3_common import arm_hang_watchdog, fresh_outdir, say

NAME = "lightning_worker_segfault"
OUT = fresh_outdir(NAME)
arm_hang_watchdog(60)
N_FEAT, N_CLASSES = 64, 4
N_TRAIN, N_VAL = 1024, 256
HDR = struct.Struct("<QI")  # payload offset (from record start), number of float32 values


def decode_clip(record: bytes) -> np.ndarray:
    """Zero-copy decode of one packed record: header, then float32 payload."""
    offset, n = HDR.unpack_from(record, 0)
    out = np.empty(n, dtype=np.float32)
    base = ctypes.cast(ctypes.c_char_p(record), ctypes.c_void_p).value
    ctypes.memmove(out.ctypes.data, base + offset, n * 4)
    return out


def pack_records(path, feats, labels, damaged=()):
    index = []
    with open(path, "wb") as f:
        for i, (x, y) in enumerate(zip(feats, labels)):
            header = HDR.pack(HDR.size, len(x))
            if i in damaged:  # record hit by a partial overwrite in the export job
                header = b"\x00\x00" + b"ZZZZZZ" + header[8:]
            start = f.tell()
            f.write(header + x.astype(np.float32).tobytes())
            index.append((start, f.tell() - start, int(y)))
    np.save(str(path) + ".idx.npy", np.array(index, dtype=np.int64))


class ClipDataset(Dataset):
    def __init__(self, path, rows):
        self.path = path
        self.rows = rows
        self._blob = None  # opened lazily inside each worker

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        if self._blob is None:
            self._blob = self.path.read_bytes()
        start, length, label = self.rows[i]
        x = decode_clip(self._blob[start:start + length])
        return torch.from_numpy(x), int(label)


class ClipDataModule(LightningDataModule):
    def __init__(self, root, batch_size=8):
        super().__init__()
        self.root = root
        self.batch_size = batch_size

    def prepare_data(self):
        self.root.mkdir(parents=True, exist_ok=True)
        if (self.root / "clips.bin").exists():
            return
        rng = np.random.default_rng(3)
        centers = rng.normal(size=(N_CLASSES, N_FEAT)) * 1.5
        y = rng.integers(0, N_CLASSES, size=N_TRAIN + N_VAL)
        x = centers[y] + rng.normal(size=(len(y), N_FEAT))
        pack_records(self.root / "clips.bin", x, y, damaged={N_TRAIN + 96})

    def setup(self, stage=None):
        index = np.load(self.root / "clips.bin.idx.npy")
        self.train_set = ClipDataset(self.root / "clips.bin", index[:N_TRAIN])
        self.val_set = ClipDataset(self.root / "clips.bin", index[N_TRAIN:])

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=32, shuffle=True, num_workers=1)

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=self.batch_size, num_workers=1)


class ClipClassifier(LightningModule):
    def __init__(self, lr=2e-3):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(N_FEAT, 64), nn.ReLU(), nn.Linear(64, N_CLASSES))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss, on_epoch=True, sync_dist=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y), sync_dist=True)
        self.log("val_acc", (logits.argmax(-1) == y).float().mean(), sync_dist=True)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


class Throughput(Callback):
    def on_train_epoch_start(self, trainer, pl_module):
        self.t = time.time()

    def on_train_epoch_end(self, trainer, pl_module):
        n = len(trainer.train_dataloader.dataset)
        if trainer.is_global_zero:
            say(f"epoch {trainer.current_epoch}: {n / (time.time() - self.t):.0f} clips/s")


def main():
    t0 = time.time()
    seed_everything(5)
    trainer = Trainer(
        accelerator="cpu",
        devices=2,
        strategy=DDPStrategy(timeout=timedelta(seconds=30), process_group_backend="gloo"),
        max_epochs=2,
        callbacks=[ModelCheckpoint(dirpath=str(OUT / "ckpt"), monitor="val_acc", mode="max"), Throughput()],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=2,
    )
    trainer.fit(ClipClassifier(), datamodule=ClipDataModule(OUT / "data"))
    say("best:", trainer.checkpoint_callback.best_model_path)
    if dist.is_initialized():
        dist.destroy_process_group()
    say(f"done in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
