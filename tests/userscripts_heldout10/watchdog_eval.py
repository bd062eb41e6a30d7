# Lightning-style LitModule + hand-written DDP loop for a tiny char-level LM.
# A faulthandler watchdog dumps all stacks and exits if a step hangs, so a stuck
# job does not burn its whole allocation.
import argparse
import faulthandler
import math
import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

TEXT = ("the quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat "
        "and the bird sings a song about rivers mountains and the long road home ") * 60


class CharDataset(Dataset):
    def __init__(self, text, block):
        self.chars = sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(self.chars)}
        self.data = torch.tensor([self.stoi[c] for c in text], dtype=torch.long)
        self.block = block

    def __len__(self):
        return len(self.data) - self.block - 1

    def __getitem__(self, i):
        chunk = self.data[i: i + self.block + 1]
        return chunk[:-1], chunk[1:]


class LitCharLM(nn.Module):
    def __init__(self, vocab, dim=64, block=32, lr=3e-3):
        super().__init__()
        self.save_hparams = dict(vocab=vocab, dim=dim, block=block, lr=lr)
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(block, dim)
        layer = nn.TransformerEncoderLayer(dim, 4, dim * 2, dropout=0.0, batch_first=True)
        self.body = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(dim, vocab)
        self.register_buffer("mask", torch.triu(torch.full((block, block), float("-inf")), 1))

    def forward(self, x):
        T = x.shape[1]
        h = self.tok(x) + self.pos(torch.arange(T))
        h = self.body(h, mask=self.mask[:T, :T], is_causal=True)
        return self.head(h)

    def training_step(self, batch):
        x, y = batch
        logits = self(x)
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.parameters(), lr=self.save_hparams["lr"])
        return opt

    @torch.no_grad()
    def generate(self, idx, n_new, on_token=None):
        for _ in range(n_new):
            logits = self(idx[:, -self.save_hparams["block"]:])[:, -1]
            nxt = torch.multinomial(F.softmax(logits, -1), 1)
            idx = torch.cat([idx, nxt], 1)
            if on_token is not None:
                on_token()
        return idx


class Watchdog:
    """Re-armed on every heartbeat; if nothing happens for `timeout` seconds,
    dump every thread's stack to stderr and exit."""

    def __init__(self, timeout):
        self.timeout = timeout

    def beat(self):
        if self.timeout > 0:
            faulthandler.dump_traceback_later(self.timeout, exit=True)

    def stop(self):
        faulthandler.cancel_dump_traceback_later()


def sample_report(module, ds, watchdog, n_samples, n_new):
    """Rank-0 only: write a few samples so we can eyeball progress."""
    module.eval()
    torch.manual_seed(0)
    lines = []
    for s in range(n_samples):
        start = torch.tensor([[ds.stoi["t"]]])
        out = module.generate(start, n_new, on_token=watchdog.beat)
        lines.append("".join(ds.chars[i] for i in out[0].tolist()))
    module.train()
    return lines


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--max-steps", type=int, default=120)
    p.add_argument("--sample-every", type=int, default=40)
    p.add_argument("--n-samples", type=int, default=24)
    p.add_argument("--sample-len", type=int, default=1000)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--hang-timeout", type=float, default=5.0)
    p.add_argument("--pg-timeout", type=int, default=10)
    p.add_argument("--out-dir", default="runs/charlm")
    args = p.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    watchdog = Watchdog(args.hang_timeout)

    ds = CharDataset(TEXT, block=32)
    sampler = DistributedSampler(ds, shuffle=True, seed=0)
    loader = DataLoader(ds, batch_size=args.batch_size, sampler=sampler, drop_last=True)

    lit = LitCharLM(len(ds.chars))
    model = DDP(lit)
    opt = lit.configure_optimizers()
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=args.max_steps)

    step, epoch, t0 = 0, 0, time.time()
    watchdog.beat()
    while step < args.max_steps:
        sampler.set_epoch(epoch)
        for batch in loader:
            x, y = batch
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            watchdog.beat()

            if step % 10 == 0 and rank == 0:
                print(f"step {step} loss {loss.item():.3f} ({time.time() - t0:.1f}s)", flush=True)

            if step % args.sample_every == 0:
                if rank == 0:
                    os.makedirs(args.out_dir, exist_ok=True)
                    lines = sample_report(lit, ds, watchdog, args.n_samples, args.sample_len)
                    with open(os.path.join(args.out_dir, f"samples_{step}.txt"), "w") as f:
                        f.write("\n\n".join(lines))
                    torch.save(lit.state_dict(), os.path.join(args.out_dir, "last.pt"))
                dist.barrier()  # keep the other ranks in step while rank 0 reports
                watchdog.beat()
            if step >= args.max_steps:
                break
        epoch += 1

    watchdog.stop()
    if rank == 0:
        print(f"done in {time.time() - t0:.1f}s, final loss {loss.item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
