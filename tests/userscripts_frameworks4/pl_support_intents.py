"""Intent classifier for the support inbox, trained on the pre-sharded ticket export.

The export job writes one JSONL shard per training process
(train-0000R-of-0000W.jsonl), so each rank reads its own shard and Lightning's
DistributedSampler is switched off.  PyTorch Lightning, DDP on CPU (gloo).

    torchrun --nproc-per-node 2 pl_support_intents.py --epochs 4
"""
import argparse
import json
import random
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from lightning.pytorch import LightningDataModule, LightningModule, Trainer, seed_everything
from lightning.pytorch.callbacks import LearningRateMonitor, ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.strategies import DDPStrategy
from torch import nn
from torch.utils.data import DataLoader

from plfab_common import INTENT_PHRASES, WordVocab, arm_hang_watchdog, fresh_outdir, make_ticket, say

NAME = "pl_support_intents"
OUT = fresh_outdir(NAME)
arm_hang_watchdog(80)


def export_shards(out_dir, split, n_rows, n_shards, seed):
    """Stand-in for the warehouse export: rows ordered by customer, cut into equal shards."""
    rng = random.Random(seed)
    customers = [f"c{k:04d}" for k in range(60)]
    churned = customers[:4]
    rows = []
    for _ in range(n_rows):
        cust = rng.choice(customers)
        intent = "cancel" if cust in churned and rng.random() < 0.6 else rng.choice(
            [i for i in INTENT_PHRASES if i != "cancel"])
        rows.append({"customer": cust, "text": make_ticket(intent, rng), "intent": intent})
    rows.sort(key=lambda r: r["customer"])
    for k, part in enumerate(np.array_split(np.arange(len(rows)), n_shards)):
        with open(out_dir / f"{split}-{k:05d}-of-{n_shards:05d}.jsonl", "w") as f:
            for i in part:
                f.write(json.dumps(rows[i]) + "\n")


class ShardedTicketData(LightningDataModule):
    def __init__(self, data_dir, batch_size=32, max_len=20):
        super().__init__()
        self.data_dir, self.batch_size, self.max_len = data_dir, batch_size, max_len

    def prepare_data(self):
        self.data_dir.mkdir(parents=True, exist_ok=True)
        world = self.trainer.world_size
        export_shards(self.data_dir, "train", 2048, world, seed=17)
        export_shards(self.data_dir, "val", 512, world, seed=18)

    def _read_shard(self, split):
        rank, world = self.trainer.global_rank, self.trainer.world_size
        with open(self.data_dir / f"{split}-{rank:05d}-of-{world:05d}.jsonl") as f:
            return [json.loads(line) for line in f]

    def setup(self, stage=None):
        train, val = self._read_shard("train"), self._read_shard("val")
        self.labels = sorted({r["intent"] for r in train})
        self.label2id = {lab: i for i, lab in enumerate(self.labels)}
        self.vocab = WordVocab([w for ws in INTENT_PHRASES.values() for w in ws] +
                               ["hello team i have a question about my account today thanks regards please help "
                                "urgent asap again still since yesterday this morning order customer"])
        self.train_rows = [r for r in train if r["intent"] in self.label2id]
        self.val_rows = [r for r in val if r["intent"] in self.label2id]
        say(f"shard: {len(self.train_rows)} train / {len(self.val_rows)} val tickets, {len(self.labels)} intents")

    @property
    def num_classes(self):
        return len(self.labels)

    def collate(self, rows):
        ids = [torch.tensor(self.vocab.encode(r["text"], self.max_len)) for r in rows]
        x = nn.utils.rnn.pad_sequence(ids, batch_first=True, padding_value=0)
        return x, torch.tensor([self.label2id[r["intent"]] for r in rows])

    def train_dataloader(self):
        return DataLoader(self.train_rows, batch_size=self.batch_size, shuffle=True, collate_fn=self.collate)

    def val_dataloader(self):
        return DataLoader(self.val_rows, batch_size=64, collate_fn=self.collate)


class IntentCNN(LightningModule):
    def __init__(self, dim=32, lr=5e-3):
        super().__init__()
        self.save_hyperparameters()

    def configure_model(self):
        dm = self.trainer.datamodule
        self.emb = nn.Embedding(len(dm.vocab), self.hparams.dim, padding_idx=0)
        self.conv = nn.Conv1d(self.hparams.dim, 64, kernel_size=3, padding=1)
        self.classifier = nn.Linear(64, dm.num_classes)

    def forward(self, x):
        h = F.relu(self.conv(self.emb(x).transpose(1, 2)))
        return self.classifier(h.max(-1).values)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True, sync_dist=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y), sync_dist=True)
        self.log("val_acc", (logits.argmax(-1) == y).float().mean(), sync_dist=True)

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr)
        return {"optimizer": opt, "lr_scheduler": torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=5e-3)
    args = p.parse_args()
    t0 = time.time()
    seed_everything(1234, workers=True)
    dm = ShardedTicketData(OUT / "export", batch_size=args.batch_size)
    ckpt = ModelCheckpoint(dirpath=str(OUT / "ckpt"), monitor="val_acc", mode="max", save_last=True)
    trainer = Trainer(
        accelerator="cpu", devices=2, num_nodes=1,
        strategy=DDPStrategy(timeout=timedelta(seconds=30), process_group_backend="gloo"),
        use_distributed_sampler=False, max_epochs=args.epochs,
        callbacks=[ckpt, LearningRateMonitor()],
        logger=CSVLogger(save_dir=str(OUT / "logs"), name="intents"),
        enable_progress_bar=False, enable_model_summary=False, log_every_n_steps=8,
    )
    trainer.fit(IntentCNN(lr=args.lr), datamodule=dm)
    say(f"best val_acc {float(ckpt.best_model_score):.3f}; labels {dm.labels}")
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
    say(f"finished in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
