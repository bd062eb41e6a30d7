#!/usr/bin/env python
"""Intent classifier fine-tuning, HF-Trainer style arguments.

torchrun --nproc-per-node 2 finetune_labels.py --output_dir runs/intent
"""
import argparse
import contextlib
import csv
import json
import os
from dataclasses import dataclass, field, fields
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass
class TrainingArguments:
    output_dir: str = field(default=os.path.join(HERE, "runs", "intent"))
    train_file: str = field(default=os.path.join(HERE, "data", "train.csv"))
    cache_dir: str = field(default=os.path.join(HERE, "cache"))
    per_device_train_batch_size: int = 16
    learning_rate: float = 2e-3
    num_train_epochs: int = 3
    warmup_ratio: float = 0.1
    max_seq_length: int = 24
    logging_steps: int = 5
    seed: int = 42
    overwrite_cache: bool = False
    pg_timeout: int = 10


def parse_args() -> TrainingArguments:
    parser = argparse.ArgumentParser()
    for f in fields(TrainingArguments):
        flags = sorted({"--" + f.name, "--" + f.name.replace("_", "-")})
        if f.type is bool:
            parser.add_argument(*flags, dest=f.name, action="store_true")
        else:
            parser.add_argument(*flags, dest=f.name, type=f.type, default=f.default)
    return TrainingArguments(**vars(parser.parse_args()))


@contextlib.contextmanager
def main_process_first(is_main):
    """Main process does the work first, the others reuse its cache."""
    if not is_main:
        dist.barrier()
    yield
    if is_main:
        dist.barrier()


def read_csv(path):
    with open(path, newline="") as f:
        return [(r["text"], int(r["label"])) for r in csv.DictReader(f)]


def build_vocab(rows, min_freq=1):
    counts = {}
    for text, _ in rows:
        for w in text.lower().split():
            counts[w] = counts.get(w, 0) + 1
    vocab = {"[PAD]": 0, "[UNK]": 1}
    for w in sorted(counts):
        if counts[w] >= min_freq:
            vocab[w] = len(vocab)
    return vocab


def preprocess(args, rows, is_main):
    os.makedirs(args.cache_dir, exist_ok=True)
    vocab_path = os.path.join(args.cache_dir, "vocab.json")
    labels_path = os.path.join(args.cache_dir, "label2id.json")
    with main_process_first(is_main):
        if is_main and (args.overwrite_cache or not os.path.exists(labels_path)):
            vocab = build_vocab(rows)
            label2id = {lab: i for i, lab in enumerate(sorted({lab for _, lab in rows}))}
            with open(vocab_path, "w") as f:
                json.dump(vocab, f)
            with open(labels_path, "w") as f:
                json.dump(label2id, f, indent=1)
            print(f"built vocab ({len(vocab)}) and label map {label2id}", flush=True)
        else:
            with open(vocab_path) as f:
                vocab = json.load(f)
            with open(labels_path) as f:
                label2id = json.load(f)
    return vocab, label2id


class IntentDataset(Dataset):
    def __init__(self, rows, vocab, label2id, max_len):
        self.rows, self.vocab, self.label2id, self.max_len = rows, vocab, label2id, max_len

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        text, label = self.rows[i]
        ids = [self.vocab.get(w, 1) for w in text.lower().split()][: self.max_len]
        ids += [0] * (self.max_len - len(ids))
        return torch.tensor(ids), torch.tensor(self.label2id[label])


class IntentModel(nn.Module):
    def __init__(self, vocab_size, n_labels, dim=48):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim, padding_idx=0)
        self.encoder = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, n_labels)

    def forward(self, input_ids):
        h, _ = self.encoder(self.embed(input_ids))
        mask = (input_ids != 0).unsqueeze(-1).float()
        return self.head((h * mask).sum(1) / mask.sum(1).clamp(min=1))


def main():
    args = parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank = dist.get_rank()
    is_main = rank == 0
    torch.manual_seed(args.seed)

    rows = read_csv(args.train_file)
    vocab, label2id = preprocess(args, rows, is_main)
    ds = IntentDataset(rows, vocab, label2id, args.max_seq_length)
    sampler = DistributedSampler(ds, shuffle=True, seed=args.seed)
    loader = DataLoader(ds, batch_size=args.per_device_train_batch_size, sampler=sampler)

    model = DDP(IntentModel(len(vocab), len(label2id)))
    opt = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
    total = len(loader) * args.num_train_epochs
    warmup = int(total * args.warmup_ratio)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / max(1, warmup)) * max(0.0, (total - s) / max(1, total - warmup)))
    loss_fn = nn.CrossEntropyLoss()

    step = 0
    for epoch in range(args.num_train_epochs):
        sampler.set_epoch(epoch)
        model.train()
        for input_ids, labels in loader:
            loss = loss_fn(model(input_ids), labels)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            step += 1
            if is_main and step % args.logging_steps == 0:
                print(f"{{'loss': {loss.item():.4f}, 'learning_rate': {sched.get_last_lr()[0]:.2e}, "
                      f"'epoch': {step / len(loader):.2f}}}", flush=True)

    if is_main:
        os.makedirs(args.output_dir, exist_ok=True)
        torch.save({"model": model.module.state_dict(), "label2id": label2id},
                   os.path.join(args.output_dir, "pytorch_model.bin"))
        print("saved model to", args.output_dir, flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
