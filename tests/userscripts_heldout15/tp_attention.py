#!/usr/bin/env python
"""Tensor-parallel fine-tuning of a tiny GPT on a synthetic "copy the prefix" task.

Megatron-style TP via DTensor: q/k/v and the first MLP layer are column-sharded,
the attention output projection and the second MLP layer are row-sharded.

    torchrun --nproc-per-node 2 tp_attention.py --max-steps 200
"""
import argparse
import logging
import math
import os
import time
from dataclasses import asdict, dataclass, fields
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                               parallelize_module)

logger = logging.getLogger("tp_train")


@dataclass
class TrainingArguments:
    output_dir: str = "runs/tp"
    vocab_size: int = 96
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    seq_len: int = 32
    batch_size: int = 16
    learning_rate: float = 3e-3
    weight_decay: float = 0.01
    warmup_steps: int = 20
    max_steps: int = 200
    logging_steps: int = 20
    seed: int = 1234
    pg_timeout: int = 10


def parse_args() -> TrainingArguments:
    # poor man's HfArgumentParser
    parser = argparse.ArgumentParser()
    for f in fields(TrainingArguments):
        parser.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=f.default)
    return TrainingArguments(**vars(parser.parse_args()))


class CausalSelfAttention(nn.Module):
    def __init__(self, args: TrainingArguments):
        super().__init__()
        self.n_heads = args.n_heads
        self.head_dim = args.d_model // args.n_heads
        self.wq = nn.Linear(args.d_model, args.d_model, bias=False)
        self.wk = nn.Linear(args.d_model, args.d_model, bias=False)
        self.wv = nn.Linear(args.d_model, args.d_model, bias=False)
        self.wo = nn.Linear(args.d_model, args.d_model, bias=False)

    def forward(self, x):
        B, T, _ = x.shape
        q = self.wq(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).reshape(B, T, -1)
        return self.wo(y)


class MLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.w1 = nn.Linear(d, 4 * d)
        self.w2 = nn.Linear(4 * d, d)

    def forward(self, x):
        return self.w2(F.gelu(self.w1(x)))


class Block(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.ln1 = nn.LayerNorm(args.d_model)
        self.attn = CausalSelfAttention(args)
        self.ln2 = nn.LayerNorm(args.d_model)
        self.mlp = MLP(args.d_model)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.tok = nn.Embedding(args.vocab_size, args.d_model)
        self.pos = nn.Embedding(args.seq_len, args.d_model)
        self.blocks = nn.ModuleList([Block(args) for _ in range(args.n_layers)])
        self.ln_f = nn.LayerNorm(args.d_model)
        self.head = nn.Linear(args.d_model, args.vocab_size, bias=False)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln_f(x))


def apply_tensor_parallel(model: TinyGPT, tp_mesh):
    for blk in model.blocks:
        plan = {
            "attn.wq": ColwiseParallel(),
            "attn.wk": ColwiseParallel(),
            "attn.wv": ColwiseParallel(),
            "attn.wo": RowwiseParallel(),
            "mlp.w1": ColwiseParallel(),
            "mlp.w2": RowwiseParallel(),
        }
        parallelize_module(blk, tp_mesh, plan)
    return model


def copy_task_batch(gen, args):
    half = args.seq_len // 2
    prefix = torch.randint(1, args.vocab_size, (args.batch_size, half), generator=gen)
    seq = torch.cat([prefix, prefix], dim=1)
    return seq[:, :-1], seq[:, 1:]


def lr_lambda(step, args):
    if step < args.warmup_steps:
        return (step + 1) / args.warmup_steps
    progress = (step - args.warmup_steps) / max(1, args.max_steps - args.warmup_steps)
    return 0.5 * (1 + math.cos(math.pi * progress))


class Trainer:
    def __init__(self, model, args, rank):
        self.model, self.args, self.rank = model, args, rank
        self.opt = torch.optim.AdamW(model.parameters(), lr=args.learning_rate,
                                     weight_decay=args.weight_decay, foreach=False)
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, lambda s: lr_lambda(s, args))
        # TP needs identical inputs on every rank of the TP group
        self.gen = torch.Generator().manual_seed(args.seed)

    def train(self):
        args = self.args
        self.model.train()
        t0 = time.time()
        for step in range(args.max_steps):
            x, y = copy_task_batch(self.gen, args)
            logits = self.model(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
            self.sched.step()
            if step % args.logging_steps == 0 and self.rank == 0:
                logger.info("step %d loss %.4f lr %.2e (%.1fs)", step, loss.item(),
                            self.sched.get_last_lr()[0], time.time() - t0)
        return loss.item()


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s [%(name)s] %(message)s")
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        logger.info("args: %s", asdict(args))
    torch.manual_seed(args.seed)
    tp_mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("tp",))
    assert args.n_heads % world == 0, "n_heads must be divisible by the TP degree"

    model = TinyGPT(args)
    model = apply_tensor_parallel(model, tp_mesh)
    n_params = sum(p.numel() for p in model.parameters())
    logger.info("rank %d: model ready, %d parameters (global)", rank, n_params)

    trainer = Trainer(model, args, rank)
    final = trainer.train()
    if rank == 0:
        os.makedirs(args.output_dir, exist_ok=True)
        with open(os.path.join(args.output_dir, "final_loss.txt"), "w") as f:
            f.write(f"{final:.4f}\n")
        logger.info("done, final loss %.4f", final)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
