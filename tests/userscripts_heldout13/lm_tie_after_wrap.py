"""Tiny causal LM fine-tuning script (HF-Trainer-ish arguments, hand-written trainer).

torchrun --nproc-per-node 2 lm_tie_after_wrap.py
"""
import argparse
import math
import os
import time
from dataclasses import dataclass, field, fields
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass
class TrainingArguments:
    data_file: str = field(default=os.path.join(HERE, "data", "corpus.txt"))
    output_dir: str = field(default=os.path.join(HERE, "runs", "lm"))
    seq_len: int = 64
    d_model: int = 96
    n_layer: int = 2
    n_head: int = 4
    per_device_train_batch_size: int = 16
    learning_rate: float = 3e-3
    weight_decay: float = 0.01
    warmup_steps: int = 10
    num_train_epochs: int = 2
    logging_steps: int = 10
    tie_word_embeddings: bool = True
    seed: int = 1234
    pg_timeout: int = 10


def parse_args():
    p = argparse.ArgumentParser()
    for f in fields(TrainingArguments):
        flag = "--" + f.name.replace("_", "-")
        if f.type is bool or isinstance(f.default, bool):
            p.add_argument(flag, type=lambda s: s.lower() in ("1", "true", "yes"), default=f.default)
        else:
            p.add_argument(flag, type=type(f.default), default=f.default)
    return TrainingArguments(**vars(p.parse_args()))


class CharDataset(Dataset):
    def __init__(self, path, seq_len):
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        chars = sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(chars)}
        self.vocab_size = len(chars)
        self.data = torch.tensor([self.stoi[c] for c in text], dtype=torch.long)
        self.seq_len = seq_len

    def __len__(self):
        return (len(self.data) - 1) // self.seq_len

    def __getitem__(self, i):
        s = i * self.seq_len
        chunk = self.data[s:s + self.seq_len + 1]
        return chunk[:-1], chunk[1:]


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, h, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    def __init__(self, vocab, args):
        super().__init__()
        self.wte = nn.Embedding(vocab, args.d_model)
        self.wpe = nn.Embedding(args.seq_len, args.d_model)
        self.blocks = nn.ModuleList([Block(args.d_model, args.n_head) for _ in range(args.n_layer)])
        self.ln_f = nn.LayerNorm(args.d_model)
        self.lm_head = nn.Linear(args.d_model, vocab, bias=False)
        self.apply(self._init)

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)

    def tie_weights(self):
        # same as transformers' PreTrainedModel.tie_weights: output projection shares the input embedding
        self.lm_head.weight = self.wte.weight

    def forward(self, idx):
        T = idx.size(1)
        pos = torch.arange(T, device=idx.device)
        mask = torch.triu(torch.full((T, T), float("-inf"), device=idx.device), diagonal=1)
        x = self.wte(idx) + self.wpe(pos)
        for blk in self.blocks:
            x = blk(x, mask)
        return self.lm_head(self.ln_f(x))


class Trainer:
    def __init__(self, args):
        self.args = args
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        self.is_main = self.rank == 0
        torch.manual_seed(args.seed)
        self.ds = CharDataset(args.data_file, args.seq_len)
        self.sampler = DistributedSampler(self.ds, shuffle=True, seed=args.seed)
        self.loader = DataLoader(self.ds, batch_size=args.per_device_train_batch_size,
                                 sampler=self.sampler, drop_last=True)
        self.model = self._wrap_model(TinyLM(self.ds.vocab_size, args))
        self.optimizer = self._create_optimizer()
        total = len(self.loader) * args.num_train_epochs
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min(1.0, (s + 1) / args.warmup_steps)
            * 0.5 * (1 + math.cos(math.pi * min(s, total) / total)))

    def log(self, msg):
        if self.is_main:
            print(f"[trainer] {msg}", flush=True)

    def unwrap(self, model):
        return model.module if isinstance(model, DDP) else model

    def _wrap_model(self, model):
        model = DDP(model)
        if self.args.tie_word_embeddings:
            self.unwrap(model).tie_weights()
        n = sum(p.numel() for p in model.parameters())
        self.log(f"model ready, {n/1e3:.1f}k params (tied={self.args.tie_word_embeddings})")
        return model

    def _create_optimizer(self):
        decay, no_decay = [], []
        for name, p in self.model.named_parameters():
            (no_decay if p.ndim < 2 or "ln" in name else decay).append(p)
        groups = [{"params": decay, "weight_decay": self.args.weight_decay},
                  {"params": no_decay, "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=self.args.learning_rate, betas=(0.9, 0.95))

    def train(self):
        step, t0 = 0, time.time()
        for epoch in range(self.args.num_train_epochs):
            self.sampler.set_epoch(epoch)
            self.model.train()
            for x, y in self.loader:
                logits = self.model(x)
                loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.optimizer.step()
                self.scheduler.step()
                step += 1
                if step % self.args.logging_steps == 0:
                    l = loss.detach().clone()
                    dist.all_reduce(l)
                    self.log(f"epoch {epoch} step {step} loss {l.item() / self.world:.4f} "
                             f"lr {self.scheduler.get_last_lr()[0]:.2e} ({time.time() - t0:.1f}s)")
        if self.is_main:
            os.makedirs(self.args.output_dir, exist_ok=True)
            torch.save(self.unwrap(self.model).state_dict(), os.path.join(self.args.output_dir, "model.pt"))
            self.log("saved final model")


def main():
    args = parse_args()
    dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
    torch.set_num_threads(1)
    try:
        Trainer(args).train()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
