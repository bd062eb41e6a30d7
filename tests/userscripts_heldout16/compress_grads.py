# Train a small char-level conv language model with DDP and fp16 gradient compression.
#   torchrun --nproc-per-node 2 compress_grads.py --grad-compression fp16
import argparse
import contextlib
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--steps-per-epoch", type=int, default=40)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--seq-len", type=int, default=64)
parser.add_argument("--vocab", type=int, default=96)
parser.add_argument("--dim", type=int, default=128)
parser.add_argument("--accum", type=int, default=2)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--grad-compression", choices=["none", "fp16", "bf16"], default="fp16")
parser.add_argument("--log-every", type=int, default=10)
parser.add_argument("--pg-timeout", type=int, default=10)
parser.add_argument("--seed", type=int, default=1234)
args = parser.parse_args()

dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
rank = dist.get_rank()
world_size = dist.get_world_size()
torch.manual_seed(args.seed)


def log(*a):
    if rank == 0:
        print(f"[{time.strftime('%H:%M:%S')}]", *a, flush=True)


# ---------------------------------------------------------------- data
# synthetic "text": a noisy periodic sequence so the model has something to learn
def make_corpus(n_tokens, vocab, seed):
    g = torch.Generator().manual_seed(seed)
    base = torch.arange(n_tokens) % 17 + (torch.arange(n_tokens) // 97) % 11
    noise = torch.randint(0, vocab, (n_tokens,), generator=g)
    keep = torch.rand(n_tokens, generator=g) < 0.85
    return torch.where(keep, base % vocab, noise)


corpus = make_corpus(200_000, args.vocab, args.seed)
shard = corpus.chunk(world_size)[rank]  # each rank trains on its own contiguous piece
g = torch.Generator().manual_seed(args.seed + rank)


def get_batch():
    ix = torch.randint(0, len(shard) - args.seq_len - 1, (args.batch_size,), generator=g)
    x = torch.stack([shard[i:i + args.seq_len] for i in ix])
    y = torch.stack([shard[i + 1:i + args.seq_len + 1] for i in ix])
    return x, y


# ---------------------------------------------------------------- model
class CausalConvBlock(nn.Module):
    def __init__(self, dim, kernel=5, dilation=1):
        super().__init__()
        self.pad = (kernel - 1) * dilation
        self.conv = nn.Conv1d(dim, 2 * dim, kernel, dilation=dilation)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):  # x: B, T, C
        h = self.norm(x).transpose(1, 2)
        h = F.pad(h, (self.pad, 0))
        a, b = self.conv(h).chunk(2, dim=1)
        return x + (a * torch.sigmoid(b)).transpose(1, 2)


class ConvLM(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.blocks = nn.Sequential(*[CausalConvBlock(dim, dilation=d) for d in (1, 2, 4, 8)])
        self.out = nn.Linear(dim, vocab)

    def forward(self, idx):
        return self.out(self.blocks(self.emb(idx)))


model = ConvLM(args.vocab, args.dim)
model = DDP(model, bucket_cap_mb=1)

if rank == 0:
    n_params = sum(p.numel() for p in model.parameters())
    log(f"model has {n_params / 1e3:.1f}k parameters, world size {world_size}")
    if args.grad_compression == "fp16":
        log("compressing gradients to fp16 for all-reduce")
        model.register_comm_hook(dist.group.WORLD, default_hooks.fp16_compress_hook)
    elif args.grad_compression == "bf16":
        log("compressing gradients to bf16 for all-reduce")
        model.register_comm_hook(dist.group.WORLD, default_hooks.bf16_compress_hook)

optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
total_updates = args.epochs * args.steps_per_epoch
scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=args.lr,
                                                total_steps=total_updates, pct_start=0.1)

# ---------------------------------------------------------------- train
t_start = time.time()
update = 0
for epoch in range(args.epochs):
    model.train()
    tot_loss = torch.zeros(1)
    for step in range(args.steps_per_epoch):
        for micro in range(args.accum):
            x, y = get_batch()
            last_micro = micro == args.accum - 1
            ctx = contextlib.nullcontext() if last_micro else model.no_sync()
            with ctx:
                logits = model(x)
                loss = F.cross_entropy(logits.reshape(-1, args.vocab), y.reshape(-1))
                (loss / args.accum).backward()
            tot_loss += loss.detach() / args.accum
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        update += 1
        if update % args.log_every == 0:
            log(f"epoch {epoch} update {update}/{total_updates} loss {loss.item():.4f} "
                f"lr {scheduler.get_last_lr()[0]:.2e}")

    dist.all_reduce(tot_loss)
    tot_loss /= world_size * args.steps_per_epoch
    log(f"epoch {epoch} mean train loss {tot_loss.item():.4f}")

    # quick held-out check on the last 5% of the corpus
    model.eval()
    with torch.no_grad():
        val = corpus[-10_000:]
        xs = val[:-1][: (len(val) - 1) // args.seq_len * args.seq_len].view(-1, args.seq_len)
        ys = val[1:][: xs.numel()].view(-1, args.seq_len)
        vloss = F.cross_entropy(model.module(xs).reshape(-1, args.vocab), ys.reshape(-1))
    log(f"epoch {epoch} val loss {vloss.item():.4f} ppl {vloss.exp().item():.2f}")

if rank == 0:
    os.makedirs("checkpoints", exist_ok=True)
    torch.save(model.module.state_dict(), "checkpoints/convlm.pt")
    log(f"done in {time.time() - t_start:.1f}s")
dist.barrier()
dist.destroy_process_group()
