"""Tabular regression (synthetic house prices) with an MLP, Accelerate and early stopping.

Launch:
    python -m torch.distributed.run --nproc-per-node 2 accelerate_house_price_mlp.py
"""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import tempfile
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
import torch
import torch.nn as nn
from accelerate import Accelerator
from accelerate.utils import InitProcessGroupKwargs, set_seed
from sklearn.datasets import make_regression
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from torch.utils.data import DataLoader, TensorDataset


@dataclass
class TrainConfig:
    n_samples: int = 1200
    n_features: int = 12
    noise: float = 25.0
    hidden: int = 64
    batch_size: int = 32
    lr: float = 3e-3
    max_epochs: int = 40
    patience: int = 2
    min_delta: float = 1e-3
    timeout_s: int = 30
    seed: int = 21
    out_path: str = os.path.join(tempfile.gettempdir(), "house-price-mlp.pt")


class EarlyStopper:
    def __init__(self, patience, min_delta):
        self.patience = patience
        self.min_delta = min_delta
        self.best = float("inf")
        self.bad_epochs = 0

    def step(self, value):
        if value < self.best - self.min_delta:
            self.best = value
            self.bad_epochs = 0
        else:
            self.bad_epochs += 1
        return self.bad_epochs > self.patience


def make_data(cfg):
    x, y = make_regression(
        n_samples=cfg.n_samples, n_features=cfg.n_features, n_informative=8, noise=cfg.noise, random_state=cfg.seed
    )
    x_tr, x_va, y_tr, y_va = train_test_split(x, y, test_size=0.25, random_state=cfg.seed)
    xs, ys = StandardScaler().fit(x_tr), StandardScaler().fit(y_tr[:, None])
    to_ds = lambda a, b: TensorDataset(
        torch.tensor(xs.transform(a), dtype=torch.float32), torch.tensor(ys.transform(b[:, None]), dtype=torch.float32)
    )
    return to_ds(x_tr, y_tr), to_ds(x_va, y_va)


def main(cfg: TrainConfig):
    accelerator = Accelerator(cpu=True, kwargs_handlers=[InitProcessGroupKwargs(timeout=timedelta(seconds=cfg.timeout_s))])
    set_seed(cfg.seed)
    train_ds, valid_ds = make_data(cfg)
    model = nn.Sequential(
        nn.Linear(cfg.n_features, cfg.hidden), nn.ReLU(), nn.Linear(cfg.hidden, cfg.hidden), nn.ReLU(), nn.Linear(cfg.hidden, 1)
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    train_dl = DataLoader(train_ds, batch_size=cfg.batch_size, shuffle=True)
    valid_dl = DataLoader(valid_ds, batch_size=64)
    model, optimizer, train_dl, valid_dl = accelerator.prepare(model, optimizer, train_dl, valid_dl)
    loss_fn = nn.MSELoss()
    stopper = EarlyStopper(cfg.patience, cfg.min_delta)

    for epoch in range(cfg.max_epochs):
        model.train()
        for xb, yb in train_dl:
            loss = loss_fn(model(xb), yb)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()

        model.eval()
        with torch.no_grad():
            val_loss = np.mean([loss_fn(model(xb), yb).item() for xb, yb in valid_dl])
        accelerator.print(f"epoch {epoch}: train_loss={loss.item():.4f} val_loss={val_loss:.4f}")
        if stopper.step(val_loss):
            print(f"[process {accelerator.process_index}] early stopping at epoch {epoch} (best val_loss={stopper.best:.4f})", flush=True)
            break

    if accelerator.is_main_process:
        torch.save(accelerator.unwrap_model(model).state_dict(), cfg.out_path)
        print(f"saved {cfg.out_path}", flush=True)


if __name__ == "__main__":
    main(TrainConfig())
