"""Tiny causal LM on pre-tokenized uint16 shards, Trainer + callbacks.

torchrun --nproc-per-node 2 token_lm.py
"""
import argparse
import json
import mmap
import os
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset

HERE = os.path.dirname(os.path.abspath(__file__))


class TokenShard(Dataset):
    """Random fixed-length windows from one pre-tokenized shard.

    Small shards are read into RAM, large ones are memory-mapped so we don't
    blow up host memory with the full web dump.
    """

    def __init__(self, path, seq_len, samples_per_epoch, preload_limit_mb=8, seed=0):
        self.path, self.seq_len, self.n = path, seq_len, samples_per_epoch
        self.seed = seed
        size_mb = os.path.getsize(path) / 2**20
        if size_mb <= preload_limit_mb:
            self._mm = None
            self.tokens = np.fromfile(path, dtype=np.uint16)
        else:
            self._fh = open(path, "rb")
            self._mm = mmap.mmap(self._fh.fileno(), 0, access=mmap.ACCESS_READ)
            self.tokens = np.frombuffer(self._mm, dtype=np.uint16)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        rng = np.random.default_rng(self.seed * 1_000_003 + i)
        start = int(rng.integers(0, len(self.tokens) - self.seq_len - 1))
        chunk = torch.from_numpy(self.tokens[start: start + self.seq_len + 1].astype(np.int64))
        return chunk[:-1], chunk[1:]


class TinyLM(nn.Module):
    def __init__(self, vocab, dim=96, layers=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.rnn = nn.GRU(dim, dim, num_layers=layers, batch_first=True)
        self.out = nn.Linear(dim, vocab)

    def forward(self, x):
        h, _ = self.rnn(self.emb(x))
        return self.out(h)


class Callback:
    def on_train_begin(self, trainer): pass
    def on_step_end(self, trainer, loss): pass
    def on_epoch_end(self, trainer, metrics): pass


class LogCallback(Callback):
    def __init__(self, every=10):
        self.every = every

    def on_step_end(self, trainer, loss):
        if trainer.rank == 0 and trainer.global_step % self.every == 0:
            print(f"step {trainer.global_step} loss {loss:.4f}", flush=True)

    def on_epoch_end(self, trainer, metrics):
        if trainer.rank == 0:
            print(f"epoch {trainer.epoch} " + " ".join(f"{k}={v:.4f}" for k, v in metrics.items()), flush=True)


class CheckpointCallback(Callback):
    def __init__(self, out_dir):
        self.out_dir = out_dir

    def on_epoch_end(self, trainer, metrics):
        if trainer.rank == 0:
            os.makedirs(self.out_dir, exist_ok=True)
            torch.save({"model": trainer.model.module.state_dict(), "epoch": trainer.epoch},
                       os.path.join(self.out_dir, "last.pt"))


class Trainer:
    def __init__(self, args, callbacks=()):
        self.args = args
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.callbacks = list(callbacks)
        manifest = json.load(open(os.path.join(args.data_dir, "manifest.json")))
        shards = sorted(manifest["shards"])[self.rank::self.world]
        assert len(shards) == 1, f"expected one shard per rank, got {shards}"
        self.dataset = TokenShard(os.path.join(args.data_dir, shards[0]), args.seq_len,
                                  args.samples_per_epoch, seed=self.rank)
        # fork + OpenMP thread pools deadlocked on us before, so spawn the workers
        self.loader = DataLoader(self.dataset, batch_size=args.batch_size, shuffle=True,
                                 num_workers=args.num_workers, multiprocessing_context="spawn",
                                 persistent_workers=True, drop_last=True)
        torch.manual_seed(1234)
        self.model = DDP(TinyLM(manifest["vocab_size"]))
        self.opt = torch.optim.Adam(self.model.parameters(), lr=args.lr)
        self.global_step, self.epoch = 0, 0

    def _emit(self, name, *a):
        for cb in self.callbacks:
            getattr(cb, name)(self, *a)

    def train_epoch(self):
        self.model.train()
        tot, n, t0 = torch.zeros(()), 0, time.time()
        for x, y in self.loader:
            logits = self.model(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
            self.global_step += 1
            tot += loss.detach()
            n += 1
            self._emit("on_step_end", loss.item())
        stats = torch.stack([tot, torch.tensor(float(n))])
        dist.all_reduce(stats)
        return {"loss": (stats[0] / stats[1]).item(), "sec": time.time() - t0}

    def fit(self):
        self._emit("on_train_begin")
        for self.epoch in range(self.args.epochs):
            metrics = self.train_epoch()
            self._emit("on_epoch_end", metrics)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", default=os.path.join(HERE, "data", "tokens"))
    ap.add_argument("--out-dir", default=os.path.join(HERE, "checkpoints"))
    ap.add_argument("--seq-len", type=int, default=32)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--samples-per-epoch", type=int, default=320)
    ap.add_argument("--num-workers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--pg-timeout", type=int, default=10)
    args = ap.parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    trainer = Trainer(args, [LogCallback(), CheckpointCallback(args.out_dir)])
    trainer.fit()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
