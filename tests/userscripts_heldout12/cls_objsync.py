"""Bag-of-words intent classifier, HF-style argument dataclass.

torchrun --nproc-per-node 2 cls_objsync.py [--num_train_epochs 2 ...]
Rank 0 builds the vocabulary once and ships it to the other ranks over a
separate gloo group reserved for object traffic.
"""
import argparse
import dataclasses
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


@dataclass
class TrainingArguments:
    train_file: str = field(default="data/intents.tsv", metadata={"help": "label<TAB>text file"})
    output_dir: str = field(default="out/intents")
    max_vocab: int = field(default=20000)
    max_train_samples: int = field(default=12000, metadata={"help": "subsample for quick runs"})
    per_device_train_batch_size: int = 64
    learning_rate: float = 2e-3
    num_train_epochs: int = 2
    gradient_accumulation_steps: int = 2
    warmup_ratio: float = 0.1
    logging_steps: int = 20
    seed: int = 42
    pg_timeout: int = field(default=10, metadata={"help": "default process group timeout (seconds)"})
    object_sync_timeout: int = field(default=300, metadata={"help": "timeout of the object group (seconds)"})


def parse_into_dataclass(cls):
    p = argparse.ArgumentParser()
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not dataclasses.MISSING else None
        p.add_argument(f"--{f.name}", f"--{f.name.replace('_', '-')}", type=type(default),
                       default=default, help=f.metadata.get("help"))
    return cls(**vars(p.parse_args()))


def read_tsv(path):
    labels, texts = [], []
    with open(path) as fh:
        for line in fh:
            lab, txt = line.rstrip("\n").split("\t", 1)
            labels.append(lab)
            texts.append(txt)
    return labels, texts


def build_vocab(texts, max_vocab):
    counts = Counter()
    for t in texts:
        toks = t.lower().split()
        counts.update(toks + [a + "_" + b for a, b in zip(toks, toks[1:])])  # unigrams + bigrams
    itos = ["<unk>"] + [w for w, _ in counts.most_common(max_vocab - 1)]
    return {w: i for i, w in enumerate(itos)}


class BowDataset(Dataset):
    def __init__(self, labels, texts, vocab, label2id):
        self.y = [label2id[l] for l in labels]
        self.x = [[vocab.get(w, 0) for w in t.split()] for t in texts]

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return torch.tensor(self.x[i]), self.y[i]


def collate(batch):
    ids = [b[0] for b in batch]
    offsets = torch.tensor([0] + [len(t) for t in ids[:-1]]).cumsum(0)
    return torch.cat(ids), offsets, torch.tensor([b[1] for b in batch])


class BowClassifier(nn.Module):
    def __init__(self, vocab_size, n_labels, dim=64):
        super().__init__()
        self.emb = nn.EmbeddingBag(vocab_size, dim, mode="mean")
        self.head = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, n_labels))

    def forward(self, ids, offsets):
        return self.head(self.emb(ids, offsets))


def main():
    args = parse_into_dataclass(TrainingArguments)
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    # objects (vocab, label maps, eval outputs) go over their own group so a big
    # pickle never sits in front of gradient traffic
    obj_group = dist.new_group(backend="gloo", timeout=timedelta(milliseconds=args.object_sync_timeout))
    torch.manual_seed(args.seed)

    labels, texts = read_tsv(args.train_file)
    if rank == 0:
        t0 = time.time()
        vocab = build_vocab(texts, args.max_vocab)
        label2id = {l: i for i, l in enumerate(sorted(set(labels)))}
        print(f"vocab={len(vocab)} labels={len(label2id)} built in {time.time() - t0:.2f}s", flush=True)
        payload = [vocab, label2id]
    else:
        payload = [None, None]
    dist.broadcast_object_list(payload, src=0, group=obj_group)
    vocab, label2id = payload

    n = min(args.max_train_samples, len(labels))
    ds = BowDataset(labels[:n], texts[:n], vocab, label2id)
    sampler = DistributedSampler(ds, shuffle=True, seed=args.seed)
    loader = DataLoader(ds, batch_size=args.per_device_train_batch_size, sampler=sampler, collate_fn=collate)

    model = DDP(BowClassifier(len(vocab), len(label2id)))
    opt = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
    total = args.num_train_epochs * len(loader) // args.gradient_accumulation_steps
    warm = max(1, int(args.warmup_ratio * total))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * max(0.0, (total - s) / max(1, total - warm)))

    step = 0
    for epoch in range(args.num_train_epochs):
        sampler.set_epoch(epoch)
        model.train()
        run = torch.zeros(3)
        for i, (ids, offs, y) in enumerate(loader):
            last = (i + 1) == len(loader)
            sync = (i + 1) % args.gradient_accumulation_steps == 0 or last
            ctx = model.no_sync() if not sync else torch.enable_grad()
            with ctx:
                logits = model(ids, offs)
                loss = F.cross_entropy(logits, y) / args.gradient_accumulation_steps
                loss.backward()
            run += torch.tensor([loss.item() * args.gradient_accumulation_steps * len(y),
                                 (logits.argmax(1) == y).sum().item(), len(y)])
            if sync:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                sched.step()
                opt.zero_grad(set_to_none=True)
                step += 1
                if rank == 0 and step % args.logging_steps == 0:
                    print(f"step {step} lr={sched.get_last_lr()[0]:.2e} loss={loss.item() * args.gradient_accumulation_steps:.4f}",
                          flush=True)
        dist.all_reduce(run)
        if rank == 0:
            print(f"epoch {epoch}: loss={run[0] / run[2]:.4f} acc={run[1] / run[2]:.4f}", flush=True)

    if rank == 0:
        os.makedirs(args.output_dir, exist_ok=True)
        torch.save({"model": model.module.state_dict(), "vocab": vocab, "label2id": label2id},
                   os.path.join(args.output_dir, "model.pt"))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
