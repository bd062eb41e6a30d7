"""Tabular classifier on pre-sharded feature files with PyTorch Lightning (CPU, DDP/gloo).

prepare_data() writes the feature shards once; setup() gives every rank its
own contiguous block of shard files, so Lightning is told not to add a
DistributedSampler.  Metrics are logged with sync_dist=True; ModelCheckpoint
and EarlyStopping watch val_loss.

    torchrun --nproc-per-node 2 lightning_uneven_shards.py
"""
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from lightning.pytorch import LightningDataModule, LightningModule, Trainer, seed_everything
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint
from lightning.pytorch.strategies import DDPStrategy
from sklearn.datasets import make_classification
from torch import nn
from torch.utils.data import ConcatDataset, DataLoader, TensorDataset

from fw3_common import arm_hang_watchdog, fresh_outdir, say

NAME = "lightning_uneven_shards"
OUT = fresh_outdir(NAME)
arm_hang_watchdog(60)
N_SHARDS = 5
SHARD_SIZE = 96


class ShardedFeatures(LightningDataModule):
    def __init__(self, root, batch_size=32):
        super().__init__()
        self.root = root
        self.batch_size = batch_size

    def prepare_data(self):
        self.root.mkdir(parents=True, exist_ok=True)
        if (self.root / "val.npz").exists():
            return
        x, y = make_classification(n_samples=N_SHARDS * SHARD_SIZE + 256, n_features=20, n_informative=8,
                                   n_classes=3, random_state=0)
        x = x.astype(np.float32)
        for s in range(N_SHARDS):
            sl = slice(s * SHARD_SIZE, (s + 1) * SHARD_SIZE)
            np.savez(self.root / f"part-{s:04d}.npz", x=x[sl], y=y[sl])
        np.savez(self.root / "val.npz", x=x[-256:], y=y[-256:])

    @staticmethod
    def _load(path):
        d = np.load(path)
        return TensorDataset(torch.from_numpy(d["x"]), torch.from_numpy(d["y"]))

    def setup(self, stage=None):
        rank, world = self.trainer.global_rank, self.trainer.world_size
        files = sorted(self.root.glob("part-*.npz"))
        # contiguous, nearly equal blocks of files per rank (np.array_split semantics)
        mine = list(np.array_split(np.array(files, dtype=object), world)[rank])
        self.train_set = ConcatDataset([self._load(f) for f in mine])
        self.val_set = self._load(self.root / "val.npz")
        say(f"train shards {[f.name for f in mine]} -> {len(self.train_set)} samples")

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=128)


class TabularNet(LightningModule):
    def __init__(self, lr=3e-3):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 3))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True, sync_dist=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y), sync_dist=True)
        self.log("val_acc", (logits.argmax(-1) == y).float().mean(), sync_dist=True)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


def main():
    t0 = time.time()
    seed_everything(11)
    trainer = Trainer(
        accelerator="cpu",
        devices=2,
        strategy=DDPStrategy(timeout=timedelta(seconds=30), process_group_backend="gloo"),
        max_epochs=4,
        use_distributed_sampler=False,  # shards are already split per rank in setup()
        callbacks=[ModelCheckpoint(dirpath=str(OUT / "ckpt"), monitor="val_loss", save_top_k=1),
                   EarlyStopping(monitor="val_loss", patience=2)],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    trainer.fit(TabularNet(), datamodule=ShardedFeatures(OUT / "shards"))
    say("best checkpoint:", trainer.checkpoint_callback.best_model_path)
    if dist.is_initialized():
        dist.destroy_process_group()
    say(f"done in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
