"""Intent classifier (bag-of-words EmbeddingBag) with HF-Trainer-style arguments.

    bash setup/intent_clf.sh
    torchrun --nproc-per-node 2 intent_clf.py --num_train_epochs 4
"""
import dataclasses
import json
import math
import os
import socket
import sys
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass
class TrainingArguments:
    data_file: str = field(default=os.path.join(HERE, "data", "intents.jsonl"))
    output_dir: str = field(default=os.path.join(HERE, "outputs", "intent"))
    per_device_train_batch_size: int = 32
    learning_rate: float = 5e-3
    weight_decay: float = 0.01
    num_train_epochs: int = 4
    warmup_ratio: float = 0.1
    gradient_accumulation_steps: int = 1
    logging_steps: int = 20
    eval_fraction: float = 0.1
    embed_dim: int = 64
    seed: int = 42
    # distributed
    backend: str = "gloo"
    master_addr: str = field(default_factory=lambda: os.environ.get("MASTER_ADDR", "127.0.0.1"))
    master_port: int = field(default=0, metadata={"help": "0 = pick a free port automatically"})
    pg_timeout: int = 10


def parse_args(cls=TrainingArguments, argv=None):
    """Tiny HfArgumentParser: --field value for every dataclass field."""
    import argparse
    p = argparse.ArgumentParser()
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        p.add_argument(f"--{f.name}", type=type(default), default=default,
                       help=f.metadata.get("help"))
    return cls(**vars(p.parse_args(argv)))


def _find_free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def setup_distributed(args):
    rank = int(os.environ.get("RANK", 0))
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    if args.master_port == 0:
        # the dev box is shared, so never rely on the usual 29500
        args.master_port = _find_free_port()
    init_method = f"tcp://{args.master_addr}:{args.master_port}"
    print(f"[rank {rank}] init_process_group via {init_method} (world_size={world_size})", flush=True)
    dist.init_process_group(args.backend, init_method=init_method, rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=args.pg_timeout))
    return rank, world_size


# ------------------------------------------------------------------ data
class Vocab:
    def __init__(self, texts, min_freq=1):
        counts = Counter(tok for t in texts for tok in t.split())
        self.itos = ["<pad>", "<unk>"] + sorted(w for w, c in counts.items() if c >= min_freq)
        self.stoi = {w: i for i, w in enumerate(self.itos)}

    def encode(self, text):
        return [self.stoi.get(tok, 1) for tok in text.split()]


class IntentDataset(Dataset):
    def __init__(self, records, vocab, labels):
        self.items = [(vocab.encode(r["text"]), labels.index(r["label"])) for r in records]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def collate(batch):
    ids = [torch.tensor(toks, dtype=torch.long) for toks, _ in batch]
    offsets = torch.tensor([0] + [len(t) for t in ids[:-1]]).cumsum(0)
    return torch.cat(ids), offsets, torch.tensor([lab for _, lab in batch])


class BagClassifier(nn.Module):
    def __init__(self, vocab_size, dim, n_classes):
        super().__init__()
        self.emb = nn.EmbeddingBag(vocab_size, dim, mode="mean")
        self.fc = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, n_classes))

    def forward(self, ids, offsets):
        return self.fc(self.emb(ids, offsets))


def linear_warmup_cosine(optimizer, warmup, total):
    def fn(step):
        if step < warmup:
            return (step + 1) / max(1, warmup)
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, fn)


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    stats = torch.zeros(3)  # loss_sum, correct, count
    for ids, offsets, y in loader:
        logits = model(ids, offsets)
        stats += torch.tensor([F.cross_entropy(logits, y, reduction="sum").item(),
                               (logits.argmax(1) == y).sum().item(), len(y)])
    dist.all_reduce(stats)
    model.train()
    return {"eval_loss": stats[0].item() / stats[2].item(), "eval_accuracy": stats[1].item() / stats[2].item()}


def main():
    args = parse_args()
    rank, world_size = setup_distributed(args)
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    with open(args.data_file) as fh:
        records = [json.loads(line) for line in fh]
    n_eval = int(len(records) * args.eval_fraction)
    train_recs, eval_recs = records[n_eval:], records[:n_eval]
    labels = sorted({r["label"] for r in records})
    vocab = Vocab([r["text"] for r in train_recs])
    train_ds = IntentDataset(train_recs, vocab, labels)
    eval_ds = IntentDataset(eval_recs, vocab, labels)

    train_sampler = DistributedSampler(train_ds, shuffle=True, seed=args.seed)
    eval_sampler = DistributedSampler(eval_ds, shuffle=False)
    train_dl = DataLoader(train_ds, batch_size=args.per_device_train_batch_size,
                          sampler=train_sampler, collate_fn=collate)
    eval_dl = DataLoader(eval_ds, batch_size=128, sampler=eval_sampler, collate_fn=collate)

    model = DDP(BagClassifier(len(vocab.itos), args.embed_dim, len(labels)))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, weight_decay=args.weight_decay)
    steps_per_epoch = math.ceil(len(train_dl) / args.gradient_accumulation_steps)
    total_steps = steps_per_epoch * args.num_train_epochs
    scheduler = linear_warmup_cosine(optimizer, int(args.warmup_ratio * total_steps), total_steps)

    global_step = 0
    for epoch in range(args.num_train_epochs):
        train_sampler.set_epoch(epoch)
        for i, (ids, offsets, y) in enumerate(train_dl):
            loss = F.cross_entropy(model(ids, offsets), y) / args.gradient_accumulation_steps
            loss.backward()
            if (i + 1) % args.gradient_accumulation_steps == 0 or i + 1 == len(train_dl):
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                global_step += 1
                if rank == 0 and global_step % args.logging_steps == 0:
                    print(json.dumps({"step": global_step, "loss": round(loss.item(), 4),
                                      "lr": scheduler.get_last_lr()[0]}), flush=True)
        metrics = evaluate(model, eval_dl)
        if rank == 0:
            print(json.dumps({"epoch": epoch, **{k: round(v, 4) for k, v in metrics.items()}}), flush=True)

    if rank == 0:
        os.makedirs(args.output_dir, exist_ok=True)
        torch.save({"model": model.module.state_dict(), "vocab": vocab.itos, "labels": labels,
                    "args": dataclasses.asdict(args)}, os.path.join(args.output_dir, "model.pt"))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
