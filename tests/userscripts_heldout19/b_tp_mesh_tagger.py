"""Token tagger with Megatron-style tensor parallel FFN blocks on a (dp, tp) DeviceMesh (DTensor)."""
import argparse
import json
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from b_common import arm_watchdog, fresh_run_dir, get_logger, init_distributed, seed_all, shutdown

NAME = "b_tp_mesh_tagger"
PAD, IGNORE = 0, -100


@dataclass
class Config:
    tp: int = 2
    vocab: int = 200
    n_tags: int = 6
    dim: int = 64
    ffn_mult: int = 4
    layers: int = 2
    min_len: int = 6
    max_len: int = 40
    train_size: int = 1200
    val_size: int = 200
    batch_size: int = 16
    epochs: int = 2
    lr: float = 2e-3
    seed: int = 11


def parse_args() -> Config:
    cfg = Config()
    p = argparse.ArgumentParser()
    for k, v in vars(cfg).items():
        p.add_argument(f"--{k.replace('_', '-')}", type=type(v), default=v)
    return Config(**vars(p.parse_args()))


class SyntheticTagging(Dataset):
    """Tag of a token depends on the token and its left neighbour (a toy POS-like task)."""

    def __init__(self, n, cfg: Config, seed):
        g = torch.Generator().manual_seed(seed)
        self.items = []
        for _ in range(n):
            L = int(torch.randint(cfg.min_len, cfg.max_len + 1, (1,), generator=g))
            toks = torch.randint(1, cfg.vocab, (L,), generator=g)
            prev = torch.cat([torch.zeros(1, dtype=torch.long), toks[:-1]])
            tags = (toks + (prev % 3)) % cfg.n_tags
            self.items.append((toks, tags))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def pad_collate(batch):
    L = max(len(t) for t, _ in batch)
    x = torch.full((len(batch), L), PAD, dtype=torch.long)
    y = torch.full((len(batch), L), IGNORE, dtype=torch.long)
    for i, (t, g) in enumerate(batch):
        x[i, : len(t)] = t
        y[i, : len(g)] = g
    return x, y


class FFNBlock(nn.Module):
    def __init__(self, dim, mult):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.w_in = nn.Linear(dim, dim * mult)
        self.w_out = nn.Linear(dim * mult, dim)

    def forward(self, h):
        return h + self.w_out(F.gelu(self.w_in(self.norm(h))))


class Tagger(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.emb = nn.Embedding(cfg.vocab, cfg.dim, padding_idx=PAD)
        self.pos = nn.Embedding(cfg.max_len, cfg.dim)
        self.blocks = nn.ModuleList(FFNBlock(cfg.dim, cfg.ffn_mult) for _ in range(cfg.layers))
        self.head = nn.Linear(cfg.dim, cfg.n_tags)

    def forward(self, x):
        h = self.emb(x) + self.pos(torch.arange(x.size(1)))
        for blk in self.blocks:
            h = blk(h)
        return self.head(h)


def tp_plan(cfg: Config):
    plan = {}
    for i in range(cfg.layers):
        plan[f"blocks.{i}.w_in"] = ColwiseParallel()
        plan[f"blocks.{i}.w_out"] = RowwiseParallel()
    return plan


def full_state_dict(model):
    return {k: (v.full_tensor() if isinstance(v, DTensor) else v).detach().clone() for k, v in model.state_dict().items()}


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    correct = total = 0
    for x, y in loader:
        pred = model(x).argmax(-1)
        m = y != IGNORE
        correct += (pred[m] == y[m]).sum().item()
        total += m.sum().item()
    model.train()
    return correct / max(total, 1)


def main():
    cfg = parse_args()
    arm_watchdog(200)
    rank, world = init_distributed()
    log = get_logger(NAME, rank)
    seed_all(cfg.seed)
    out = fresh_run_dir(NAME, rank)

    mesh = init_device_mesh("cpu", (world // cfg.tp, cfg.tp), mesh_dim_names=("dp", "tp"))
    log.info("mesh %s", mesh)
    model = parallelize_module(Tagger(cfg), mesh["tp"], tp_plan(cfg))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, foreach=False)

    train_ds = SyntheticTagging(cfg.train_size, cfg, cfg.seed)
    val_ds = SyntheticTagging(cfg.val_size, cfg, cfg.seed + 1)
    sampler = DistributedSampler(train_ds, num_replicas=world, rank=rank, shuffle=True, seed=cfg.seed)
    train_dl = DataLoader(train_ds, batch_size=cfg.batch_size, sampler=sampler, collate_fn=pad_collate)
    val_dl = DataLoader(val_ds, batch_size=64, collate_fn=pad_collate)

    history, t0 = [], time.time()
    for epoch in range(cfg.epochs):
        sampler.set_epoch(epoch)
        tot, n = 0.0, 0
        for step, (x, y) in enumerate(train_dl):
            logits = model(x)
            loss = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=IGNORE)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            tot += loss.item()
            n += 1
            if step % 20 == 0:
                log.info("epoch %d step %d loss %.4f", epoch, step, loss.item())
        acc = evaluate(model, val_dl)
        history.append({"epoch": epoch, "loss": tot / max(n, 1), "val_token_acc": acc, "elapsed": time.time() - t0})
        log.info("epoch %d mean loss %.4f val token acc %.4f", epoch, tot / max(n, 1), acc)
        state = full_state_dict(model)
        if rank == 0:
            torch.save({"model": state, "epoch": epoch, "config": vars(cfg)}, out / "tagger_full.pt")
        dist.barrier()

    if rank == 0:
        (out / "history.json").write_text(json.dumps(history, indent=1))
    shutdown()


if __name__ == "__main__":
    main()
