"""Token-budgeted text classifier with a sharded (ZeRO-1) optimizer.

Each rank reads its own corpus file; snapshots are taken every
`snapshot_every_tokens` tokens so checkpoints are spaced by work done,
not by wall-clock or steps.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset

from ho18_runtime import get_logger, init_distributed, output_dir, seed_everything, shutdown_distributed

NAME = "token_snapshot_zero"
log = get_logger(NAME)

VOCAB = 512
PAD = 0
CORPORA = {            # corpus name -> (n docs, min len, max len)
    "headlines": (400, 8, 24),
    "abstracts": (400, 40, 90),
}


@dataclass
class RunCfg:
    batch: int = 16
    max_steps: int = 40
    dim: int = 64
    lr: float = 2e-3
    snapshot_every_tokens: int = 6000
    snapshot_owner: int = 0


def synth_corpus(name: str, seed: int) -> List[torch.Tensor]:
    n, lo, hi = CORPORA[name]
    g = torch.Generator().manual_seed(seed)
    docs = []
    for _ in range(n):
        length = int(torch.randint(lo, hi + 1, (1,), generator=g))
        docs.append(torch.randint(1, VOCAB, (length,), generator=g))
    return docs


class DocDataset(Dataset):
    def __init__(self, docs: List[torch.Tensor]):
        self.docs = docs

    def __len__(self):
        return len(self.docs)

    def __getitem__(self, i):
        doc = self.docs[i]
        label = int(doc[: len(doc) // 2].float().mean() > VOCAB / 2)
        return doc, label


def pad_collate(batch):
    docs, labels = zip(*batch)
    width = max(len(d) for d in docs)
    ids = torch.full((len(docs), width), PAD, dtype=torch.long)
    for row, d in enumerate(docs):
        ids[row, : len(d)] = d
    return ids, (ids != PAD), torch.tensor(labels)


class BagClassifier(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, dim, padding_idx=PAD)
        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, 2))

    def forward(self, ids, mask):
        h = self.emb(ids) * mask.unsqueeze(-1)
        pooled = h.sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
        return self.mlp(pooled)


class TokenBudgetSnapshots:
    """Hook: called after every optimizer step with the batch that was used."""

    def __init__(self, cfg: RunCfg, out: Path):
        self.cfg, self.out = cfg, out
        self.tokens_seen = 0
        self.next_at = cfg.snapshot_every_tokens
        self.taken = 0

    def after_step(self, trainer: "Trainer", mask: torch.Tensor) -> None:
        self.tokens_seen += int(mask.sum())
        if self.tokens_seen >= self.next_at:
            self.next_at += self.cfg.snapshot_every_tokens
            self._take(trainer)

    def _take(self, trainer: "Trainer") -> None:
        state = trainer.full_state(owner=self.cfg.snapshot_owner)
        if state is not None:
            torch.save(state, self.out / f"snap_{self.taken:03d}.pt")
        self.taken += 1


class Trainer:
    def __init__(self, cfg: RunCfg, rank: int, world: int, hooks):
        self.cfg, self.rank, self.hooks = cfg, rank, hooks
        corpus = sorted(CORPORA)[rank % len(CORPORA)]
        self.loader = DataLoader(DocDataset(synth_corpus(corpus, seed=11 + rank)), batch_size=cfg.batch,
                                 shuffle=True, collate_fn=pad_collate,
                                 generator=torch.Generator().manual_seed(rank))
        self.model = DDP(BagClassifier(cfg.dim))
        self.opt = ZeroRedundancyOptimizer(self.model.parameters(), optimizer_class=torch.optim.AdamW, lr=cfg.lr)
        log.info("corpus=%s docs=%d", corpus, len(self.loader.dataset))

    def full_state(self, owner: int):
        self.opt.consolidate_state_dict(to=owner)
        if self.rank != owner:
            return None
        return {"model": self.model.module.state_dict(), "optim": self.opt.state_dict()}

    def batches(self) -> Iterator:
        while True:
            yield from self.loader

    def fit(self) -> None:
        for step, (ids, mask, y) in zip(range(self.cfg.max_steps), self.batches()):
            self.opt.zero_grad()
            loss = F.cross_entropy(self.model(ids, mask), y)
            loss.backward()
            self.opt.step()
            for h in self.hooks:
                h.after_step(self, mask)
            if step % 10 == 0:
                log.info("step %d loss %.4f", step, loss.item())


def main():
    cfg = RunCfg()
    out = output_dir(NAME)
    info = init_distributed()
    seed_everything(3)
    snaps = TokenBudgetSnapshots(cfg, out)
    Trainer(cfg, info.rank, info.world_size, [snaps]).fit()
    log.info("finished, %d snapshots, %d tokens", snaps.taken, snaps.tokens_seen)
    shutdown_distributed()


if __name__ == "__main__":
    main()
