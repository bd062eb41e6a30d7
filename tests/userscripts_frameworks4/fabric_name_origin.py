"""Guess the language of origin of a surname with a character-level GRU.

Lightning Fabric, DDP on CPU (gloo).  Jobs on the shared queue get pre-empted,
so every epoch ends with a checkpoint and a restarted job resumes from the last
one (--resume).

    torchrun --nproc-per-node 2 fabric_name_origin.py      # resumes from ./fabric_name_origin_last.pt if present
"""
import argparse
import os
import random
import time
from dataclasses import asdict, dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn.functional as F
from lightning.fabric import Fabric
from lightning.fabric.strategies import DDPStrategy
from torch import nn
from torch.utils.data import DataLoader, Dataset

from plfab_common import arm_hang_watchdog, fresh_outdir, say

NAME = "fabric_name_origin"
OUT = fresh_outdir(NAME)
arm_hang_watchdog(80)

SYLLABLES = {
    "italian": ["ri", "cci", "no", "lli", "ba", "ro", "ssi", "ni", "to", "gia"],
    "german": ["sch", "mid", "berg", "mann", "hof", "er", "wald", "stein", "kr", "au"],
    "japanese": ["ta", "ka", "shi", "mo", "to", "ya", "ma", "naka", "su", "ki"],
    "polish": ["kow", "ski", "wicz", "szcz", "rz", "cz", "ew", "ak", "dz", "yk"],
    "irish": ["mc", "o'", "gall", "agh", "ey", "kin", "sull", "ivan", "brien", "nell"],
}
LANGS = sorted(SYLLABLES)
CHARS = "abcdefghijklmnopqrstuvwxyz'"


@dataclass
class Config:
    epochs: int = 6
    batch_size: int = 64
    lr: float = 4e-3
    hidden: int = 64
    n_names: int = 3000
    resume: str = "fabric_name_origin_last.pt"
    seed: int = 21


class NameDataset(Dataset):
    def __init__(self, n, seed):
        rng = random.Random(seed)
        self.items = []
        for _ in range(n):
            lang = rng.choice(LANGS)
            name = "".join(rng.choice(SYLLABLES[lang]) for _ in range(rng.randint(2, 4)))
            self.items.append((name, LANGS.index(lang)))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        name, y = self.items[i]
        return torch.tensor([CHARS.index(c) + 1 for c in name]), y


def pad_collate(batch):
    seqs, ys = zip(*batch)
    lengths = torch.tensor([len(s) for s in seqs])
    return nn.utils.rnn.pad_sequence(seqs, batch_first=True), lengths, torch.tensor(ys)


class CharGRU(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.emb = nn.Embedding(len(CHARS) + 1, 32, padding_idx=0)
        self.gru = nn.GRU(32, hidden, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * hidden, len(LANGS))

    def forward(self, x, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(self.emb(x), lengths, batch_first=True, enforce_sorted=False)
        _, h = self.gru(packed)
        return self.out(torch.cat([h[0], h[1]], dim=-1))


@torch.no_grad()
def evaluate(fabric, model, loader):
    model.eval()
    stats = torch.zeros(2)
    for x, lengths, y in loader:
        stats += torch.tensor([(model(x, lengths).argmax(-1) == y).sum().item(), len(y)])
    stats = fabric.all_reduce(stats, reduce_op="sum")
    model.train()
    return (stats[0] / stats[1]).item()


def parse_args() -> Config:
    p = argparse.ArgumentParser()
    for k, v in asdict(Config()).items():
        p.add_argument(f"--{k.replace('_', '-')}", type=type(v), default=v)
    return Config(**vars(p.parse_args()))


def main():
    cfg = parse_args()
    t0 = time.time()
    fabric = Fabric(accelerator="cpu", devices=2,
                    strategy=DDPStrategy(timeout=timedelta(seconds=30), process_group_backend="gloo"))
    fabric.launch()
    fabric.seed_everything(cfg.seed)

    model = CharGRU(cfg.hidden)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    start_epoch, best_acc = 0, 0.0
    if cfg.resume and os.path.exists(cfg.resume) and fabric.is_global_zero:
        state = torch.load(cfg.resume, map_location="cpu")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start_epoch, best_acc = state["epoch"] + 1, state["best_acc"]
        say(f"resumed from {cfg.resume}: epoch {state['epoch']}, best acc {best_acc:.3f}")
    model, optimizer = fabric.setup(model, optimizer)

    train_dl = DataLoader(NameDataset(cfg.n_names, cfg.seed), batch_size=cfg.batch_size, shuffle=True,
                          collate_fn=pad_collate)
    val_dl = DataLoader(NameDataset(600, cfg.seed + 1), batch_size=128, collate_fn=pad_collate)
    test_dl = DataLoader(NameDataset(600, cfg.seed + 2), batch_size=128, collate_fn=pad_collate)
    train_dl, val_dl, test_dl = fabric.setup_dataloaders(train_dl, val_dl, test_dl)
    (OUT / "ckpt").mkdir(exist_ok=True)

    for epoch in range(start_epoch, cfg.epochs):
        train_dl.sampler.set_epoch(epoch)
        running = 0.0
        for step, (x, lengths, y) in enumerate(train_dl):
            loss = F.cross_entropy(model(x, lengths), y)
            optimizer.zero_grad(set_to_none=True)
            fabric.backward(loss)
            fabric.clip_gradients(model, optimizer, max_norm=1.0)
            optimizer.step()
            running += loss.item()
        val_acc = evaluate(fabric, model, val_dl)
        best_acc = max(best_acc, val_acc)
        fabric.print(f"epoch {epoch}: train loss {running / (step + 1):.3f}  val acc {val_acc:.3f}")
        state = {"model": model, "optimizer": optimizer, "epoch": epoch, "best_acc": best_acc}
        fabric.save(OUT / "ckpt" / "last.pt", state)

    test_acc = evaluate(fabric, model, test_dl)
    say(f"test accuracy {test_acc:.3f} (best val {best_acc:.3f})")
    fabric.barrier()
    if dist.is_initialized():
        dist.destroy_process_group()
    say(f"finished in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
