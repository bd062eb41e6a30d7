"""Sentiment-style bag-of-tokens classifier, HF-Trainer-like arguments, one-cycle LR.

    torchrun --nproc-per-node 2 onecycle_sched.py --num_train_epochs 3
"""
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler


@dataclass
class TrainingArguments:
    output_dir: str = "runs/onecycle"
    num_train_epochs: int = 3
    per_device_train_batch_size: int = 32
    per_device_eval_batch_size: int = 128
    learning_rate: float = 2e-3
    warmup_ratio: float = 0.1
    max_grad_norm: float = 1.0
    logging_steps: int = 10
    seed: int = 1234
    vocab_size: int = 2000
    seq_len: int = 48
    num_train_samples: int = 1000
    num_eval_samples: int = 256
    pg_timeout: int = 10
    extra: dict = field(default_factory=dict)


def parse_args():
    args = TrainingArguments()
    it = iter(sys.argv[1:])
    for tok in it:
        key = tok.lstrip("-").replace("-", "_")
        if not hasattr(args, key):
            raise SystemExit(f"unknown argument {tok}")
        cur = getattr(args, key)
        setattr(args, key, type(cur)(next(it)))
    return args


class SyntheticReviews(Dataset):
    """Token ids; label is 1 when 'positive' tokens (< vocab/2) dominate."""

    def __init__(self, n, vocab, seq_len, seed):
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(1, vocab, (n, seq_len), generator=g)
        bias = torch.rand(n, generator=g) < 0.5
        flip = torch.randint(1, vocab // 2, (n, seq_len // 3), generator=g)
        self.ids[bias, : seq_len // 3] = flip[bias]
        self.labels = ((self.ids < vocab // 2).float().mean(1) > 0.5).long()

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


class BagClassifier(nn.Module):
    def __init__(self, vocab, dim=64, n_classes=2):
        super().__init__()
        self.emb = nn.EmbeddingBag(vocab, dim, mode="mean")
        self.head = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, n_classes))

    def forward(self, input_ids):
        return self.head(self.emb(input_ids))


def main():
    args = parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)

    train_ds = SyntheticReviews(args.num_train_samples, args.vocab_size, args.seq_len, args.seed)
    eval_ds = SyntheticReviews(args.num_eval_samples, args.vocab_size, args.seq_len, args.seed + 1)
    train_sampler = DistributedSampler(train_ds, num_replicas=world, rank=rank, shuffle=True, seed=args.seed)
    train_dl = DataLoader(train_ds, batch_size=args.per_device_train_batch_size, sampler=train_sampler)
    eval_dl = DataLoader(eval_ds, batch_size=args.per_device_eval_batch_size,
                         sampler=DistributedSampler(eval_ds, shuffle=False))

    model = DDP(BagClassifier(args.vocab_size))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, weight_decay=0.01)

    # total optimisation steps = epochs * steps per epoch (global batch = per_device * world)
    total_batch_size = args.per_device_train_batch_size * world
    steps_per_epoch = len(train_ds) // total_batch_size
    max_steps = args.num_train_epochs * steps_per_epoch
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=args.learning_rate, total_steps=max_steps,
        pct_start=args.warmup_ratio, anneal_strategy="cos",
    )

    if rank == 0:
        os.makedirs(args.output_dir, exist_ok=True)
        with open(os.path.join(args.output_dir, "training_args.json"), "w") as f:
            json.dump(asdict(args), f, indent=2)
        print(f"***** Running training *****\n  Num examples = {len(train_ds)}\n"
              f"  Num epochs = {args.num_train_epochs}\n  Total batch size = {total_batch_size}\n"
              f"  Total optimization steps = {max_steps}", flush=True)

    global_step, tr_loss, logged_loss = 0, 0.0, 0.0
    t0 = time.time()
    for epoch in range(args.num_train_epochs):
        model.train()
        train_sampler.set_epoch(epoch)
        for batch in train_dl:
            logits = model(batch["input_ids"])
            loss = F.cross_entropy(logits, batch["labels"])
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            global_step += 1
            tr_loss += loss.item()
            if rank == 0 and global_step % args.logging_steps == 0:
                print(json.dumps({
                    "epoch": round(epoch + global_step / max_steps, 2),
                    "step": global_step,
                    "loss": round((tr_loss - logged_loss) / args.logging_steps, 4),
                    "grad_norm": round(grad_norm.item(), 4),
                    "learning_rate": scheduler.get_last_lr()[0],
                }), flush=True)
                logged_loss = tr_loss

        # evaluation: sum of loss / correct / count over ranks
        model.eval()
        stats = torch.zeros(3, dtype=torch.float64)
        with torch.no_grad():
            for batch in eval_dl:
                logits = model(batch["input_ids"])
                stats[0] += F.cross_entropy(logits, batch["labels"], reduction="sum").item()
                stats[1] += (logits.argmax(-1) == batch["labels"]).sum().item()
                stats[2] += batch["labels"].numel()
        dist.all_reduce(stats)
        if rank == 0:
            eval_loss = stats[0].item() / stats[2].item()
            print(json.dumps({"epoch": epoch + 1, "eval_loss": round(eval_loss, 4),
                              "eval_accuracy": round(stats[1].item() / stats[2].item(), 4),
                              "eval_perplexity": round(math.exp(eval_loss), 4)}), flush=True)

    if rank == 0:
        torch.save(model.module.state_dict(), os.path.join(args.output_dir, "pytorch_model.bin"))
        print(f"train_runtime {time.time() - t0:.1f}s, steps {global_step}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
