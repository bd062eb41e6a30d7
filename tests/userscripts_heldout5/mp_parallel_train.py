"""Small Megatron-style training run: tensor/data parallel groups, column-parallel MLP.

torchrun --nproc-per-node 2 mp_parallel_train.py --tensor-model-parallel-size 1
"""
import argparse
import math
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--tensor-model-parallel-size", type=int, default=1)
parser.add_argument("--hidden", type=int, default=64)
parser.add_argument("--ffn", type=int, default=256)
parser.add_argument("--vocab", type=int, default=97)
parser.add_argument("--seq-len", type=int, default=16)
parser.add_argument("--micro-batch-size", type=int, default=8)
parser.add_argument("--train-iters", type=int, default=60)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--log-interval", type=int, default=10)
parser.add_argument("--seed", type=int, default=1234)
parser.add_argument("--pg-timeout", type=int, default=10)
args = parser.parse_args()

dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
rank = dist.get_rank()
world_size = dist.get_world_size()

tp = args.tensor_model_parallel_size
assert world_size % tp == 0, "world size must be divisible by tensor parallel size"
dp = world_size // tp

# ---------------------------------------------------------------------------
# parallel state (every rank must create every group, in the same order)
# ---------------------------------------------------------------------------
_TP_GROUP = None
_DP_GROUP = None
for i in range(dp):
    ranks = list(range(i * tp, (i + 1) * tp))
    g = dist.new_group(ranks)
    if rank in ranks:
        _TP_GROUP = g
for j in range(tp):
    ranks = list(range(j, world_size, tp))
    g = dist.new_group(ranks)
    if rank in ranks:
        _DP_GROUP = g

tp_rank = dist.get_rank(_TP_GROUP)
dp_rank = dist.get_rank(_DP_GROUP)
if rank == 0:
    print(f"> initialized tensor model parallel with size {tp}")
    print(f"> initialized data parallel with size {dp}")

torch.manual_seed(args.seed + 100 * tp_rank)  # different shards of the weights per tp rank


class _CopyToTP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        if tp > 1:
            dist.all_reduce(g, group=_TP_GROUP)
        return g


class _ReduceFromTP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        if tp > 1:
            x = x.clone()
            dist.all_reduce(x, group=_TP_GROUP)
        return x

    @staticmethod
    def backward(ctx, g):
        return g


class ParallelMLP(nn.Module):
    def __init__(self, hidden, ffn):
        super().__init__()
        assert ffn % tp == 0
        self.fc1 = nn.Linear(hidden, ffn // tp)        # column parallel
        self.fc2 = nn.Linear(ffn // tp, hidden, bias=False)  # row parallel
        self.bias2 = nn.Parameter(torch.zeros(hidden))

    def forward(self, x):
        x = _CopyToTP.apply(x)
        h = F.gelu(self.fc1(x))
        return _ReduceFromTP.apply(self.fc2(h)) + self.bias2


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(args.vocab, args.hidden)
        self.pos = nn.Parameter(torch.zeros(args.seq_len, args.hidden))
        self.ln1 = nn.LayerNorm(args.hidden)
        self.mlp = ParallelMLP(args.hidden, args.ffn)
        self.ln2 = nn.LayerNorm(args.hidden)
        self.head = nn.Linear(args.hidden, args.vocab)

    def forward(self, tokens):
        x = self.emb(tokens) + self.pos
        x = x + self.mlp(self.ln1(x))
        return self.head(self.ln2(x))


def get_batch(it):
    """Only the first rank of each tensor-parallel group reads data; it is then
    broadcast to the other ranks of the group (as in megatron's broadcast_data)."""
    if tp_rank == 0:
        g = torch.Generator().manual_seed(args.seed + 7919 * it + dp_rank)
        start = torch.randint(0, args.vocab, (args.micro_batch_size, 1), generator=g)
        step = torch.randint(1, 5, (args.micro_batch_size, 1), generator=g)
        seq = (start + step * torch.arange(args.seq_len + 1)) % args.vocab
    else:
        seq = torch.empty(args.micro_batch_size, args.seq_len + 1, dtype=torch.long)
    dist.broadcast(seq, src=0, group=_TP_GROUP)
    return seq[:, :-1].contiguous(), seq[:, 1:].contiguous()


def allreduce_dp_grads(model):
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad, group=_DP_GROUP)
            p.grad.div_(dp)


def sync_replicated_params(model):
    # non-tensor-parallel params start identical on every rank
    for name, p in model.named_parameters():
        if not name.startswith("mlp.fc"):
            dist.broadcast(p.data, src=0)


model = TinyLM()
sync_replicated_params(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
warmup = 10


def lr_at(it):
    if it < warmup:
        return args.lr * (it + 1) / warmup
    return 0.5 * args.lr * (1 + math.cos(math.pi * (it - warmup) / (args.train_iters - warmup)))


t0 = time.time()
losses = []
for it in range(args.train_iters):
    for group in optimizer.param_groups:
        group["lr"] = lr_at(it)
    tokens, labels = get_batch(it)
    logits = model(tokens)
    loss = F.cross_entropy(logits.view(-1, args.vocab), labels.view(-1))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    allreduce_dp_grads(model)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()

    reported = loss.detach().clone()
    dist.all_reduce(reported, group=_DP_GROUP)
    losses.append(reported.item() / dp)
    if rank == 0 and (it + 1) % args.log_interval == 0:
        elapsed = (time.time() - t0) * 1000 / args.log_interval
        print(f" iteration {it + 1:6d}/{args.train_iters} | lm loss {sum(losses[-args.log_interval:]) / args.log_interval:.4f}"
              f" | lr {lr_at(it):.3e} | elapsed time per iteration (ms): {elapsed:.1f}", flush=True)
        t0 = time.time()

if rank == 0:
    os.makedirs("checkpoints", exist_ok=True)
    torch.save({"iteration": args.train_iters, "model": model.state_dict(), "args": vars(args)},
               os.path.join("checkpoints", "mp_rank_00_model.pt"))
    print("saved checkpoint to checkpoints/mp_rank_00_model.pt")
dist.barrier()
dist.destroy_process_group()
