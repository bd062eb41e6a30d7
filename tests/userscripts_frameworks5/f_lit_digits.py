"""Digits classifier (scikit-learn's bundled 8x8 digits) with a LightningDataModule,
torchmetrics, ModelCheckpoint + EarlyStopping and a small custom callback."""
import os
from datetime import timedelta

import numpy as np
import torch
import torchmetrics
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
import lightning as L
from lightning.pytorch.callbacks import Callback, EarlyStopping, ModelCheckpoint
from lightning.pytorch.strategies import DDPStrategy
from lightning.pytorch.utilities import rank_zero_info, rank_zero_only


class DigitsData(L.LightningDataModule):
    def __init__(self, root="data", batch_size=64):
        super().__init__()
        self.root, self.batch_size = root, batch_size
        self.path = os.path.join(root, "digits.npz")

    def prepare_data(self):  # runs once per node
        if not os.path.exists(self.path):
            from sklearn.datasets import load_digits
            d = load_digits()
            os.makedirs(self.root, exist_ok=True)
            np.savez(self.path, x=(d.data / 16.0).astype(np.float32), y=d.target.astype(np.int64))

    def setup(self, stage=None):
        d = np.load(self.path)
        x, y = torch.from_numpy(d["x"]), torch.from_numpy(d["y"])
        perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
        tr, va = perm[:1400], perm[1400:]
        self.train_set, self.val_set = TensorDataset(x[tr], y[tr]), TensorDataset(x[va], y[va])

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=128)


class DigitsNet(L.LightningModule):
    def __init__(self, lr=2e-3):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))
        self.val_acc = torchmetrics.classification.MulticlassAccuracy(num_classes=10)
        self.val_f1 = torchmetrics.classification.MulticlassF1Score(num_classes=10, average="macro")
        self._val_losses = []

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self(x), y)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self._val_losses.append(nn.functional.cross_entropy(logits, y).detach())
        self.val_acc.update(logits, y)
        self.val_f1.update(logits, y)

    def on_validation_epoch_end(self):
        losses = self.all_gather(torch.stack(self._val_losses))  # (world, n_batches)
        self._val_losses.clear()
        self.log("val_loss", losses.mean(), rank_zero_only=False)
        self.log("val_acc", self.val_acc.compute(), prog_bar=True)
        self.log("val_f1", self.val_f1.compute())
        self.val_acc.reset()
        self.val_f1.reset()

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


class RunTag(Callback):
    """Picks one run tag on rank 0 and shares it; prints a short summary at the end."""
    def setup(self, trainer, pl_module, stage):
        tag = f"digits-{np.random.randint(1e6):06d}" if trainer.is_global_zero else None
        self.tag = trainer.strategy.broadcast(tag, src=0)

    @rank_zero_only
    def on_train_end(self, trainer, pl_module):
        ckpt = trainer.checkpoint_callback
        print(f"[{self.tag}] best={ckpt.best_model_path} score={float(ckpt.best_model_score):.4f}")


def main():
    L.seed_everything(0)
    trainer = L.Trainer(
        accelerator="cpu", devices=2, max_epochs=8,
        strategy=DDPStrategy(process_group_backend="gloo", timeout=timedelta(seconds=30)),
        callbacks=[ModelCheckpoint(dirpath="ckpts", monitor="val_acc", mode="max", save_top_k=2),
                   EarlyStopping(monitor="val_loss", patience=3), RunTag()],
        logger=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(DigitsNet(), datamodule=DigitsData())
    rank_zero_info(f"done after {trainer.current_epoch} epochs")


if __name__ == "__main__":
    main()
