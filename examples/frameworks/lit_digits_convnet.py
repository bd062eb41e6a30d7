"""Small ConvNet on sklearn's 8x8 digits with Lightning DDP (2 CPU processes).

Config is a nested dict; override with dotted keys:
    python lit_digits_convnet.py trainer.max_epochs=4 optim.lr=0.002
"""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import copy
import sys
import tempfile
from datetime import timedelta

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.strategies import DDPStrategy
from sklearn.datasets import load_digits
from sklearn.metrics import accuracy_score, balanced_accuracy_score
from sklearn.model_selection import train_test_split
from torch.utils.data import DataLoader, TensorDataset

BASE_CFG = {
    "data": {"val_fraction": 0.25, "batch_size": 64, "seed": 0},
    "model": {"channels": 16, "dropout": 0.1},
    "optim": {"lr": 3e-3, "weight_decay": 1e-4},
    "trainer": {"max_epochs": 3, "devices": 2, "timeout_s": 30},
    "output": {"root": os.path.join(tempfile.gettempdir(), "lit-digits")},
}


def compose(base, overrides):
    cfg = copy.deepcopy(base)
    for ov in overrides:
        key, val = ov.split("=", 1)
        group, name = key.split(".")
        cfg[group][name] = type(cfg[group][name])(val)
    return cfg


class DigitsData(L.LightningDataModule):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg

    def setup(self, stage=None):
        x, y = load_digits(return_X_y=True)
        x = torch.tensor(x / 16.0, dtype=torch.float32).view(-1, 1, 8, 8)
        x_tr, x_va, y_tr, y_va = train_test_split(
            x, torch.tensor(y), test_size=self.cfg["val_fraction"], random_state=self.cfg["seed"], stratify=y
        )
        self.train_set, self.val_set = TensorDataset(x_tr, y_tr), TensorDataset(x_va, y_va)

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.cfg["batch_size"], shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=128)


class DigitsNet(L.LightningModule):
    def __init__(self, model_cfg, optim_cfg):
        super().__init__()
        self.save_hyperparameters()
        c = model_cfg["channels"]
        self.features = nn.Sequential(
            nn.Conv2d(1, c, 3, padding=1), nn.ReLU(), nn.Conv2d(c, 2 * c, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(model_cfg["dropout"]), nn.Linear(2 * c * 16, 10))
        self.optim_cfg = optim_cfg
        self._preds, self._targets = [], []

    def forward(self, x):
        return self.head(self.features(x))

    def training_step(self, batch, _):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss, on_epoch=True, sync_dist=True)
        return loss

    def validation_step(self, batch, _):
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y), sync_dist=True)
        self._preds.append(logits.argmax(-1))
        self._targets.append(y)

    def on_validation_epoch_end(self):
        preds = self.all_gather(torch.cat(self._preds)).flatten().cpu().numpy()
        targets = self.all_gather(torch.cat(self._targets)).flatten().cpu().numpy()
        self._preds.clear()
        self._targets.clear()
        if self.trainer.is_global_zero:
            self.log("val_acc", accuracy_score(targets, preds), rank_zero_only=True)
            self.log("val_bal_acc", balanced_accuracy_score(targets, preds), rank_zero_only=True)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.optim_cfg["lr"], weight_decay=self.optim_cfg["weight_decay"])


def run(cfg):
    L.seed_everything(cfg["data"]["seed"])
    root = cfg["output"]["root"]
    checkpoint = ModelCheckpoint(
        dirpath=os.path.join(root, "checkpoints"),
        filename="digits-{epoch:02d}-{val_acc:.3f}",
        monitor="val_acc",
        mode="max",
        save_top_k=2,
    )
    trainer = L.Trainer(
        accelerator="cpu",
        devices=cfg["trainer"]["devices"],
        strategy=DDPStrategy(process_group_backend="gloo", timeout=timedelta(seconds=cfg["trainer"]["timeout_s"])),
        max_epochs=cfg["trainer"]["max_epochs"],
        logger=CSVLogger(root, name="logs"),
        callbacks=[checkpoint],
        enable_progress_bar=False,
        log_every_n_steps=5,
    )
    trainer.fit(DigitsNet(cfg["model"], cfg["optim"]), datamodule=DigitsData(cfg["data"]))
    if trainer.is_global_zero:
        print("best:", checkpoint.best_model_path, flush=True)


if __name__ == "__main__":
    run(compose(BASE_CFG, sys.argv[1:]))
