"""Sparse-feature CTR model with EMA weights and rolling checkpoints.

Rank 0 owns the EMA copy (it is as big as the model) and writes a checkpoint at
the end of every epoch; the evaluation at the end of each epoch runs on all
ranks with the EMA weights taken from that checkpoint.

    torchrun --nproc-per-node 2 ema_checkpointing.py --ckpt-dir checkpoints/ctr
"""
import argparse
import copy
import glob
import os
import shutil
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

N_HASH, DIM, FIELDS = 100_000, 128, 8


class CheckpointManager:
    def __init__(self, root, keep_last=2, is_writer=False):
        self.root = root
        self.keep_last = keep_last
        self.is_writer = is_writer
        if is_writer:
            os.makedirs(root, exist_ok=True)

    def path(self, epoch):
        return os.path.join(self.root, f"epoch-{epoch:03d}.pt")

    def save(self, epoch, state):
        assert self.is_writer, "only the writer rank saves"
        t0 = time.time()
        torch.save(state, self.path(epoch))
        self._prune()
        return time.time() - t0

    def _prune(self):
        ckpts = sorted(glob.glob(os.path.join(self.root, "epoch-*.pt")))
        for old in ckpts[: -self.keep_last]:
            os.remove(old)

    def wait_for(self, epoch, poll=0.05, timeout=120.0):
        path = self.path(epoch)
        deadline = time.time() + timeout
        while not (os.path.exists(path) and os.path.getsize(path) > 0):
            if time.time() > deadline:
                raise TimeoutError(f"checkpoint {path} did not appear")
            time.sleep(poll)
        return path

    def load(self, epoch):
        return torch.load(self.wait_for(epoch), map_location="cpu")


class CTRModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.EmbeddingBag(N_HASH, DIM, mode="sum")
        self.mlp = nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, ids):
        return self.mlp(self.emb(ids)).squeeze(-1)


class EMA:
    def __init__(self, model, decay=0.99):
        self.decay = decay
        self.shadow = copy.deepcopy(model).eval()
        for p in self.shadow.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def update(self, model):
        for s, p in zip(self.shadow.parameters(), model.parameters()):
            s.lerp_(p, 1 - self.decay)


def synthetic_clicks(n, seed):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, N_HASH, (n, FIELDS), generator=g)
    clicked = ((ids % 7).sum(1) % 3 == 0).float()
    return ids, clicked


@torch.no_grad()
def evaluate(model, ids, labels, batch_size=512):
    model.eval()
    loss, n = 0.0, 0
    for i in range(0, len(ids), batch_size):
        logits = model(ids[i:i + batch_size])
        loss += F.binary_cross_entropy_with_logits(logits, labels[i:i + batch_size], reduction="sum").item()
        n += len(logits)
    return torch.tensor([loss, n], dtype=torch.float64)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ckpt-dir", default="checkpoints/ctr")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--steps-per-epoch", type=int, default=6)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--pg-timeout", type=float, default=10.0)
    args = p.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0 and os.path.isdir(args.ckpt_dir):
        shutil.rmtree(args.ckpt_dir)
    dist.barrier()

    torch.manual_seed(0)
    net = CTRModel()
    model = DDP(net)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    ema = EMA(net) if rank == 0 else None
    ckpt = CheckpointManager(args.ckpt_dir, is_writer=(rank == 0))

    train_ids, train_y = synthetic_clicks(args.steps_per_epoch * args.batch_size, seed=100 + rank)
    val_ids, val_y = synthetic_clicks(2048, seed=900 + rank)
    eval_net = CTRModel()

    for epoch in range(args.epochs):
        t0 = time.time()
        model.train()
        for step in range(args.steps_per_epoch):
            sl = slice(step * args.batch_size, (step + 1) * args.batch_size)
            loss = F.binary_cross_entropy_with_logits(model(train_ids[sl]), train_y[sl])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if ema is not None:
                ema.update(net)

        if rank == 0:
            secs = ckpt.save(epoch, {"epoch": epoch, "model": net.state_dict(),
                                     "ema": ema.shadow.state_dict(), "optim": opt.state_dict()})
            print(f"epoch {epoch}: train {time.time() - t0:.1f}s, checkpoint {secs:.1f}s", flush=True)
            eval_net.load_state_dict(ema.shadow.state_dict())
        else:
            eval_net.load_state_dict(ckpt.load(epoch)["ema"])

        stats = evaluate(eval_net, val_ids, val_y)
        dist.all_reduce(stats)
        if rank == 0:
            print(f"epoch {epoch}: ema val logloss {stats[0] / stats[1]:.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
