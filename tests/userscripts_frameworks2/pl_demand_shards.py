#!/usr/bin/env python
"""Store-item demand forecasting (regression) with PyTorch Lightning, streaming the
training table from the JSONL part files our Spark job exports (part-0000N.jsonl).

Each process streams its own subset of part files (IterableDataset), so nothing has
to be materialised in memory; validation uses a small map-style hold-out set.

    torchrun --nproc-per-node 2 pl_demand_shards.py
"""
import glob
import json
import math
import os
import random
import shutil
from datetime import timedelta

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.strategies import DDPStrategy
from torch import nn
from torch.utils.data import DataLoader, IterableDataset, TensorDataset

DATA_DIR = "/tmp/fw2_pl_demand/export"
OUT_DIR = "/tmp/fw2_pl_demand/run"
N_STORES, N_ITEMS = 10, 50


def synth_row(rng):
    store, item, dow, promo = rng.randrange(N_STORES), rng.randrange(N_ITEMS), rng.randrange(7), rng.random() < 0.2
    base = 20 + 3 * (store % 4) + 0.5 * (item % 10) + (6 if dow >= 5 else 0) + (10 if promo else 0)
    return {"store": store, "item": item, "dow": dow, "promo": int(promo), "temp": round(rng.gauss(18, 6), 1),
            "sales": max(0.0, round(base + rng.gauss(0, 3), 2))}


class PartFileStream(IterableDataset):
    def __init__(self, files, shuffle_buffer=256, seed=0):
        self.files, self.shuffle_buffer, self.seed = files, shuffle_buffer, seed

    def _rows(self):
        for path in self.files:
            with open(path) as f:
                for line in f:
                    yield json.loads(line)

    def __iter__(self):
        rng = random.Random(self.seed)
        buf = []
        for row in self._rows():
            buf.append(row)
            if len(buf) >= self.shuffle_buffer:
                yield to_example(buf.pop(rng.randrange(len(buf))))
        rng.shuffle(buf)
        for row in buf:
            yield to_example(row)


def to_example(r):
    x = torch.tensor([r["store"], r["item"], r["dow"], r["promo"], r["temp"]], dtype=torch.float32)
    return x, torch.tensor(r["sales"], dtype=torch.float32)


class DemandDataModule(pl.LightningDataModule):
    def __init__(self, data_dir=DATA_DIR, batch_size=32, part_sizes=(262, 251, 270, 97)):
        super().__init__()
        self.data_dir, self.batch_size, self.part_sizes = data_dir, batch_size, part_sizes

    def prepare_data(self):
        # stand-in for `spark.read...repartition(4).write.json(...)`
        shutil.rmtree(self.data_dir, ignore_errors=True)
        os.makedirs(self.data_dir)
        rng = random.Random(2023)
        for i, n in enumerate(self.part_sizes):
            with open(os.path.join(self.data_dir, f"part-{i:05d}.jsonl"), "w") as f:
                for _ in range(n):
                    f.write(json.dumps(synth_row(rng)) + "\n")
        rows = [synth_row(rng) for _ in range(256)]
        with open(os.path.join(self.data_dir, "holdout.json"), "w") as f:
            json.dump(rows, f)

    def setup(self, stage=None):
        parts = sorted(glob.glob(os.path.join(self.data_dir, "part-*.jsonl")))
        rank, world = self.trainer.global_rank, self.trainer.world_size
        self.my_parts = parts[rank::world]
        self.train_ds = PartFileStream(self.my_parts, seed=rank)
        with open(os.path.join(self.data_dir, "holdout.json")) as f:
            hold = [to_example(r) for r in json.load(f)]
        self.val_ds = TensorDataset(torch.stack([x for x, _ in hold]), torch.stack([y for _, y in hold]))

    def train_dataloader(self):
        return DataLoader(self.train_ds, batch_size=self.batch_size)

    def val_dataloader(self):
        return DataLoader(self.val_ds, batch_size=64)


class DemandModel(pl.LightningModule):
    def __init__(self, emb_dim=8, hidden=64, lr=3e-3):
        super().__init__()
        self.save_hyperparameters()
        self.store_emb = nn.Embedding(N_STORES, emb_dim)
        self.item_emb = nn.Embedding(N_ITEMS, emb_dim)
        self.dow_emb = nn.Embedding(7, 4)
        self.mlp = nn.Sequential(nn.Linear(2 * emb_dim + 4 + 2, hidden), nn.ReLU(),
                                 nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, x):
        s, i, d = x[:, 0].long(), x[:, 1].long(), x[:, 2].long()
        feats = torch.cat([self.store_emb(s), self.item_emb(i), self.dow_emb(d), x[:, 3:4], (x[:, 4:5] - 18) / 6], -1)
        return self.mlp(feats).squeeze(-1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.mse_loss(self(x), y)
        self.log("train_mse", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        pred = self(x)
        self.log("val_rmse", torch.sqrt(F.mse_loss(pred, y)), sync_dist=True)
        self.log("val_mae", F.l1_loss(pred, y), sync_dist=True)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


class ThroughputLogger(Callback):
    def on_train_epoch_start(self, trainer, pl_module):
        self.n_batches = 0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.n_batches += 1

    def on_train_epoch_end(self, trainer, pl_module):
        if trainer.is_global_zero:
            print(f"epoch {trainer.current_epoch}: {self.n_batches} batches, "
                  f"train_mse={trainer.callback_metrics.get('train_mse', math.nan):.3f}", flush=True)


def main():
    if os.environ.get("RANK", "0") == "0":
        shutil.rmtree(OUT_DIR, ignore_errors=True)
    pl.seed_everything(42)
    dm = DemandDataModule()
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=2,
        strategy=DDPStrategy(process_group_backend="gloo", timeout=timedelta(seconds=30)),
        max_epochs=3,
        logger=CSVLogger(OUT_DIR, name="demand"),
        callbacks=[ModelCheckpoint(dirpath=os.path.join(OUT_DIR, "ckpt"), monitor="val_rmse"), ThroughputLogger()],
        enable_progress_bar=False,
        num_sanity_val_steps=0,
        log_every_n_steps=5,
    )
    trainer.fit(DemandModel(), datamodule=dm)
    if trainer.is_global_zero:
        print("val:", {k: round(float(v), 4) for k, v in trainer.callback_metrics.items()})


if __name__ == "__main__":
    main()
