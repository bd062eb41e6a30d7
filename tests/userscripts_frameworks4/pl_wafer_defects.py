"""Classify wafer-map defect patterns with a small CNN (PyTorch Lightning, DDP, CPU/gloo).

Synthetic 24x24 wafer maps with four pattern classes.  A confusion matrix is
written after each validation epoch so the process engineers can follow which
patterns get mixed up.

    torchrun --nproc-per-node 2 pl_wafer_defects.py --max-epochs 4
"""
import argparse
import csv
import time
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from lightning.pytorch import Callback, LightningDataModule, LightningModule, Trainer, seed_everything
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.strategies import DDPStrategy
from lightning.pytorch.utilities import rank_zero_only
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torchmetrics.classification import MulticlassAccuracy, MulticlassConfusionMatrix

from plfab_common import arm_hang_watchdog, fresh_outdir, say

NAME = "pl_wafer_defects"
OUT = fresh_outdir(NAME)
arm_hang_watchdog(80)
PATTERNS = ["center", "edge_ring", "scratch", "random"]
SIZE = 24


@dataclass
class Config:
    max_epochs: int = 4
    batch_size: int = 32
    lr: float = 3e-3
    n_train: int = 1024
    n_val: int = 256
    seed: int = 5


def synth_wafers(n, seed):
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:SIZE, :SIZE] - (SIZE - 1) / 2
    r = np.sqrt(xx ** 2 + yy ** 2) / (SIZE / 2)
    maps, labels = np.zeros((n, 1, SIZE, SIZE), np.float32), rng.integers(0, len(PATTERNS), n)
    for k, lab in enumerate(labels):
        m = (rng.random((SIZE, SIZE)) < 0.05).astype(np.float32)
        if PATTERNS[lab] == "center":
            m += (r < rng.uniform(0.2, 0.4)) * (rng.random((SIZE, SIZE)) < 0.7)
        elif PATTERNS[lab] == "edge_ring":
            m += (r > rng.uniform(0.75, 0.85)) * (r < 1.0) * (rng.random((SIZE, SIZE)) < 0.7)
        elif PATTERNS[lab] == "scratch":
            row = rng.integers(4, SIZE - 4)
            m[row - 1:row + 1, rng.integers(0, 8):rng.integers(16, SIZE)] = 1.0
        else:
            m += rng.random((SIZE, SIZE)) < 0.15
        maps[k, 0] = np.clip(m, 0, 1) * (r < 1.0)
    return torch.from_numpy(maps), torch.from_numpy(labels)


class WaferDataModule(LightningDataModule):
    def __init__(self, cfg: Config):
        super().__init__()
        self.cfg = cfg

    def setup(self, stage=None):
        self.train_ds = TensorDataset(*synth_wafers(self.cfg.n_train, self.cfg.seed))
        self.val_ds = TensorDataset(*synth_wafers(self.cfg.n_val, self.cfg.seed + 1))

    def train_dataloader(self):
        return DataLoader(self.train_ds, batch_size=self.cfg.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_ds, batch_size=64)


class WaferCNN(LightningModule):
    def __init__(self, lr=3e-3):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(32 * 6 * 6, 64), nn.ReLU(), nn.Linear(64, len(PATTERNS)))
        self.val_acc = MulticlassAccuracy(num_classes=len(PATTERNS))
        self.val_confmat = MulticlassConfusionMatrix(num_classes=len(PATTERNS))

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
        self.val_acc(logits, y)
        self.val_confmat.update(logits, y)
        self.log("val_acc", self.val_acc, on_epoch=True)

    def configure_optimizers(self):
        opt = torch.optim.Adam(self.parameters(), lr=self.hparams.lr)
        return {"optimizer": opt, "lr_scheduler": torch.optim.lr_scheduler.ExponentialLR(opt, 0.8)}


class ConfusionMatrixReport(Callback):
    """Writes the validation confusion matrix of every epoch as a CSV for the fab dashboard."""

    def __init__(self, out_dir):
        self.out_dir = out_dir
        self.out_dir.mkdir(parents=True, exist_ok=True)

    @rank_zero_only
    def on_validation_epoch_end(self, trainer, pl_module):
        if trainer.sanity_checking:
            return
        cm = pl_module.val_confmat.compute().cpu().numpy()
        path = self.out_dir / f"confmat_epoch{trainer.current_epoch:02d}.csv"
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["true\\pred"] + PATTERNS)
            for name, row in zip(PATTERNS, cm):
                w.writerow([name] + [int(v) for v in row])
        worst = PATTERNS[int(np.argmin(np.diag(cm) / np.maximum(cm.sum(1), 1)))]
        say(f"epoch {trainer.current_epoch}: confusion matrix -> {path.name}, weakest class '{worst}'")

    def on_validation_epoch_start(self, trainer, pl_module):
        pl_module.val_confmat.reset()


def parse_args() -> Config:
    p = argparse.ArgumentParser()
    for field, default in Config().__dict__.items():
        p.add_argument(f"--{field.replace('_', '-')}", type=type(default), default=default)
    return Config(**vars(p.parse_args()))


def main():
    cfg = parse_args()
    t0 = time.time()
    seed_everything(cfg.seed, workers=True)
    ckpt = ModelCheckpoint(dirpath=str(OUT / "ckpt"), monitor="val_acc", mode="max", save_top_k=1,
                           filename="wafer-{epoch:02d}-{val_acc:.3f}")
    trainer = Trainer(
        accelerator="cpu", devices=2, num_nodes=1,
        strategy=DDPStrategy(timeout=timedelta(seconds=30), process_group_backend="gloo"),
        max_epochs=cfg.max_epochs, callbacks=[ckpt, ConfusionMatrixReport(OUT / "reports")],
        logger=CSVLogger(save_dir=str(OUT / "logs"), name="wafer"),
        enable_progress_bar=False, enable_model_summary=False, log_every_n_steps=8,
    )
    trainer.fit(WaferCNN(lr=cfg.lr), datamodule=WaferDataModule(cfg))
    say(f"best {ckpt.best_model_path}")
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
    say(f"finished in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
