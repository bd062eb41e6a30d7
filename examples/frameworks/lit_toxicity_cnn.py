"""Toxic-comment detection with a 1D-CNN in Lightning (DDP on 2 CPU processes).

Lightning starts the second process itself:
    python lit_toxicity_cnn.py --max-epochs 3
"""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
import random
import tempfile
from datetime import timedelta

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchmetrics
from lightning.pytorch.callbacks import EarlyStopping, LearningRateMonitor, ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.strategies import DDPStrategy
from torch.utils.data import DataLoader, TensorDataset

TOXIC = ["idiot", "stupid", "trash", "loser", "shut", "dumb", "pathetic"]
CLEAN = ["thanks", "great", "point", "agree", "interesting", "helpful", "source"]
FILLER = ["you", "are", "this", "is", "a", "the", "comment", "really", "so", "your", "post"]


class CommentsDataModule(L.LightningDataModule):
    def __init__(self, n_train=512, n_val=128, seq_len=12, batch_size=32, seed=0):
        super().__init__()
        self.save_hyperparameters()
        self.vocab = {w: i + 1 for i, w in enumerate(TOXIC + CLEAN + FILLER)}

    def _make(self, n, seed):
        rng = random.Random(seed)
        xs, ys = [], []
        for _ in range(n):
            y = int(rng.random() < 0.4)
            words = rng.sample(TOXIC if y else CLEAN, rng.randint(1, 2))
            words += [rng.choice(FILLER) for _ in range(self.hparams.seq_len - len(words))]
            rng.shuffle(words)
            xs.append([self.vocab[w] for w in words])
            ys.append(y)
        return TensorDataset(torch.tensor(xs), torch.tensor(ys))

    def setup(self, stage=None):
        self.train_ds = self._make(self.hparams.n_train, self.hparams.seed)
        self.val_ds = self._make(self.hparams.n_val, self.hparams.seed + 1)

    def train_dataloader(self):
        return DataLoader(self.train_ds, batch_size=self.hparams.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_ds, batch_size=64)


class ToxicityCNN(L.LightningModule):
    def __init__(self, vocab_size, emb=32, channels=32, lr=3e-3):
        super().__init__()
        self.save_hyperparameters()
        self.emb = nn.Embedding(vocab_size, emb, padding_idx=0)
        self.conv = nn.Conv1d(emb, channels, kernel_size=3, padding=1)
        self.out = nn.Linear(channels, 2)
        self.val_acc = torchmetrics.classification.BinaryAccuracy()
        self.val_f1 = torchmetrics.classification.BinaryF1Score()

    def forward(self, x):
        h = F.relu(self.conv(self.emb(x).transpose(1, 2)))
        return self.out(h.max(dim=-1).values)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss, on_step=True, on_epoch=True, sync_dist=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        preds = logits.argmax(-1)
        self.val_acc(preds, y)
        self.val_f1(preds, y)
        self.log("val_loss", F.cross_entropy(logits, y), sync_dist=True)
        self.log("val_acc", self.val_acc, on_epoch=True)
        self.log("val_f1", self.val_f1, on_epoch=True, prog_bar=True)

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)
        return {"optimizer": opt, "lr_scheduler": sched}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-epochs", type=int, default=3)
    ap.add_argument("--root", default=os.path.join(tempfile.gettempdir(), "lit-toxicity"))
    ap.add_argument("--timeout", type=int, default=60)
    args = ap.parse_args()

    L.seed_everything(0, workers=True)
    dm = CommentsDataModule()
    model = ToxicityCNN(vocab_size=len(dm.vocab) + 1)
    trainer = L.Trainer(
        accelerator="cpu",
        devices=2,
        strategy=DDPStrategy(process_group_backend="gloo", timeout=timedelta(seconds=args.timeout)),
        max_epochs=args.max_epochs,
        default_root_dir=args.root,
        logger=CSVLogger(args.root, name="csv"),
        callbacks=[
            ModelCheckpoint(dirpath=os.path.join(args.root, "ckpt"), monitor="val_f1", mode="max", save_top_k=1),
            EarlyStopping(monitor="val_loss", patience=2),
            LearningRateMonitor(logging_interval="epoch"),
        ],
        enable_progress_bar=False,
        log_every_n_steps=2,
    )
    trainer.fit(model, datamodule=dm)
    if trainer.is_global_zero:
        print(f"best checkpoint: {trainer.checkpoint_callback.best_model_path} "
              f"(val_f1={trainer.checkpoint_callback.best_model_score:.3f})", flush=True)


if __name__ == "__main__":
    main()
