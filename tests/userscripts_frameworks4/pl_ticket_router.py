"""Route customer-support tickets to a queue with a bag-of-embeddings classifier.

PyTorch Lightning, DDP on CPU (gloo).  Launch:

    torchrun --nproc-per-node 2 pl_ticket_router.py --max-epochs 6
"""
import argparse
import json
import random
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn.functional as F
from lightning.pytorch import Callback, LightningDataModule, LightningModule, Trainer, seed_everything
from lightning.pytorch.callbacks import EarlyStopping, LearningRateMonitor, ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.strategies import DDPStrategy
from torch import nn
from torch.utils.data import DataLoader, Dataset
from torchmetrics.classification import MulticlassAccuracy, MulticlassF1Score

from plfab_common import INTENT_PHRASES, WordVocab, arm_hang_watchdog, fresh_outdir, make_ticket, say

NAME = "pl_ticket_router"
OUT = fresh_outdir(NAME)
arm_hang_watchdog(80)
QUEUES = sorted(INTENT_PHRASES)


class TicketDataset(Dataset):
    def __init__(self, rows, vocab, max_len=24):
        self.items = [(torch.tensor(vocab.encode(r["text"], max_len)), QUEUES.index(r["queue"])) for r in rows]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def collate(batch):
    ids = [b[0] for b in batch]
    offsets = torch.tensor([0] + [len(t) for t in ids[:-1]]).cumsum(0)
    return torch.cat(ids), offsets, torch.tensor([b[1] for b in batch])


class TicketDataModule(LightningDataModule):
    def __init__(self, data_dir, batch_size=32, n_train=1536, n_val=384, n_test=384):
        super().__init__()
        self.data_dir, self.batch_size = data_dir, batch_size
        self.sizes = {"train": n_train, "val": n_val, "test": n_test}

    def prepare_data(self):
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for split, n in self.sizes.items():
            rng = random.Random({"train": 11, "val": 12, "test": 13}[split])
            with open(self.data_dir / f"{split}.jsonl", "w") as f:
                for _ in range(n):
                    q = rng.choice(QUEUES)
                    text = make_ticket(q, rng)
                    if rng.random() < 0.08:  # agents re-route some tickets by hand
                        q = rng.choice(QUEUES)
                    f.write(json.dumps({"text": text, "queue": q}) + "\n")

    def _read(self, split):
        with open(self.data_dir / f"{split}.jsonl") as f:
            return [json.loads(line) for line in f]

    def setup(self, stage=None):
        train_rows = self._read("train")
        self.vocab = WordVocab([r["text"] for r in train_rows], min_freq=2)
        self.train_ds = TicketDataset(train_rows, self.vocab)
        self.val_ds = TicketDataset(self._read("val"), self.vocab)
        self.test_ds = TicketDataset(self._read("test"), self.vocab)

    def train_dataloader(self):
        return DataLoader(self.train_ds, batch_size=self.batch_size, shuffle=True, collate_fn=collate)

    def val_dataloader(self):
        return DataLoader(self.val_ds, batch_size=64, collate_fn=collate)

    def test_dataloader(self):
        return DataLoader(self.test_ds, batch_size=64, collate_fn=collate)


class TicketRouter(LightningModule):
    def __init__(self, n_classes, dim=48, lr=0.02):
        super().__init__()
        self.save_hyperparameters()
        self.emb = self.head = None
        self.val_acc = MulticlassAccuracy(num_classes=n_classes)
        self.val_f1 = MulticlassF1Score(num_classes=n_classes, average="macro")
        self.test_f1 = MulticlassF1Score(num_classes=n_classes, average="macro")

    def configure_model(self):
        if self.emb is not None:
            return
        dim, n_classes = self.hparams.dim, self.hparams.n_classes
        self.emb = nn.EmbeddingBag(len(self.trainer.datamodule.vocab), dim, mode="mean")
        self.head = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Dropout(0.1), nn.Linear(dim, n_classes))

    def forward(self, ids, offsets):
        return self.head(self.emb(ids, offsets))

    def training_step(self, batch, batch_idx):
        ids, offsets, y = batch
        loss = F.cross_entropy(self(ids, offsets), y)
        self.log("train_loss", loss, on_step=True, on_epoch=True, sync_dist=True, batch_size=len(y))
        return loss

    def validation_step(self, batch, batch_idx):
        ids, offsets, y = batch
        logits = self(ids, offsets)
        self.log("val_loss", F.cross_entropy(logits, y), sync_dist=True, batch_size=len(y))
        self.val_acc.update(logits, y)
        self.val_f1.update(logits, y)

    def on_validation_epoch_end(self):
        self.log("val_acc", self.val_acc.compute())
        self.log("val_f1", self.val_f1.compute())
        self.val_acc.reset()
        self.val_f1.reset()

    def test_step(self, batch, batch_idx):
        ids, offsets, y = batch
        self.test_f1.update(self(ids, offsets), y)
        self.log("test_f1", self.test_f1, on_epoch=True, batch_size=len(y))

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr, weight_decay=1e-4)
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=self.hparams.lr,
                                                    total_steps=self.trainer.estimated_stepping_batches)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


class MetricsHistory(Callback):
    """Keeps a JSON history of validation metrics (written by global rank 0)."""

    def __init__(self, path):
        self.path, self.rows = path, []

    def on_validation_epoch_end(self, trainer, pl_module):
        if trainer.sanity_checking:
            return
        row = {k: round(float(v), 4) for k, v in trainer.callback_metrics.items() if k.startswith("val")}
        row["epoch"] = trainer.current_epoch
        self.rows.append(row)

    def on_fit_end(self, trainer, pl_module):
        if trainer.is_global_zero:
            self.path.write_text(json.dumps(self.rows, indent=1))


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--max-epochs", type=int, default=6)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--seed", type=int, default=3)
    return p.parse_args()


def main():
    args = parse_args()
    t0 = time.time()
    seed_everything(args.seed, workers=True)
    dm = TicketDataModule(OUT / "data", batch_size=args.batch_size)
    ckpt = ModelCheckpoint(dirpath=str(OUT / "ckpt"), filename="router-{epoch:02d}-{val_f1:.3f}",
                           monitor="val_f1", mode="max", save_top_k=2, save_last=True)
    trainer = Trainer(
        accelerator="cpu", devices=2, num_nodes=1,
        strategy=DDPStrategy(timeout=timedelta(seconds=30), process_group_backend="gloo"),
        max_epochs=args.max_epochs, accumulate_grad_batches=2, gradient_clip_val=1.0,
        callbacks=[ckpt, EarlyStopping(monitor="val_loss", patience=2, min_delta=1e-3),
                   LearningRateMonitor(logging_interval="step"), MetricsHistory(OUT / "history.json")],
        logger=CSVLogger(save_dir=str(OUT / "logs"), name="router"),
        enable_progress_bar=False, enable_model_summary=False, log_every_n_steps=4,
    )
    model = TicketRouter(len(QUEUES), lr=args.lr)
    trainer.fit(model, datamodule=dm)
    say(f"best checkpoint {ckpt.best_model_path} (val_f1={float(ckpt.best_model_score):.3f})")

    results = trainer.test(model, datamodule=dm, ckpt_path="best", verbose=False)
    say(f"test macro-F1 {results[0]['test_f1']:.3f}")
    trainer.strategy.barrier("done")
    if dist.is_initialized():
        dist.destroy_process_group()
    say(f"finished in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
