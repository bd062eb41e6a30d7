"""Breast-cancer (sklearn) tabular classifier in Lightning, DDP over 2 CPU processes.

Several people run jobs on this box, so the rendezvous port is picked at random
instead of the default 29500.

    python lit_tumor_classifier.py
"""
import os
import socket


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


os.environ["MASTER_ADDR"] = "127.0.0.1"
os.environ["MASTER_PORT"] = str(_free_port())
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import tempfile
from datetime import timedelta

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchmetrics
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint
from lightning.pytorch.strategies import DDPStrategy
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from torch.utils.data import DataLoader, TensorDataset

ROOT = os.path.join(tempfile.gettempdir(), "lit-tumor")


def loaders(batch_size=32):
    x, y = load_breast_cancer(return_X_y=True)
    x_tr, x_va, y_tr, y_va = train_test_split(x, y, test_size=0.2, random_state=0, stratify=y)
    scaler = StandardScaler().fit(x_tr)
    to_t = lambda a, b: TensorDataset(torch.tensor(scaler.transform(a), dtype=torch.float32), torch.tensor(b))
    return (
        DataLoader(to_t(x_tr, y_tr), batch_size=batch_size, shuffle=True),
        DataLoader(to_t(x_va, y_va), batch_size=64),
    )


class TumorMLP(L.LightningModule):
    def __init__(self, n_features=30, hidden=32, lr=1e-3):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(n_features, hidden), nn.ReLU(), nn.Linear(hidden, 2))
        self.val_auroc = torchmetrics.AUROC(task="binary")

    def training_step(self, batch, _):
        x, y = batch
        loss = F.cross_entropy(self.net(x), y)
        self.log("train_loss", loss, sync_dist=True)
        return loss

    def validation_step(self, batch, _):
        x, y = batch
        logits = self.net(x)
        self.val_auroc(logits.softmax(-1)[:, 1], y)
        self.log("val_loss", F.cross_entropy(logits, y), sync_dist=True)
        self.log("val_auroc", self.val_auroc, on_epoch=True)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


if __name__ == "__main__":
    L.seed_everything(3)
    train_dl, val_dl = loaders()
    trainer = L.Trainer(
        accelerator="cpu",
        devices=2,
        strategy=DDPStrategy(process_group_backend="gloo", timeout=timedelta(seconds=15)),
        max_epochs=5,
        default_root_dir=ROOT,
        callbacks=[
            ModelCheckpoint(dirpath=os.path.join(ROOT, "ckpt"), monitor="val_auroc", mode="max"),
            EarlyStopping(monitor="val_loss", patience=3),
        ],
        enable_progress_bar=False,
        logger=False,
    )
    trainer.fit(TumorMLP(), train_dl, val_dl)
    if trainer.is_global_zero:
        print("val metrics:", {k: round(float(v), 4) for k, v in trainer.callback_metrics.items()}, flush=True)
