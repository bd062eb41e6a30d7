"""Small char-level LM trainer with resumable checkpoints.

    torchrun --nproc-per-node 2 trainer_resume.py --resume auto

Checkpoints from earlier runs live in ./checkpoints/ (see setup/trainer_resume.sh).
Only rank 0 reads the checkpoint; DDP broadcasts rank 0's weights when it wraps the model.
"""
import argparse
import glob
import os
import random
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))


class CharDataset(Dataset):
    def __init__(self, text, block):
        chars = sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(chars)}
        self.vocab_size = len(chars)
        self.data = torch.tensor([self.stoi[c] for c in text], dtype=torch.long)
        self.block = block

    def __len__(self):
        return (len(self.data) - 1) // self.block

    def __getitem__(self, i):
        chunk = self.data[i * self.block: i * self.block + self.block + 1]
        return chunk[:-1], chunk[1:]


class TinyGRULM(nn.Module):
    def __init__(self, vocab, emb=64, hidden=128):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb)
        self.rnn = nn.GRU(emb, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, x):
        h, _ = self.rnn(self.emb(x))
        return self.out(h)


class Trainer:
    def __init__(self, args):
        self.args = args
        self.rank = int(os.environ["RANK"])
        self.world_size = int(os.environ["WORLD_SIZE"])
        self.is_main = self.rank == 0
        self.ckpt_dir = os.path.join(HERE, args.ckpt_dir)
        self.epoch = 0
        self.global_step = 0
        self.best_loss = float("inf")

        text = open(os.path.join(HERE, "data", "corpus.txt")).read()
        self.ds = CharDataset(text, args.block)
        self.sampler = DistributedSampler(self.ds, num_replicas=self.world_size, rank=self.rank, seed=args.seed)
        self.loader = DataLoader(self.ds, batch_size=args.batch_size, sampler=self.sampler, drop_last=True)

        self.raw_model = TinyGRULM(self.ds.vocab_size)
        self.optimizer = torch.optim.Adam(self.raw_model.parameters(), lr=args.lr)
        self.scheduler = torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=2, gamma=0.5)

        if args.resume and self.is_main:
            path = self._find_checkpoint(args.resume)
            if path:
                self.load_checkpoint(path)
        # DDP broadcasts rank 0's parameters to the other ranks here
        self.model = DDP(self.raw_model)
        self._sync_counters()

    # ------------------------------------------------------------ checkpoints
    def _find_checkpoint(self, resume):
        if resume != "auto":
            return resume
        found = sorted(glob.glob(os.path.join(self.ckpt_dir, "epoch_*.pt")))
        return found[-1] if found else None

    def save_checkpoint(self):
        os.makedirs(self.ckpt_dir, exist_ok=True)
        state = {
            "model": self.raw_model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "epoch": self.epoch,
            "global_step": self.global_step,
            "best_loss": self.best_loss,
            "rng": {
                "python": random.getstate(),
                "numpy": np.random.get_state(),
                "torch": torch.get_rng_state(),
            },
        }
        path = os.path.join(self.ckpt_dir, f"epoch_{self.epoch:03d}.pt")
        torch.save(state, path + ".tmp")
        os.replace(path + ".tmp", path)
        print(f"[rank0] saved {path}", flush=True)

    def load_checkpoint(self, path):
        print(f"[rank0] resuming from {path}", flush=True)
        state = torch.load(path, map_location="cpu")
        self.raw_model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.epoch = state["epoch"] + 1
        self.global_step = state["global_step"]
        self.best_loss = state["best_loss"]
        random.setstate(state["rng"]["python"])
        np.random.set_state(state["rng"]["numpy"])
        torch.set_rng_state(state["rng"]["torch"])

    def _sync_counters(self):
        t = torch.tensor([self.epoch, self.global_step], dtype=torch.long)
        dist.broadcast(t, src=0)
        self.epoch, self.global_step = int(t[0]), int(t[1])

    # ------------------------------------------------------------ loop
    def train_epoch(self):
        self.model.train()
        self.sampler.set_epoch(self.epoch)
        total, n = 0.0, 0
        for x, y in self.loader:
            logits = self.model(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.optimizer.step()
            self.global_step += 1
            total += loss.item()
            n += 1
        self.scheduler.step()
        stats = torch.tensor([total, n], dtype=torch.float64)
        dist.all_reduce(stats)
        return (stats[0] / stats[1]).item()

    def fit(self):
        while self.epoch < self.args.epochs:
            t0 = time.time()
            loss = self.train_epoch()
            if self.is_main:
                print(f"epoch {self.epoch} loss {loss:.4f} step {self.global_step} "
                      f"lr {self.scheduler.get_last_lr()[0]:.1e} ({time.time() - t0:.1f}s)", flush=True)
                self.best_loss = min(self.best_loss, loss)
                self.save_checkpoint()
            dist.barrier()
            self.epoch += 1


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--block", type=int, default=64)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ckpt-dir", default="checkpoints")
    p.add_argument("--resume", default="auto")
    p.add_argument("--pg-timeout", type=int, default=10)
    args = p.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    np.random.seed(args.seed)
    trainer = Trainer(args)
    trainer.fit()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
