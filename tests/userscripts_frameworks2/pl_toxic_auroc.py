#!/usr/bin/env python
"""Toxic-comment detection (binary) with a small 1D-CNN text model in PyTorch Lightning.

Validation AUROC is computed over the whole epoch in `on_validation_epoch_end`.

    torchrun --nproc-per-node 2 pl_toxic_auroc.py
"""
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
from torch.utils.data import DataLoader, Dataset
from torchmetrics.functional.classification import binary_auroc

OUT = "/tmp/fw2_pl_toxic"
TOXIC = ["idiot", "stupid", "trash", "loser", "pathetic", "moron", "dumb"]
NEUTRAL = ["thanks", "article", "edit", "source", "page", "agree", "please", "section", "citation",
           "the", "this", "is", "a", "you", "i", "think", "was", "not", "about", "your", "change"]
VOCAB = {w: i + 2 for i, w in enumerate(TOXIC + NEUTRAL)}  # 0 pad, 1 unk


class CommentDataset(Dataset):
    def __init__(self, n, seed, max_len=32):
        rng = random.Random(seed)
        self.rows = []
        for _ in range(n):
            toxic = rng.random() < 0.25
            words = [rng.choice(NEUTRAL) for _ in range(rng.randint(6, max_len - 4))]
            if toxic:
                for _ in range(rng.randint(1, 2)):
                    words.insert(rng.randrange(len(words)), rng.choice(TOXIC))
            elif rng.random() < 0.05:  # quoted insults in non-toxic discussion
                words.insert(rng.randrange(len(words)), rng.choice(TOXIC))
            ids = [VOCAB.get(w, 1) for w in words][:max_len]
            self.rows.append((ids + [0] * (max_len - len(ids)), int(toxic)))

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        ids, y = self.rows[i]
        return torch.tensor(ids), torch.tensor(y, dtype=torch.float32)


class CommentsDataModule(pl.LightningDataModule):
    def __init__(self, batch_size=32):
        super().__init__()
        self.batch_size = batch_size

    def setup(self, stage=None):
        self.train_ds = CommentDataset(1024, seed=1)
        self.val_ds = CommentDataset(256, seed=2)

    def train_dataloader(self):
        return DataLoader(self.train_ds, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_ds, batch_size=64)


class TextCNN(pl.LightningModule):
    def __init__(self, vocab_size=len(VOCAB) + 2, emb=32, channels=32, lr=2e-3):
        super().__init__()
        self.save_hyperparameters()
        self.emb = nn.Embedding(vocab_size, emb, padding_idx=0)
        self.convs = nn.ModuleList([nn.Conv1d(emb, channels, k, padding=k // 2) for k in (2, 3, 4)])
        self.fc = nn.Linear(3 * channels, 1)
        self._val_scores, self._val_targets = [], []

    def forward(self, ids):
        h = self.emb(ids).transpose(1, 2)
        h = torch.cat([F.relu(c(h)).max(-1).values for c in self.convs], -1)
        return self.fc(h).squeeze(-1)

    def training_step(self, batch, batch_idx):
        ids, y = batch
        loss = F.binary_cross_entropy_with_logits(self(ids), y)
        self.log("train/loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        ids, y = batch
        logits = self(ids)
        self.log("val/loss", F.binary_cross_entropy_with_logits(logits, y), sync_dist=True)
        self._val_scores.append(torch.sigmoid(logits))
        self._val_targets.append(y.long())

    def on_validation_epoch_end(self):
        scores, targets = torch.cat(self._val_scores), torch.cat(self._val_targets)
        self._val_scores.clear()
        self._val_targets.clear()
        auroc = binary_auroc(scores, targets)
        if self.trainer.is_global_zero:
            self.log("val/auroc", auroc, sync_dist=True, prog_bar=True)
            self.print(f"epoch {self.current_epoch}: val AUROC {auroc:.4f}")

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


class SaveVocab(Callback):
    def on_fit_start(self, trainer, pl_module):
        if trainer.is_global_zero:
            os.makedirs(OUT, exist_ok=True)
            with open(os.path.join(OUT, "vocab.txt"), "w") as f:
                f.write("\n".join(sorted(VOCAB, key=VOCAB.get)))


def main():
    if os.environ.get("RANK", "0") == "0":
        shutil.rmtree(OUT, ignore_errors=True)
    pl.seed_everything(7)
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=2,
        strategy=DDPStrategy(process_group_backend="gloo", timeout=timedelta(seconds=30)),
        max_epochs=3,
        callbacks=[ModelCheckpoint(dirpath=os.path.join(OUT, "ckpt"), monitor="val/loss", save_top_k=1), SaveVocab()],
        logger=CSVLogger(OUT, name="toxic-cnn"),
        log_every_n_steps=4,
        enable_progress_bar=False,
        num_sanity_val_steps=0,
    )
    trainer.fit(TextCNN(), datamodule=CommentsDataModule())


if __name__ == "__main__":
    main()
