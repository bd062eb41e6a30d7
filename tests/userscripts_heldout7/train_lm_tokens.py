"""Character-level GRU language model, HF-Trainer-like arguments and a small trainer.

torchrun --nproc-per-node 2 train_lm_tokens.py
"""
import math
import os
from dataclasses import dataclass, field
from datetime import timedelta
from contextlib import nullcontext

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass
class TrainingArguments:
    train_file: str = os.path.join(HERE, "data", "lm", "train.txt")
    valid_file: str = os.path.join(HERE, "data", "lm", "valid.txt")
    output_dir: str = "runs/lm_tokens"
    per_device_train_batch_size: int = 16
    gradient_accumulation_steps: int = 2
    learning_rate: float = 2e-3
    warmup_steps: int = 20
    num_train_epochs: int = 2
    eval_every_tokens: int = 30_000
    logging_steps: int = 10
    max_length: int = 128
    seed: int = 42
    pg_timeout: int = 10
    extra: dict = field(default_factory=dict)


def parse_args():
    import argparse
    p = argparse.ArgumentParser()
    for name, f in TrainingArguments.__dataclass_fields__.items():
        if name == "extra":
            continue
        p.add_argument("--" + name.replace("_", "-"), type=type(f.default), default=f.default)
    return TrainingArguments(**vars(p.parse_args()))


class CharTokenizer:
    def __init__(self):
        self.itos = ["<pad>", "<eos>"] + [chr(c) for c in range(32, 127)]
        self.stoi = {c: i for i, c in enumerate(self.itos)}

    def encode(self, s, max_length):
        return [self.stoi.get(c, self.stoi["?"]) for c in s[: max_length - 1]] + [1]


class TextLines(Dataset):
    def __init__(self, path, tok, max_length, rank=0, world_size=1):
        with open(path) as f:
            lines = [l.rstrip("\n") for l in f if l.strip()]
        # contiguous block per rank
        per = len(lines) // world_size
        lines = lines[rank * per:(rank + 1) * per]
        self.ids = [tok.encode(l, max_length) for l in lines]

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return torch.tensor(self.ids[i])


def collate(batch):
    ids = nn.utils.rnn.pad_sequence(batch, batch_first=True, padding_value=0)
    return {"input_ids": ids, "attention_mask": (ids != 0).long()}


class CharLM(nn.Module):
    def __init__(self, vocab, dim=64):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim, padding_idx=0)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, vocab)

    def forward(self, input_ids, attention_mask):
        h, _ = self.rnn(self.emb(input_ids[:, :-1]))
        logits = self.head(h)
        target = input_ids[:, 1:].masked_fill(attention_mask[:, 1:] == 0, -100)
        loss_sum = F.cross_entropy(logits.reshape(-1, logits.size(-1)), target.reshape(-1),
                                   ignore_index=-100, reduction="sum")
        return loss_sum, (target != -100).sum()


class LMTrainer:
    def __init__(self, args, model, train_ds, eval_ds):
        self.args = args
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.model = DDP(model)
        self.train_dl = DataLoader(train_ds, batch_size=args.per_device_train_batch_size, shuffle=True,
                                   drop_last=True, collate_fn=collate,
                                   generator=torch.Generator().manual_seed(args.seed + self.rank))
        self.eval_dl = DataLoader(eval_ds, batch_size=64, collate_fn=collate)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=args.learning_rate)
        self.sched = torch.optim.lr_scheduler.LambdaLR(
            self.opt, lambda s: min(1.0, (s + 1) / args.warmup_steps))
        self.tokens_seen = 0
        self.next_eval = args.eval_every_tokens
        self.history = []

    def evaluate(self):
        self.model.eval()
        tot = torch.zeros(2)
        with torch.no_grad():
            for b in self.eval_dl:
                ls, n = self.model.module(**b)
                tot += torch.stack([ls, n.float()])
        dist.all_reduce(tot)
        self.model.train()
        ppl = math.exp(tot[0] / tot[1])
        self.history.append({"tokens": self.tokens_seen, "ppl": ppl})
        if self.rank == 0:
            print(f"[eval] tokens={self.tokens_seen} ppl={ppl:.3f}", flush=True)

    def train(self):
        a = self.args
        step = 0
        for epoch in range(a.num_train_epochs):
            for i, batch in enumerate(self.train_dl):
                sync = (i + 1) % a.gradient_accumulation_steps == 0
                ctx = nullcontext() if sync else self.model.no_sync()
                with ctx:
                    loss_sum, n_tok = self.model(**batch)
                    (loss_sum / n_tok / a.gradient_accumulation_steps).backward()
                self.tokens_seen += int(batch["attention_mask"].sum())
                if not sync:
                    continue
                nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.opt.step()
                self.sched.step()
                self.opt.zero_grad(set_to_none=True)
                step += 1
                if step % a.logging_steps == 0 and self.rank == 0:
                    print(f"epoch {epoch} step {step} loss/tok {(loss_sum / n_tok).item():.4f}", flush=True)
                if self.tokens_seen >= self.next_eval:
                    self.evaluate()
                    self.next_eval += a.eval_every_tokens
        self.evaluate()


def main():
    args = parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    tok = CharTokenizer()
    train_ds = TextLines(args.train_file, tok, args.max_length, rank, world)
    eval_ds = TextLines(args.valid_file, tok, args.max_length, rank, world)
    print(f"[rank {rank}] train={len(train_ds)} eval={len(eval_ds)}", flush=True)
    trainer = LMTrainer(args, CharLM(len(tok.itos)), train_ds, eval_ds)
    trainer.train()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
