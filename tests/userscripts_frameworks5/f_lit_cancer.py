"""Breast-cancer classifier (scikit-learn bundled data) in Lightning: DataModule,
torchmetrics AUROC, top-k ModelCheckpoint on the validation AUROC."""
import os
from datetime import timedelta

import numpy as np
import torch
import torchmetrics
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
import lightning as L
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.strategies import DDPStrategy


class CancerData(L.LightningDataModule):
    def __init__(self, batch_size=32):
        super().__init__()
        self.batch_size = batch_size

    def prepare_data(self):
        if not os.path.exists("data/cancer.npz"):
            from sklearn.datasets import load_breast_cancer
            d = load_breast_cancer()
            os.makedirs("data", exist_ok=True)
            np.savez("data/cancer.npz", x=d.data.astype(np.float32), y=d.target.astype(np.int64))

    def setup(self, stage=None):
        d = np.load("data/cancer.npz")
        x = (d["x"] - d["x"].mean(0)) / d["x"].std(0)
        x, y = torch.from_numpy(x.astype(np.float32)), torch.from_numpy(d["y"])
        perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(1))
        self.train_set = TensorDataset(x[perm[:450]], y[perm[:450]])
        self.val_set = TensorDataset(x[perm[450:]], y[perm[450:]])

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=64)


class CancerNet(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(30, 32), nn.ReLU(), nn.Linear(32, 1))
        self.val_auroc = torchmetrics.classification.BinaryAUROC()

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.binary_cross_entropy_with_logits(self.net(x).squeeze(-1), y.float())
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.val_auroc.update(self.net(x).squeeze(-1).sigmoid(), y)

    def on_validation_epoch_end(self):
        auroc = self.val_auroc.compute()  # torchmetrics syncs the state across ranks
        self.val_auroc.reset()
        if self.trainer.is_global_zero:
            self.log("val_auroc", auroc, rank_zero_only=True)
            self.print(f"epoch {self.current_epoch}: val_auroc={auroc:.4f}")

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=3e-3)


def main():
    L.seed_everything(0)
    trainer = L.Trainer(
        accelerator="cpu", devices=2, max_epochs=6,
        strategy=DDPStrategy(process_group_backend="gloo", timeout=timedelta(seconds=30)),
        callbacks=[ModelCheckpoint(dirpath="ckpts", filename="{epoch}-{val_auroc:.4f}",
                                   monitor="val_auroc", mode="max", save_top_k=2)],
        logger=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(CancerNet(), datamodule=CancerData())
    if trainer.is_global_zero:
        print("best:", trainer.checkpoint_callback.best_model_path)


if __name__ == "__main__":
    main()
