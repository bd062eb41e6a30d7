"""Curriculum training of a small GRU classifier (short sequences first).

    torchrun --nproc-per-node 2 curriculum_trainer.py
"""
import argparse
import json
import logging
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, Sampler

log = logging.getLogger("curriculum")
HERE = os.path.dirname(os.path.abspath(__file__))


class CurriculumDataset(Dataset):
    """Exposes only the examples whose difficulty is below the current threshold."""

    def __init__(self, path, start=0.35, step=0.2):
        with open(path) as f:
            self.all_rows = sorted((json.loads(l) for l in f), key=lambda r: r["difficulty"])
        self.start, self.step = start, step
        self.set_epoch(0)

    def set_epoch(self, epoch):
        thr = min(1.0, self.start + self.step * epoch)
        self.rows = [r for r in self.all_rows if r["difficulty"] <= thr]
        self.threshold = thr

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, idx):
        r = self.rows[idx]
        return torch.tensor(r["tokens"], dtype=torch.long), r["label"]


class CurriculumSampler(Sampler):
    """DistributedSampler fixes its length at construction; the curriculum pool
    grows every epoch, so re-read len(dataset) on each pass."""

    def __init__(self, dataset, rank, world, seed=0):
        self.dataset, self.rank, self.world, self.seed = dataset, rank, world, seed
        self.epoch = 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        n = len(self.dataset) - len(self.dataset) % self.world   # same count on every rank
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        order = torch.randperm(len(self.dataset), generator=g)[:n]
        return iter(order[self.rank::self.world].tolist())

    def __len__(self):
        return len(self.dataset) // self.world


def pad_collate(batch):
    toks, labels = zip(*batch)
    lens = torch.tensor([len(t) for t in toks])
    out = torch.zeros(len(toks), int(lens.max()), dtype=torch.long)
    for i, t in enumerate(toks):
        out[i, : len(t)] = t
    return out, lens, torch.tensor(labels)


class GRUClassifier(nn.Module):
    def __init__(self, vocab=500, dim=64, n_classes=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim, padding_idx=0)
        self.gru = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, n_classes)

    def forward(self, x, lens):
        h = self.emb(x)
        packed = nn.utils.rnn.pack_padded_sequence(h, lens, batch_first=True, enforce_sorted=False)
        _, last = self.gru(packed)
        return self.head(last[-1])


class Trainer:
    def __init__(self, args):
        self.args = args
        dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        torch.manual_seed(args.seed)
        torch.set_num_threads(1)

        self.dataset = CurriculumDataset(os.path.join(HERE, args.data))
        self.sampler = CurriculumSampler(self.dataset, self.rank, self.world, seed=args.seed)
        # workers are expensive to start (tokenised rows are copied into each one),
        # so keep them alive across epochs
        self.loader = DataLoader(
            self.dataset, batch_size=args.batch_size, sampler=self.sampler,
            num_workers=args.workers, persistent_workers=args.workers > 0,
            collate_fn=pad_collate, timeout=60 if args.workers > 0 else 0,
        )
        self.model = DDP(GRUClassifier())
        self.opt = torch.optim.Adam(self.model.parameters(), lr=args.lr)
        self.scheduler = torch.optim.lr_scheduler.StepLR(self.opt, step_size=2, gamma=0.5)
        self.history = []

    def train_epoch(self, epoch):
        self.dataset.set_epoch(epoch)
        self.sampler.set_epoch(epoch)
        self.model.train()
        tot_loss = torch.zeros(2)
        for step, (x, lens, y) in enumerate(self.loader):
            logits = self.model(x, lens)
            loss = F.cross_entropy(logits, y)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            tot_loss += torch.tensor([loss.item() * len(y), len(y)])
            if self.rank == 0 and step % 20 == 0:
                log.info("epoch %d step %d loss %.4f (threshold %.2f, %d examples)",
                         epoch, step, loss.item(), self.dataset.threshold, len(self.dataset))
        self.scheduler.step()
        dist.all_reduce(tot_loss)
        return (tot_loss[0] / tot_loss[1]).item()

    def save(self, epoch):
        if self.rank != 0:
            return
        os.makedirs(self.args.out_dir, exist_ok=True)
        torch.save({"epoch": epoch, "model": self.model.module.state_dict(),
                    "opt": self.opt.state_dict()}, os.path.join(self.args.out_dir, "last.pt"))

    def fit(self):
        for epoch in range(self.args.epochs):
            t = time.time()
            loss = self.train_epoch(epoch)
            self.history.append(loss)
            if self.rank == 0:
                log.info("epoch %d done: loss %.4f in %.1fs", epoch, loss, time.time() - t)
            self.save(epoch)
        dist.barrier()

    def close(self):
        dist.destroy_process_group()


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="data/curriculum/train.jsonl")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--pg-timeout", type=int, default=10)
    p.add_argument("--out-dir", default=os.path.join(HERE, "runs/curriculum"))
    return p.parse_args()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    trainer = Trainer(parse_args())
    try:
        trainer.fit()
    finally:
        trainer.close()
