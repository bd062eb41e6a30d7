"""Intent classifier: Lightning-style module + datamodule, driven by a hand-written DDP fit loop."""
import argparse
import json
import os
import re
from collections import Counter
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler


def tokenize(text):
    return re.findall(r"[a-z']+", text.lower())


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


class IntentDataModule:
    def __init__(self, data_dir, batch_size=32, seed=0):
        self.data_dir, self.batch_size, self.seed = data_dir, batch_size, seed
        self.itos, self.label_names = None, None

    def setup(self):
        self.train_rows = read_jsonl(os.path.join(self.data_dir, "train.jsonl"))
        self.val_rows = read_jsonl(os.path.join(self.data_dir, "val.jsonl"))
        self.train_sampler = DistributedSampler(self.train_rows, shuffle=True, seed=self.seed)
        self.val_sampler = DistributedSampler(self.val_rows, shuffle=False)
        # one pass over the training loader to build the vocabulary and the label set
        words, intents = Counter(), set()
        for batch in DataLoader(self.train_rows, batch_size=256, sampler=self.train_sampler, collate_fn=list):
            for r in batch:
                words.update(tokenize(r["text"]))
                intents.add(r["intent"])
        self.itos = ["<pad>", "<unk>"] + sorted(words)
        self.stoi = {w: i for i, w in enumerate(self.itos)}
        self.label_names = sorted(intents)
        self.label_to_id = {l: i for i, l in enumerate(self.label_names)}

    def collate(self, rows):
        ids = [torch.tensor([self.stoi.get(w, 1) for w in tokenize(r["text"])] or [1]) for r in rows]
        offsets = torch.tensor([0] + [len(t) for t in ids[:-1]]).cumsum(0)
        labels = torch.tensor([self.label_to_id.get(r["intent"], -100) for r in rows])
        return torch.cat(ids), offsets, labels

    def train_dataloader(self):
        return DataLoader(self.train_rows, batch_size=self.batch_size, sampler=self.train_sampler, collate_fn=self.collate)

    def val_dataloader(self):
        return DataLoader(self.val_rows, batch_size=64, sampler=self.val_sampler, collate_fn=self.collate)


class IntentClassifier(nn.Module):
    """LightningModule-like: training_step / validation_step / configure_optimizers."""

    def __init__(self, vocab_size, num_labels, dim=64, lr=5e-3):
        super().__init__()
        self.lr = lr
        self.emb = nn.EmbeddingBag(vocab_size, dim, mode="mean", padding_idx=0)
        self.head = nn.Sequential(nn.Dropout(0.1), nn.Linear(dim, num_labels))

    def forward(self, ids, offsets):
        return self.head(self.emb(ids, offsets))

    def training_step(self, model, batch):
        ids, offsets, labels = batch
        return F.cross_entropy(model(ids, offsets), labels, ignore_index=-100)

    def validation_step(self, model, batch):
        ids, offsets, labels = batch
        pred = model(ids, offsets).argmax(-1)
        return torch.tensor([(pred == labels).sum().item(), labels.numel()], dtype=torch.float64)

    def configure_optimizers(self, total_steps):
        opt = torch.optim.Adam(self.parameters(), lr=self.lr)
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=self.lr, total_steps=total_steps)
        return opt, sched


def fit(module, dm, epochs, ckpt_path, rank):
    model = DDP(module)
    opt, sched = module.configure_optimizers(total_steps=epochs * len(dm.train_dataloader()))
    start_epoch = 0
    if os.path.exists(ckpt_path):
        ck = torch.load(ckpt_path, map_location="cpu")
        module.load_state_dict(ck["state_dict"])
        opt.load_state_dict(ck["optimizer"])
        sched.load_state_dict(ck["lr_scheduler"])
        start_epoch = ck["epoch"] + 1
        if rank == 0:
            print(f"resumed from {ckpt_path} at epoch {start_epoch}", flush=True)
    for epoch in range(start_epoch, epochs):
        dm.train_sampler.set_epoch(epoch)
        model.train()
        total = torch.zeros(2, dtype=torch.float64)
        for batch in dm.train_dataloader():
            loss = module.training_step(model, batch)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += torch.tensor([loss.item(), 1.0], dtype=torch.float64)
        model.eval()
        with torch.no_grad():
            stats = sum((module.validation_step(model, b) for b in dm.val_dataloader()), torch.zeros(2, dtype=torch.float64))
        dist.all_reduce(stats)
        dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch} train_loss {total[0] / total[1]:.4f} val_acc {stats[0] / stats[1]:.4f}", flush=True)
            torch.save({"state_dict": module.state_dict(), "optimizer": opt.state_dict(),
                        "lr_scheduler": sched.state_dict(), "epoch": epoch,
                        "vocab": dm.itos, "labels": dm.label_names}, ckpt_path)
        dist.barrier()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data-dir", default="data")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--ckpt", default="intent_last.ckpt")
    p.add_argument("--pg-timeout", type=int, default=10)
    args = p.parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    try:
        rank = dist.get_rank()
        torch.manual_seed(0)
        dm = IntentDataModule(args.data_dir)
        dm.setup()
        if rank == 0:
            print(f"vocab {len(dm.itos)} words, {len(dm.label_names)} intents: {dm.label_names}", flush=True)
        module = IntentClassifier(len(dm.itos), len(dm.label_names))
        fit(module, dm, args.epochs, args.ckpt, rank)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
