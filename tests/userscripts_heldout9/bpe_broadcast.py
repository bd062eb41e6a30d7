# train_tagger.py -- topic classifier on support tickets, torchrun launch
# torchrun --nproc-per-node 2 bpe_broadcast.py
import argparse
import glob
import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))

parser = argparse.ArgumentParser()
parser.add_argument("--corpus", default=os.path.join(HERE, "data", "tickets"))
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--bs", type=int, default=16)
parser.add_argument("--accum", type=int, default=2)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--max-len", type=int, default=24)
parser.add_argument("--pg-timeout", type=int, default=10)
args = parser.parse_args()

dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
rank = dist.get_rank()
world_size = dist.get_world_size()
torch.manual_seed(1234)


def p0(*a):
    if rank == 0:
        print(*a, flush=True)


# ---------------------------------------------------------------- data
TOPICS = sorted(os.path.basename(d) for d in glob.glob(os.path.join(args.corpus, "*")))
samples = []
for label, topic in enumerate(TOPICS):
    with open(os.path.join(args.corpus, topic, "tickets.txt")) as f:
        samples += [(line.strip(), label) for line in f if line.strip()]
p0(f"{len(samples)} tickets, topics: {TOPICS}")


def build_tokenizer(lines):
    # the tokenizer lives with the preprocessing tools, not in the package
    sys.path.insert(0, os.path.join(HERE, "tools"))
    from textprep import SubwordTokenizer

    t0 = time.time()
    tok = SubwordTokenizer(max_vocab=600).fit(lines)
    print(f"[rank 0] tokenizer fitted: {len(tok)} pieces in {time.time() - t0:.2f}s", flush=True)
    return tok


# fit the tokenizer once on rank 0 and ship the fitted object to everybody
if rank == 0:
    holder = [build_tokenizer([s for s, _ in samples])]
else:
    holder = [None]
dist.broadcast_object_list(holder, src=0)
tokenizer = holder[0]
print(f"[rank {rank}] got tokenizer with {len(tokenizer)} pieces", flush=True)

X = torch.tensor([tokenizer.encode(s, args.max_len) for s, _ in samples])
Y = torch.tensor([y for _, y in samples])
dataset = TensorDataset(X, Y)
sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True)
loader = DataLoader(dataset, batch_size=args.bs, sampler=sampler, drop_last=True)


# ---------------------------------------------------------------- model
class BagOfPieces(nn.Module):
    def __init__(self, vocab, dim, n_out):
        super().__init__()
        self.emb = nn.EmbeddingBag(vocab, dim, mode="mean", padding_idx=0)
        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Dropout(0.1), nn.Linear(dim, n_out))

    def forward(self, x):
        return self.mlp(self.emb(x))


model = DDP(BagOfPieces(len(tokenizer), 64, len(TOPICS)))
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
steps_per_epoch = len(loader) // args.accum
scheduler = torch.optim.lr_scheduler.OneCycleLR(
    optimizer, max_lr=args.lr, total_steps=max(1, steps_per_epoch * args.epochs)
)

# ---------------------------------------------------------------- train
for epoch in range(args.epochs):
    sampler.set_epoch(epoch)
    model.train()
    running = torch.zeros(3)
    optimizer.zero_grad()
    for step, (xb, yb) in enumerate(loader):
        last_micro = (step + 1) % args.accum == 0
        ctx = model.no_sync() if not last_micro else torch.enable_grad()
        with ctx:
            out = model(xb)
            loss = F.cross_entropy(out, yb) / args.accum
            loss.backward()
        if last_micro:
            optimizer.step()
            if scheduler.last_epoch + 1 < scheduler.total_steps:
                scheduler.step()
            optimizer.zero_grad()
        running += torch.tensor([loss.item() * args.accum * len(yb), (out.argmax(1) == yb).sum().item(), len(yb)])
    dist.all_reduce(running)
    p0(f"epoch {epoch}: loss {running[0] / running[2]:.4f} acc {running[1] / running[2]:.3f} "
       f"lr {scheduler.get_last_lr()[0]:.2e}")

if rank == 0:
    os.makedirs(os.path.join(HERE, "out"), exist_ok=True)
    torch.save(model.module.state_dict(), os.path.join(HERE, "out", "tagger.pt"))
dist.barrier()
dist.destroy_process_group()
