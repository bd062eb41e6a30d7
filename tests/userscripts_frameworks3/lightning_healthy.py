"""Handwritten-digit MLP with PyTorch Lightning (CPU, DDP over gloo).

LightningDataModule (prepare_data caches sklearn's digits to disk, setup()
splits and standardises), self.log(..., sync_dist=True), EarlyStopping,
ModelCheckpoint (top-k + last), a custom summary Callback and a CSVLogger.
A second Trainer resumes from last.ckpt and finally tests the best checkpoint.

    torchrun --nproc-per-node 2 lightning_healthy.py
"""
import json
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from lightning.pytorch import Callback, LightningDataModule, LightningModule, Trainer, seed_everything
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.strategies import DDPStrategy
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from fw3_common import arm_hang_watchdog, fresh_outdir, say

NAME = "lightning_healthy"
OUT = fresh_outdir(NAME)
arm_hang_watchdog(60)


class DigitsDataModule(LightningDataModule):
    def __init__(self, data_dir, batch_size=64):
        super().__init__()
        self.data_dir = data_dir
        self.batch_size = batch_size

    def prepare_data(self):
        # runs once per node (local rank 0); Lightning puts a barrier after it
        cache = self.data_dir / "digits.npz"
        if not cache.exists():
            self.data_dir.mkdir(parents=True, exist_ok=True)
            x, y = load_digits(return_X_y=True)
            np.savez(cache, x=x.astype(np.float32), y=y.astype(np.int64))

    def setup(self, stage=None):
        d = np.load(self.data_dir / "digits.npz")
        x, y = torch.from_numpy(d["x"]), torch.from_numpy(d["y"])
        perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
        x, y = x[perm], y[perm]
        n_train, n_val = 1200, 300
        mean, std = x[:n_train].mean(0), x[:n_train].std(0) + 1e-3
        x = (x - mean) / std
        self.train_set = TensorDataset(x[:n_train], y[:n_train])
        self.val_set = TensorDataset(x[n_train:n_train + n_val], y[n_train:n_train + n_val])
        self.test_set = TensorDataset(x[n_train + n_val:], y[n_train + n_val:])

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=128)

    def test_dataloader(self):
        return DataLoader(self.test_set, batch_size=128)


class DigitsMLP(LightningModule):
    def __init__(self, hidden=64, lr=3e-3):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Dropout(0.1), nn.Linear(hidden, 10))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True, sync_dist=True)
        return loss

    def _eval_step(self, batch, prefix):
        x, y = batch
        logits = self(x)
        self.log(f"{prefix}_loss", F.cross_entropy(logits, y), sync_dist=True)
        self.log(f"{prefix}_acc", (logits.argmax(-1) == y).float().mean(), sync_dist=True)

    def validation_step(self, batch, batch_idx):
        self._eval_step(batch, "val")

    def test_step(self, batch, batch_idx):
        self._eval_step(batch, "test")

    def configure_optimizers(self):
        opt = torch.optim.Adam(self.parameters(), lr=self.hparams.lr)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        return {"optimizer": opt, "lr_scheduler": sched}


class EpochSummary(Callback):
    """Writes one JSON line per validation epoch from global rank 0."""

    def __init__(self, path):
        self.path = path

    def on_validation_epoch_end(self, trainer, pl_module):
        if trainer.sanity_checking or not trainer.is_global_zero:
            return
        row = {k: float(v) for k, v in trainer.callback_metrics.items()}
        row["epoch"] = trainer.current_epoch
        with open(self.path, "a") as f:
            f.write(json.dumps(row) + "\n")


def make_trainer(max_epochs, ckpt_cb):
    return Trainer(
        accelerator="cpu",
        devices=2,
        num_nodes=1,
        strategy=DDPStrategy(timeout=timedelta(seconds=30), process_group_backend="gloo"),
        max_epochs=max_epochs,
        callbacks=[ckpt_cb, EarlyStopping(monitor="val_loss", patience=2, min_delta=1e-3),
                   EpochSummary(OUT / "epochs.jsonl")],
        logger=CSVLogger(save_dir=str(OUT / "logs"), name="digits"),
        enable_progress_bar=False,
        enable_model_summary=False,
        log_every_n_steps=5,
    )


def main():
    t0 = time.time()
    seed_everything(7, workers=True)
    dm = DigitsDataModule(OUT / "data")

    ckpt = ModelCheckpoint(dirpath=str(OUT / "ckpt"), filename="digits-{epoch:02d}-{val_acc:.3f}",
                           monitor="val_acc", mode="max", save_top_k=2, save_last=True)
    model = DigitsMLP()
    trainer = make_trainer(max_epochs=3, ckpt_cb=ckpt)
    trainer.fit(model, datamodule=dm)
    say("phase 1 done; last checkpoint:", ckpt.last_model_path)

    # resume from last.ckpt (restores optimizer/scheduler/epoch) and keep training
    ckpt2 = ModelCheckpoint(dirpath=str(OUT / "ckpt"), filename="digits-{epoch:02d}-{val_acc:.3f}",
                            monitor="val_acc", mode="max", save_top_k=2, save_last=True)
    model2 = DigitsMLP()
    trainer2 = make_trainer(max_epochs=5, ckpt_cb=ckpt2)
    trainer2.fit(model2, datamodule=dm, ckpt_path=ckpt.last_model_path)
    results = trainer2.test(model2, datamodule=dm, ckpt_path="best", verbose=False)
    say(f"best={ckpt2.best_model_path} test_acc={results[0]['test_acc']:.3f}")

    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
    say(f"done in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
