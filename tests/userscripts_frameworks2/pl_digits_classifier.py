#!/usr/bin/env python
"""Handwritten digits (sklearn's 8x8 digits set) with PyTorch Lightning.

LightningDataModule + LightningModule + callbacks (checkpointing, early stopping, a
small epoch-summary callback), CSV logging, and a final test on the best checkpoint.

    torchrun --nproc-per-node 2 pl_digits_classifier.py
"""
import argparse
import os
import shutil
import time
from datetime import timedelta

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
import torchmetrics
from lightning.pytorch.callbacks import Callback, EarlyStopping, LearningRateMonitor, ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.strategies import DDPStrategy
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

WORK_DIR = "/tmp/fw2_pl_digits"


class DigitsDataModule(pl.LightningDataModule):
    def __init__(self, batch_size=64, seed=0):
        super().__init__()
        self.save_hyperparameters()

    def setup(self, stage=None):
        X, y = load_digits(return_X_y=True)
        X = torch.tensor(X / 16.0, dtype=torch.float32).view(-1, 1, 8, 8)
        y = torch.tensor(y)
        X_tmp, X_test, y_tmp, y_test = train_test_split(X, y, test_size=0.2, random_state=self.hparams.seed,
                                                        stratify=y)
        X_train, X_val, y_train, y_val = train_test_split(X_tmp, y_tmp, test_size=0.15,
                                                          random_state=self.hparams.seed, stratify=y_tmp)
        self.train_ds = TensorDataset(X_train, y_train)
        self.val_ds = TensorDataset(X_val, y_val)
        self.test_ds = TensorDataset(X_test, y_test)

    def train_dataloader(self):
        return DataLoader(self.train_ds, batch_size=self.hparams.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_ds, batch_size=128)

    def test_dataloader(self):
        return DataLoader(self.test_ds, batch_size=128)


class DigitsNet(pl.LightningModule):
    def __init__(self, lr=3e-3, hidden=64, dropout=0.2):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Dropout(dropout), nn.Linear(32 * 4 * 4, hidden), nn.ReLU(), nn.Linear(hidden, 10),
        )
        self.val_acc = torchmetrics.Accuracy(task="multiclass", num_classes=10)
        self.test_acc = torchmetrics.Accuracy(task="multiclass", num_classes=10)
        self.test_f1 = torchmetrics.F1Score(task="multiclass", num_classes=10, average="macro")

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss, on_step=True, on_epoch=True, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y), sync_dist=True, prog_bar=True)
        self.val_acc(logits, y)
        self.log("val_acc", self.val_acc, prog_bar=True)

    def test_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.test_acc(logits, y)
        self.test_f1(logits, y)
        self.log_dict({"test_acc": self.test_acc, "test_f1": self.test_f1})

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr, weight_decay=1e-4)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=self.trainer.max_epochs)
        return {"optimizer": opt, "lr_scheduler": sched}


class EpochSummary(Callback):
    """One line per epoch on rank zero with timing and the main metrics."""

    def on_train_epoch_start(self, trainer, pl_module):
        self._t0 = time.time()

    def on_validation_epoch_end(self, trainer, pl_module):
        if trainer.sanity_checking or not trainer.is_global_zero:
            return
        m = trainer.callback_metrics
        print(f"[epoch {trainer.current_epoch}] {time.time() - getattr(self, '_t0', time.time()):.1f}s "
              f"val_loss={m.get('val_loss', float('nan')):.4f} val_acc={m.get('val_acc', float('nan')):.4f}",
              flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-epochs", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    args = ap.parse_args()

    if int(os.environ.get("RANK", "0")) == 0:
        shutil.rmtree(WORK_DIR, ignore_errors=True)
    pl.seed_everything(1234, workers=True)

    dm = DigitsDataModule(batch_size=args.batch_size)
    model = DigitsNet(lr=args.lr)
    ckpt = ModelCheckpoint(dirpath=os.path.join(WORK_DIR, "checkpoints"), filename="digits-{epoch:02d}-{val_acc:.3f}",
                           monitor="val_acc", mode="max", save_top_k=2, save_last=True)
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=2,
        strategy=DDPStrategy(process_group_backend="gloo", timeout=timedelta(seconds=30)),
        max_epochs=args.max_epochs,
        logger=CSVLogger(WORK_DIR, name="digits"),
        callbacks=[ckpt, EarlyStopping(monitor="val_loss", patience=3), LearningRateMonitor(), EpochSummary()],
        log_every_n_steps=5,
        enable_progress_bar=False,
        deterministic=True,
    )
    trainer.fit(model, datamodule=dm)
    trainer.test(model, datamodule=dm, ckpt_path="best")
    if trainer.is_global_zero:
        print(f"best checkpoint: {ckpt.best_model_path} (val_acc={ckpt.best_model_score:.4f})")


if __name__ == "__main__":
    main()
