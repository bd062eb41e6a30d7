"""MoCo-style self-supervised pretraining on variable-length accelerometer recordings.

Two random crops of each recording are the positive pair; negatives come from a
memory bank (queue) of momentum-encoder keys gathered from all ranks every step.
"""
import argparse
import copy
import logging
import os
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, default_collate
from torch.utils.data.distributed import DistributedSampler

logger = logging.getLogger("moco")


@dataclass
class Config:
    crop: int = 64
    dim: int = 64
    queue_size: int = 2048
    momentum: float = 0.99
    temperature: float = 0.1
    batch_size: int = 64
    epochs: int = 3
    lr: float = 0.03
    ckpt: str = "moco_ckpt.pt"


class Recordings(Dataset):
    """Synthetic 3-axis recordings of 6 activities; lengths vary from 40 to 160 samples."""

    def __init__(self, n, crop, seed, train=True):
        g = torch.Generator().manual_seed(seed)
        self.crop, self.train = crop, train
        self.labels = torch.randint(0, 6, (n,), generator=g)
        self.lengths = torch.randint(40, 161, (n,), generator=g)
        self.phase = torch.rand(n, 3, generator=g) * 6.28

    def __len__(self):
        return len(self.labels)

    def signal(self, i):
        t = torch.arange(int(self.lengths[i])).float()
        freq = 0.05 + 0.04 * self.labels[i].float()
        x = torch.sin(freq * t[None] + self.phase[i][:, None]) + 0.3 * torch.randn(3, len(t))
        return x

    def __getitem__(self, i):
        x = self.signal(i)
        if not self.train:
            return F.pad(x, (0, max(0, self.crop - x.size(1))))[:, :self.crop], self.labels[i]
        if x.size(1) < self.crop:
            return None  # too short for a full crop, skip this recording
        a, b = torch.randint(0, x.size(1) - self.crop + 1, (2,))
        v1, v2 = x[:, a:a + self.crop], x[:, b:b + self.crop]
        return v1 * (1 + 0.1 * torch.randn(3, 1)), v2 * (1 + 0.1 * torch.randn(3, 1))


def skip_none_collate(batch):
    return default_collate([b for b in batch if b is not None])


def make_encoder(dim):
    return nn.Sequential(
        nn.Conv1d(3, 32, 7, padding=3), nn.BatchNorm1d(32), nn.ReLU(),
        nn.Conv1d(32, 64, 5, padding=2, stride=2), nn.BatchNorm1d(64), nn.ReLU(),
        nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, dim))


@torch.no_grad()
def concat_all_gather(t):
    out = [torch.ones_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(out, t)
    return torch.cat(out)


class MemoryBank:
    def __init__(self, dim, size):
        self.keys = F.normalize(torch.randn(size, dim), dim=1)
        self.ptr = 0

    @torch.no_grad()
    def enqueue(self, k):
        k = concat_all_gather(k)
        idx = (self.ptr + torch.arange(len(k))) % len(self.keys)
        self.keys[idx] = k
        self.ptr = int(idx[-1] + 1) % len(self.keys)


@torch.no_grad()
def knn_eval(encoder, loader, world):
    encoder.eval()
    feats, labels = [], []
    for x, y in loader:
        feats.append(F.normalize(encoder(x), dim=1))
        labels.append(y)
    feats, labels = torch.cat(feats), torch.cat(labels)
    all_f = [torch.empty_like(feats) for _ in range(world)]
    all_y = [torch.empty_like(labels) for _ in range(world)]
    dist.all_gather(all_f, feats)
    dist.all_gather(all_y, labels)
    all_f, all_y = torch.cat(all_f), torch.cat(all_y)
    sim = all_f @ all_f.T
    sim.fill_diagonal_(-2)
    nn_idx = sim.topk(5, dim=1).indices
    pred = all_y[nn_idx].mode(dim=1).values
    encoder.train()
    return (pred == all_y).float().mean().item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=Config.epochs)
    ap.add_argument("--pg-timeout", type=int, default=10)
    args = ap.parse_args()
    cfg = Config(epochs=args.epochs)
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s r{rank} %(levelname)s %(message)s")
    if rank != 0:
        logger.setLevel(logging.WARNING)
    try:
        torch.manual_seed(42 + rank)
        torch.set_num_threads(1)
        train_ds = Recordings(4096, cfg.crop, seed=0)
        val_ds = Recordings(512, cfg.crop, seed=1, train=False)
        sampler = DistributedSampler(train_ds, shuffle=True, seed=0)
        loader = DataLoader(train_ds, batch_size=cfg.batch_size, sampler=sampler,
                            collate_fn=skip_none_collate, drop_last=True)
        val_loader = DataLoader(val_ds, batch_size=128, sampler=DistributedSampler(val_ds, shuffle=False))

        torch.manual_seed(0)  # identical init on every rank
        encoder_q = DDP(make_encoder(cfg.dim))
        encoder_k = copy.deepcopy(encoder_q.module).requires_grad_(False)
        bank = MemoryBank(cfg.dim, cfg.queue_size)
        opt = torch.optim.SGD(encoder_q.parameters(), lr=cfg.lr, momentum=0.9, weight_decay=1e-4)
        warmup = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=len(loader))
        cosine = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=(cfg.epochs - 1) * len(loader))
        sched = torch.optim.lr_scheduler.SequentialLR(opt, [warmup, cosine], milestones=[len(loader)])
        scaler = torch.amp.GradScaler("cpu")
        start = 0
        if os.path.exists(cfg.ckpt):
            st = torch.load(cfg.ckpt, map_location="cpu")
            encoder_q.module.load_state_dict(st["q"]); encoder_k.load_state_dict(st["k"])
            opt.load_state_dict(st["opt"]); sched.load_state_dict(st["sched"]); scaler.load_state_dict(st["scaler"])
            bank.keys, bank.ptr, start = st["bank"], st["ptr"], st["epoch"] + 1
            logger.info("resumed from epoch %d", start)

        for epoch in range(start, cfg.epochs):
            sampler.set_epoch(epoch)
            for step, (x1, x2) in enumerate(loader):
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    q = F.normalize(encoder_q(x1).float(), dim=1)
                    with torch.no_grad():
                        for pk, pq in zip(encoder_k.parameters(), encoder_q.module.parameters()):
                            pk.mul_(cfg.momentum).add_(pq.detach(), alpha=1 - cfg.momentum)
                        k = F.normalize(encoder_k(x2).float(), dim=1)
                    l_pos = (q * k).sum(1, keepdim=True)
                    l_neg = q @ bank.keys.T
                    logits = torch.cat([l_pos, l_neg], 1) / cfg.temperature
                    loss = F.cross_entropy(logits, torch.zeros(len(q), dtype=torch.long))
                bank.enqueue(k)
                opt.zero_grad(set_to_none=True)
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
                sched.step()
                if step % 10 == 0:
                    logger.info("ep %d it %d loss %.4f batch %d", epoch, step, loss.item(), len(q))
            acc = knn_eval(encoder_q.module, val_loader, world)
            logger.info("epoch %d kNN acc %.3f", epoch, acc)
            if rank == 0:
                torch.save({"q": encoder_q.module.state_dict(), "k": encoder_k.state_dict(),
                            "opt": opt.state_dict(), "sched": sched.state_dict(),
                            "scaler": scaler.state_dict(), "bank": bank.keys, "ptr": bank.ptr,
                            "epoch": epoch}, cfg.ckpt)
            dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
