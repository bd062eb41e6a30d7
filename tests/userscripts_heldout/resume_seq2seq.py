"""GRU encoder/decoder on a toy sequence-reversal task, resumable across restarts.

Every rank keeps a small json with its position in the run so a restarted job
picks up at the same epoch with the same data layout.

    torchrun --nproc-per-node 2 resume_seq2seq.py --run copy-task
"""
import argparse
import json
import os
import time
from dataclasses import asdict, dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB, SEQ, BOS = 40, 12, 1


@dataclass
class RankState:
    run: str
    world_size: int
    rank: int
    epoch: int = 0
    global_step: int = 0
    sampler_seed: int = 1234
    lr: float = 1e-3


def state_path(state_dir, run, rank):
    return os.path.join(state_dir, run, f"rank{rank}.json")


def load_state(state_dir, run, rank):
    path = state_path(state_dir, run, rank)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return RankState(**json.load(f))


def save_state(state, state_dir):
    path = state_path(state_dir, state.run, state.rank)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(asdict(state), f)
    os.replace(tmp, path)


class Seq2Seq(nn.Module):
    def __init__(self, d=96):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, d)
        self.enc = nn.GRU(d, d, batch_first=True)
        self.dec = nn.GRU(d, d, batch_first=True)
        self.out = nn.Linear(d, VOCAB)

    def forward(self, src, tgt_in):
        _, h = self.enc(self.emb(src))
        y, _ = self.dec(self.emb(tgt_in), h)
        return self.out(y)


def batches(step_seed, n_batches, batch_size):
    g = torch.Generator().manual_seed(step_seed)
    for _ in range(n_batches):
        src = torch.randint(2, VOCAB, (batch_size, SEQ), generator=g)
        tgt = src.flip(1)
        tgt_in = torch.cat([torch.full((batch_size, 1), BOS), tgt[:, :-1]], 1)
        yield src, tgt_in, tgt


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--run", default="copy-task")
    p.add_argument("--state-dir", default="run_state")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--steps-per-epoch", type=int, default=48)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--fresh", action="store_true", help="ignore saved state")
    p.add_argument("--pg-timeout", type=float, default=10.0)
    args = p.parse_args()

    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    state = None if args.fresh else load_state(args.state_dir, args.run, rank)
    if state is None:
        state = RankState(run=args.run, world_size=world_size, rank=rank)
    else:
        print(f"[rank {rank}] resuming {state.run} at epoch {state.epoch} step {state.global_step}", flush=True)

    dist.init_process_group("gloo", rank=state.rank, world_size=state.world_size,
                            timeout=timedelta(seconds=args.pg_timeout))

    torch.manual_seed(0)
    model = DDP(Seq2Seq())
    opt = torch.optim.Adam(model.parameters(), lr=state.lr)
    for epoch in range(state.epoch, args.epochs):
        t0 = time.time()
        seed = state.sampler_seed + 1000 * epoch + rank
        total = torch.zeros(2)
        for src, tgt_in, tgt in batches(seed, args.steps_per_epoch, args.batch_size):
            logits = model(src, tgt_in)
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), tgt.reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            state.global_step += 1
            total += torch.tensor([loss.item(), 1.0])
        dist.all_reduce(total)
        state.epoch = epoch + 1
        save_state(state, args.state_dir)
        if rank == 0:
            print(f"epoch {epoch} loss {total[0] / total[1]:.4f} ({time.time() - t0:.1f}s)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
