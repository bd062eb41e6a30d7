"""Pre-training a tiny bag-of-embeddings classifier on pre-tokenized shards.

Arguments follow transformers.TrainingArguments naming so the same yaml can be reused.
Shards live in ./data/shard_*.pt; rank 0 lists them and hands every rank its share.

torchrun --nproc-per-node 2 hf_style_pretrain.py --output_dir out
"""
import dataclasses
import glob
import math
import os
import sys
import time
from dataclasses import dataclass, field
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import ConcatDataset, DataLoader, TensorDataset

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass
class DataArguments:
    data_dir: str = field(default=os.path.join(HERE, "data"))
    shard_pattern: str = field(default="shard_*.pt")
    max_seq_length: int = field(default=32)


@dataclass
class TrainingArguments:
    output_dir: str = field(default=os.path.join(HERE, "out"))
    num_train_epochs: int = field(default=3)
    per_device_train_batch_size: int = field(default=32)
    gradient_accumulation_steps: int = field(default=2)
    learning_rate: float = field(default=1e-3)
    weight_decay: float = field(default=0.01)
    warmup_ratio: float = field(default=0.1)
    logging_steps: int = field(default=10)
    seed: int = field(default=42)
    pg_timeout: int = field(default=10, metadata={"help": "process group timeout in seconds"})


def parse_args(*classes):
    """Minimal HfArgumentParser: --name value / --name=value for every dataclass field."""
    instances = [c() for c in classes]
    argv = sys.argv[1:]
    i = 0
    while i < len(argv):
        key = argv[i].lstrip("-").replace("-", "_")
        if "=" in key:
            key, val = key.split("=", 1)
            i += 1
        else:
            val = argv[i + 1]
            i += 2
        for inst in instances:
            fmap = {f.name: f for f in dataclasses.fields(inst)}
            if key in fmap:
                setattr(inst, key, fmap[key].type(val) if callable(fmap[key].type) else val)
                break
        else:
            raise SystemExit(f"unknown argument --{key}")
    return instances


class BagOfEmbeddings(nn.Module):
    def __init__(self, vocab_size=512, dim=64, num_labels=4):
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab_size, dim, mode="mean")
        self.classifier = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, num_labels))

    def forward(self, input_ids):
        return self.classifier(self.embed(input_ids))


def assign_shards(data_args, rank, world_size):
    """Rank 0 lists the shard files once and scatters a contiguous block of them to every rank."""
    if rank == 0:
        files = sorted(glob.glob(os.path.join(data_args.data_dir, data_args.shard_pattern)))
        if not files:
            raise FileNotFoundError(f"no shards matching {data_args.shard_pattern} in {data_args.data_dir}")
        per_rank = max(1, len(files) // world_size)
        blocks = [files[i:i + per_rank] for i in range(0, len(files), per_rank)]
        print(f"found {len(files)} shards, {per_rank} per rank", flush=True)
    else:
        blocks = None
    mine = [None]
    dist.scatter_object_list(mine, blocks, src=0)
    return mine[0]


def load_shards(paths, max_len):
    parts = []
    for p in paths:
        blob = torch.load(p)
        parts.append(TensorDataset(blob["input_ids"][:, :max_len], blob["labels"]))
    return ConcatDataset(parts)


def get_linear_schedule_with_warmup(optimizer, warmup, total):
    def lr_lambda(step):
        if step < warmup:
            return float(step) / float(max(1, warmup))
        return max(0.0, float(total - step) / float(max(1, total - warmup)))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)


def train(data_args, args):
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    my_shards = assign_shards(data_args, rank, world)
    ds = load_shards(my_shards, data_args.max_seq_length)
    print(f"[rank {rank}] {len(my_shards)} shards, {len(ds)} examples", flush=True)

    g = torch.Generator().manual_seed(args.seed + rank)
    loader = DataLoader(ds, batch_size=args.per_device_train_batch_size, shuffle=True,
                        generator=g, drop_last=True)
    # every rank must run the same number of optimizer steps
    n_batches = torch.tensor([len(loader)])
    dist.all_reduce(n_batches, op=dist.ReduceOp.MIN)
    n_batches = int(n_batches.item())

    model = DDP(BagOfEmbeddings())
    no_decay = [p for n, p in model.named_parameters() if n.endswith("bias")]
    decay = [p for n, p in model.named_parameters() if not n.endswith("bias")]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=args.learning_rate)
    steps_per_epoch = math.ceil(n_batches / args.gradient_accumulation_steps)
    total = steps_per_epoch * args.num_train_epochs
    scheduler = get_linear_schedule_with_warmup(optimizer, int(args.warmup_ratio * total), total)
    loss_fn = nn.CrossEntropyLoss()

    step, t0 = 0, time.time()
    for epoch in range(args.num_train_epochs):
        model.train()
        for i, (ids, labels) in enumerate(loader):
            if i >= n_batches:
                break
            loss = loss_fn(model(ids), labels) / args.gradient_accumulation_steps
            loss.backward()
            if (i + 1) % args.gradient_accumulation_steps == 0 or i + 1 == n_batches:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
                step += 1
                if rank == 0 and step % args.logging_steps == 0:
                    print({"loss": round(loss.item() * args.gradient_accumulation_steps, 4),
                           "learning_rate": scheduler.get_last_lr()[0], "epoch": round(epoch + i / n_batches, 2),
                           "step": step, "sec": round(time.time() - t0, 1)}, flush=True)
    if rank == 0:
        os.makedirs(args.output_dir, exist_ok=True)
        torch.save(model.module.state_dict(), os.path.join(args.output_dir, "pytorch_model.bin"))
        print(f"Saving model checkpoint to {args.output_dir}", flush=True)


if __name__ == "__main__":
    data_args, training_args = parse_args(DataArguments, TrainingArguments)
    dist.init_process_group(backend="gloo", timeout=timedelta(seconds=training_args.pg_timeout))
    try:
        train(data_args, training_args)
    finally:
        dist.destroy_process_group()
