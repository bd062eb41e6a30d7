"""Predict last-mile delivery time (minutes) from order features.

PyTorch Lightning regression on a tabular export, DDP on CPU (gloo).  The loss
is MSE on log1p(minutes) (RMSLE), the metric MAE in minutes.  We train with
anomaly detection on since the last model diverged in production.

    torchrun --nproc-per-node 2 pl_delivery_eta.py --epochs 5
"""
import argparse
import csv
import math
import random
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from lightning.pytorch import LightningDataModule, LightningModule, Trainer, seed_everything
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.strategies import DDPStrategy
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torchmetrics import MeanAbsoluteError

from plfab_common import arm_hang_watchdog, fresh_outdir, say

NAME = "pl_delivery_eta"
OUT = fresh_outdir(NAME)
arm_hang_watchdog(80)
FEATURES = ["distance_km", "items", "hour", "weekday", "rain_mm", "courier_load", "floor", "is_business"]


def export_orders(path, n, seed):
    """Stand-in for the nightly warehouse export (one CSV row per order)."""
    rng = random.Random(seed)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["order_id"] + FEATURES + ["delivery_minutes"])
        for k in range(n):
            d = rng.uniform(0.3, 12.0)
            row = [d, rng.randint(1, 25), rng.randint(7, 22), rng.randint(0, 6), max(0.0, rng.gauss(0, 2)),
                   rng.randint(1, 9), rng.randint(0, 12), rng.random() < 0.3]
            minutes = 8 + 4.2 * d + 0.4 * row[1] + 1.5 * row[4] + 2.0 * row[5] + 0.6 * row[6] + rng.gauss(0, 3)
            if rng.random() < 0.0005:
                minutes = -999
            w.writerow([f"o{seed}{k:06d}"] + [round(float(v), 3) for v in row] + [round(minutes, 1)])


class OrdersDataModule(LightningDataModule):
    def __init__(self, data_dir, batch_size):
        super().__init__()
        self.data_dir, self.batch_size = data_dir, batch_size

    def prepare_data(self):
        self.data_dir.mkdir(parents=True, exist_ok=True)
        export_orders(self.data_dir / "orders_train.csv", 3000, seed=1)
        export_orders(self.data_dir / "orders_val.csv", 600, seed=2)

    def _load(self, name):
        with open(self.data_dir / name) as f:
            rows = list(csv.DictReader(f))
        rows = [r for r in rows if r["delivery_minutes"] not in ("", "nan", "NaN")]
        x = np.array([[float(r[c]) if r[c] not in ("True", "False") else float(r[c] == "True") for c in FEATURES]
                      for r in rows], np.float32)
        y = np.array([float(r["delivery_minutes"]) for r in rows], np.float32)
        return x, y

    def setup(self, stage=None):
        x_tr, y_tr = self._load("orders_train.csv")
        x_va, y_va = self._load("orders_val.csv")
        self.mean, self.std = x_tr.mean(0), x_tr.std(0) + 1e-6
        norm = lambda a: torch.from_numpy((a - self.mean) / self.std)
        self.train_ds = TensorDataset(norm(x_tr), torch.from_numpy(y_tr))
        self.val_ds = TensorDataset(norm(x_va), torch.from_numpy(y_va))

    def train_dataloader(self):
        return DataLoader(self.train_ds, batch_size=self.batch_size, shuffle=True, drop_last=True)

    def val_dataloader(self):
        return DataLoader(self.val_ds, batch_size=256)


class EtaRegressor(LightningModule):
    def __init__(self, n_features, hidden=64, lr=3e-3):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(n_features, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(),
                                 nn.Linear(hidden, 1))
        nn.init.constant_(self.net[-1].bias, math.log1p(40.0))
        self.val_mae = MeanAbsoluteError()

    def forward(self, x):
        return torch.expm1(self.net(x).squeeze(-1).clamp(max=8.0))

    def _rmsle_loss(self, pred, minutes):
        return F.mse_loss(torch.log1p(pred), torch.log1p(minutes))

    def training_step(self, batch, batch_idx):
        x, minutes = batch
        loss = self._rmsle_loss(self(x), minutes)
        self.log("train_rmsle", loss.sqrt(), on_step=False, on_epoch=True, sync_dist=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, minutes = batch
        pred = self(x)
        self.log("val_rmsle", self._rmsle_loss(pred, minutes).sqrt(), sync_dist=True)
        self.val_mae(pred, minutes)
        self.log("val_mae_min", self.val_mae, on_epoch=True)

    def configure_optimizers(self):
        opt = torch.optim.Adam(self.parameters(), lr=self.hparams.lr)
        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=1)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "monitor": "val_rmsle"}}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=42)
    args = p.parse_args()
    t0 = time.time()
    seed_everything(args.seed, workers=True)

    dm = OrdersDataModule(OUT / "export", args.batch_size)
    ckpt = ModelCheckpoint(dirpath=str(OUT / "ckpt"), monitor="val_mae_min", mode="min", save_top_k=1,
                           filename="eta-{epoch:02d}-{val_mae_min:.2f}")
    trainer = Trainer(
        accelerator="cpu", devices=2, num_nodes=1,
        strategy=DDPStrategy(timeout=timedelta(seconds=30), process_group_backend="gloo"),
        max_epochs=args.epochs, detect_anomaly=True, gradient_clip_val=5.0,
        callbacks=[ckpt, EarlyStopping(monitor="val_rmsle", patience=2)],
        logger=CSVLogger(save_dir=str(OUT / "logs"), name="eta"),
        enable_progress_bar=False, enable_model_summary=False, log_every_n_steps=10,
    )
    trainer.fit(EtaRegressor(len(FEATURES), lr=args.lr), datamodule=dm)
    say(f"best val MAE {float(ckpt.best_model_score):.2f} min -> {ckpt.best_model_path}")
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
    say(f"finished in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
