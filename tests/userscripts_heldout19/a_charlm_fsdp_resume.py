"""Character-level LM trained with FSDP2 (fully_shard), sharded checkpoints with
torch.distributed.checkpoint, and a resume check at the end of the run."""
import argparse
import gc
import math
import os
import time
from dataclasses import dataclass, asdict

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from a_common import get_logger, setup, teardown

NAME = "charlm_fsdp_resume"
WORDS = ("the quick brown fox jumps over lazy dogs while seven wizards quietly "
         "hex jolly pumpkins and a vexed judge boxes frozen quail").split()


@dataclass
class Config:
    seq_len: int = 32
    d_model: int = 64
    n_blocks: int = 2
    batch_size: int = 16
    lr: float = 3e-3
    steps: int = 40
    save_every: int = 20
    log_every: int = 10
    seed: int = 7


def make_corpus(n_chars, seed):
    g = torch.Generator().manual_seed(seed)
    out, n = [], 0
    while n < n_chars:
        w = WORDS[int(torch.randint(len(WORDS), (1,), generator=g))]
        out.append(w)
        n += len(w) + 1
    return " ".join(out)


class CharWindows(Dataset):
    def __init__(self, text, seq_len, vocab):
        self.ids = torch.tensor([vocab[c] for c in text], dtype=torch.long)
        self.seq_len = seq_len

    def __len__(self):
        return (len(self.ids) - 1) // self.seq_len

    def __getitem__(self, i):
        s = i * self.seq_len
        chunk = self.ids[s:s + self.seq_len + 1]
        return chunk[:-1], chunk[1:]


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, 4, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class CharLM(nn.Module):
    def __init__(self, vocab_size, cfg):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, cfg.d_model)
        self.pos = nn.Parameter(torch.zeros(cfg.seq_len, cfg.d_model))
        self.blocks = nn.ModuleList(Block(cfg.d_model) for _ in range(cfg.n_blocks))
        self.head = nn.Linear(cfg.d_model, vocab_size)

    def forward(self, x):
        T = x.shape[1]
        mask = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
        h = self.tok(x) + self.pos[:T]
        for b in self.blocks:
            h = b(h, mask)
        return self.head(h)


def build(vocab_size, cfg, mesh):
    torch.manual_seed(cfg.seed)
    model = CharLM(vocab_size, cfg)
    for blk in model.blocks:
        fully_shard(blk, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.01)
    return model, opt


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    tot = torch.zeros(2, dtype=torch.float64)
    for x, y in loader:
        logits = model(x)
        tot[0] += F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="sum").item()
        tot[1] += y.numel()
    model.train()
    dist.all_reduce(tot)
    return (tot[0] / tot[1]).item()


def main():
    p = argparse.ArgumentParser()
    for k, v in asdict(Config()).items():
        p.add_argument(f"--{k.replace('_', '-')}", type=type(v), default=v)
    cfg = Config(**vars(p.parse_args()))
    rank, world, out = setup(NAME, watchdog_s=160, seed=cfg.seed)
    log = get_logger(NAME, rank)
    mesh = init_device_mesh("cpu", (world,))

    text = make_corpus(40_000, cfg.seed)
    vocab = {c: i for i, c in enumerate(sorted(set(text)))}
    split = int(0.9 * len(text))
    train_ds = CharWindows(text[:split], cfg.seq_len, vocab)
    val_ds = CharWindows(text[split:], cfg.seq_len, vocab)
    train_sampler = DistributedSampler(train_ds, shuffle=True, seed=cfg.seed, drop_last=True)
    train_dl = DataLoader(train_ds, cfg.batch_size, sampler=train_sampler, drop_last=True)
    val_dl = DataLoader(val_ds, 64, sampler=DistributedSampler(val_ds, shuffle=False, drop_last=True))
    log.info("vocab=%d train_windows=%d val_windows=%d", len(vocab), len(train_ds), len(val_ds))

    model, opt = build(len(vocab), cfg, mesh)
    step, epoch, t0 = 0, 0, time.time()
    stats = torch.zeros(2, dtype=torch.float64)
    last_ckpt = None
    while step < cfg.steps:
        train_sampler.set_epoch(epoch)
        for x, y in train_dl:
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            stats += torch.tensor([loss.item() * y.numel(), y.numel()], dtype=torch.float64)
            step += 1
            if step % cfg.log_every == 0:
                work = dist.all_reduce(stats, async_op=True)
                lr = opt.param_groups[0]["lr"]
                elapsed = time.time() - t0
                work.wait()
                mean = (stats[0] / stats[1]).item()
                if rank == 0:
                    log.info("step %d loss %.4f ppl %.2f lr %.1e (%.1fs)", step, mean, math.exp(mean), lr, elapsed)
                stats.zero_()
            if step % cfg.save_every == 0:
                last_ckpt = os.path.join(out, f"step_{step:05d}")
                msd, osd = get_state_dict(model, opt)
                dcp.save({"model": msd, "optim": osd}, checkpoint_id=last_ckpt)
                log.info("saved sharded checkpoint %s", last_ckpt)
            if step >= cfg.steps:
                break
        epoch += 1

    val_trained = evaluate(model, val_dl)
    fresh, fresh_opt = build(len(vocab), cfg, mesh)
    msd, osd = get_state_dict(fresh, fresh_opt)
    state = {"model": msd, "optim": osd}
    dcp.load(state, checkpoint_id=last_ckpt)
    set_state_dict(fresh, fresh_opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    val_resumed = evaluate(fresh, val_dl)
    gap = torch.tensor([abs(val_trained - val_resumed)])
    dist.all_reduce(gap, op=dist.ReduceOp.MAX)
    if rank == 0:
        log.info("val loss trained=%.5f resumed=%.5f max gap=%.2e", val_trained, val_resumed, gap.item())
    assert gap.item() < 1e-4, f"resume mismatch {gap.item()}"

    del model, opt, fresh, fresh_opt, msd, osd, state
    gc.collect()
    teardown()


if __name__ == "__main__":
    main()
