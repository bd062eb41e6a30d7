"""Lightning-style module driven by a small hand-written loop.

Every rank snapshots its own state (model, optimizer, RNG, data cursor) into
ckpt/rank<k>/step_<N>.pt every --save-every steps, written atomically
(tmp file + os.replace).  On restart each rank picks up its latest snapshot,
so a preempted job continues where it stopped.

    torchrun --nproc-per-node 2 resume_latest.py
"""
import argparse
import glob
import os
import re
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


class LitClassifier(nn.Module):
    def __init__(self, d_in=20, hidden=64, n_classes=4, lr=1e-2):
        super().__init__()
        self.lr = lr
        self.backbone = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(),
                                      nn.Linear(hidden, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, n_classes)

    def forward(self, x):
        return self.head(self.backbone(x))

    def training_step(self, batch, model=None):
        x, y = batch
        logits = (model or self)(x)
        return F.cross_entropy(logits, y)

    def validation_step(self, batch):
        x, y = batch
        logits = self(x)
        return (logits.argmax(1) == y).float().sum(), torch.tensor(float(len(y)))

    def configure_optimizers(self, max_steps):
        opt = torch.optim.Adam(self.parameters(), lr=self.lr)
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: min(1.0, (s + 1) / 50) * max(0.0, 1 - s / max_steps))
        return opt, sched


class SyntheticStream:
    """Infinite stream of batches; the cursor makes it resumable."""

    def __init__(self, rank, batch_size, seed=0):
        self.rank, self.bs, self.seed = rank, batch_size, seed
        self.cursor = 0
        g = torch.Generator().manual_seed(seed)
        self.centers = torch.randn(4, 20, generator=g) * 2

    def next_batch(self):
        g = torch.Generator().manual_seed(self.seed * 100003 + self.rank * 7919 + self.cursor)
        y = torch.randint(0, 4, (self.bs,), generator=g)
        x = self.centers[y] + torch.randn(self.bs, 20, generator=g)
        self.cursor += 1
        return x, y


def ckpt_dir(root, rank):
    return os.path.join(root, f"rank{rank}")


def latest_checkpoint(root, rank):
    paths = glob.glob(os.path.join(ckpt_dir(root, rank), "step_*.pt"))
    if not paths:
        return None
    return max(paths, key=lambda p: int(re.search(r"step_(\d+)\.pt$", p).group(1)))


def save_snapshot(root, rank, step, module, opt, sched, stream):
    d = ckpt_dir(root, rank)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, f"step_{step:06d}.pt")
    torch.save({"step": step, "model": module.state_dict(), "optim": opt.state_dict(),
                "sched": sched.state_dict(), "cursor": stream.cursor,
                "rng": torch.get_rng_state()}, path + ".tmp")
    os.replace(path + ".tmp", path)
    # keep the two most recent snapshots
    old = sorted(glob.glob(os.path.join(d, "step_*.pt")))[:-2]
    for p in old:
        os.remove(p)
    return path


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--ckpt-root", default="ckpt")
    p.add_argument("--max-steps", type=int, default=3000)
    p.add_argument("--save-every", type=int, default=200)
    p.add_argument("--val-every", type=int, default=500)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--pg-timeout", type=int, default=10)
    return p.parse_args()


@torch.no_grad()
def validate(module, rank):
    module.eval()
    stream = SyntheticStream(rank + 1000, 256, seed=1)
    correct, total = torch.tensor(0.0), torch.tensor(0.0)
    for _ in range(4):
        c, n = module.validation_step(stream.next_batch())
        correct += c
        total += n
    module.train()
    stats = torch.stack([correct, total])
    dist.all_reduce(stats)
    return (stats[0] / stats[1]).item()


def main():
    args = parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank = dist.get_rank()
    torch.set_num_threads(1)
    torch.manual_seed(0)

    lit = LitClassifier()
    opt, sched = lit.configure_optimizers(args.max_steps)
    stream = SyntheticStream(rank, args.batch_size)
    start_step = 0

    resume_from = latest_checkpoint(args.ckpt_root, rank)
    if resume_from is not None:
        state = torch.load(resume_from, map_location="cpu", weights_only=False)
        lit.load_state_dict(state["model"])
        opt.load_state_dict(state["optim"])
        sched.load_state_dict(state["sched"])
        stream.cursor = state["cursor"]
        torch.set_rng_state(state["rng"])
        start_step = state["step"]
        print(f"[rank{rank}] resumed from {resume_from} at step {start_step}", flush=True)

    model = DDP(lit)
    lit.train()
    for step in range(start_step + 1, args.max_steps + 1):
        loss = lit.training_step(stream.next_batch(), model=model)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()

        if step % 100 == 0 and rank == 0:
            print(f"step {step} loss {loss.item():.4f} lr {sched.get_last_lr()[0]:.2e}",
                  flush=True)
        if step % args.save_every == 0:
            save_snapshot(args.ckpt_root, rank, step, lit, opt, sched, stream)
        if step % args.val_every == 0:
            acc = validate(lit, rank)
            if rank == 0:
                print(f"step {step} val acc {acc:.3f}", flush=True)

    if rank == 0:
        torch.save(lit.state_dict(), "final_model.pt")
        print("done, wrote final_model.pt", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
