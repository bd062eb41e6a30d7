"""Contrastive pre-training of a small encoder on pre-sharded embedding dumps.

Self-supervised NT-Xent on two noisy views of every row, plus a supervised
contrastive term (SupCon) on the labelled rows, contrasted against the labelled
rows of *all* ranks.

    torchrun --nproc-per-node 2 supcon_pretrain.py --output_dir runs/supcon
"""
import argparse
import dataclasses
import os
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import List

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


@dataclass
class TrainingArguments:
    data_dir: str = "data"
    output_dir: str = "runs/supcon"
    num_train_epochs: int = 3
    per_device_train_batch_size: int = 16
    learning_rate: float = 1e-3
    weight_decay: float = 1e-4
    temperature: float = 0.2
    supcon_weight: float = 0.5
    logging_steps: int = 10
    seed: int = 42
    pg_timeout: int = 10


def parse_args() -> TrainingArguments:
    p = argparse.ArgumentParser()
    for f in dataclasses.fields(TrainingArguments):
        flags = sorted({f"--{f.name}", f"--{f.name.replace('_', '-')}"})
        p.add_argument(*flags, dest=f.name, type=f.type, default=f.default)
    return TrainingArguments(**vars(p.parse_args()))


class GatherLayer(torch.autograd.Function):
    """all_gather that keeps the gradient path to every rank's features."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        out = [torch.zeros_like(x) for _ in range(dist.get_world_size(group))]
        dist.all_gather(out, x.contiguous(), group=group)
        return tuple(out)

    @staticmethod
    def backward(ctx, *grads):
        all_grads = torch.stack(grads)
        dist.all_reduce(all_grads, group=ctx.group)
        return all_grads[dist.get_rank(ctx.group)], None


class Encoder(nn.Module):
    def __init__(self, d_in=32, d_hid=128, d_proj=64):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(d_in, d_hid), nn.LayerNorm(d_hid), nn.GELU(),
                                      nn.Linear(d_hid, d_hid), nn.GELU())
        self.projector = nn.Sequential(nn.Linear(d_hid, d_hid), nn.GELU(), nn.Linear(d_hid, d_proj))

    def forward(self, x):
        return F.normalize(self.projector(self.backbone(x)), dim=-1)


def nt_xent(z1, z2, t):
    z = torch.cat([z1, z2])
    sim = z @ z.t() / t
    sim.fill_diagonal_(-1e9)
    n = z1.shape[0]
    target = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)])
    return F.cross_entropy(sim, target)


def supcon(anchor, a_lab, contrast, c_lab, t):
    sim = anchor @ contrast.t() / t
    pos = (a_lab[:, None] == c_lab[None, :]).float()
    logprob = sim - torch.logsumexp(sim, dim=1, keepdim=True)
    return -((pos * logprob).sum(1) / pos.sum(1).clamp(min=1)).mean()


def augment(x, gen):
    noise = torch.randn(x.shape, generator=gen) * 0.3
    keep = (torch.rand(x.shape, generator=gen) > 0.1).float()
    return (x + noise) * keep


class LoggingCallback:
    def on_step_end(self, state):
        if state["rank"] == 0 and state["step"] % state["args"].logging_steps == 0:
            print(f"[{time.strftime('%H:%M:%S')}] epoch {state['epoch']} step {state['step']} "
                  f"loss {state['loss']:.4f} (ntxent {state['l_ssl']:.3f} supcon {state['l_sup']:.3f})",
                  flush=True)

    def on_epoch_end(self, state):
        if state["rank"] == 0:
            print(f"epoch {state['epoch']} finished, mean loss {state['epoch_loss']:.4f}", flush=True)


class CheckpointCallback:
    def on_step_end(self, state):
        pass

    def on_epoch_end(self, state):
        if state["rank"] == 0:
            os.makedirs(state["args"].output_dir, exist_ok=True)
            torch.save(state["model"].module.state_dict(),
                       os.path.join(state["args"].output_dir, f"encoder-epoch{state['epoch']}.pt"))


def main():
    args = parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    # separate group for the feature gather so it does not queue behind DDP buckets
    contrast_group = dist.new_group(list(range(world)))
    torch.manual_seed(args.seed)

    arr = np.loadtxt(os.path.join(args.data_dir, f"shard-{rank:05d}.csv"), delimiter=",", skiprows=1)
    feats = torch.tensor(arr[:, :-1], dtype=torch.float32)
    labels = torch.tensor(arr[:, -1], dtype=torch.long)

    model = DDP(Encoder(d_in=feats.shape[1]))
    opt = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, weight_decay=args.weight_decay)
    bs = args.per_device_train_batch_size
    steps_per_epoch = len(feats) // bs
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.learning_rate,
                                                total_steps=steps_per_epoch * args.num_train_epochs)
    callbacks: List = [LoggingCallback(), CheckpointCallback()]
    gen = torch.Generator().manual_seed(args.seed + rank)
    state = {"args": args, "rank": rank, "model": model, "step": 0}

    for epoch in range(args.num_train_epochs):
        perm = torch.randperm(len(feats), generator=gen)
        epoch_loss = 0.0
        for i in range(steps_per_epoch):
            idx = perm[i * bs:(i + 1) * bs]
            x, y = feats[idx], labels[idx]
            z1, z2 = model(torch.cat([augment(x, gen), augment(x, gen)])).chunk(2)
            loss_ssl = nt_xent(z1, z2, args.temperature)

            # labelled rows of the whole global batch are the contrast set
            z_all = torch.cat(GatherLayer.apply(z1, contrast_group))
            y_all = [torch.zeros_like(y) for _ in range(world)]
            dist.all_gather(y_all, y, group=contrast_group)
            y_all = torch.cat(y_all)
            lab, lab_all = y >= 0, y_all >= 0
            loss_sup = torch.zeros(())
            if lab.sum() >= 2:
                loss_sup = supcon(z1[lab], y[lab], z_all[lab_all], y_all[lab_all], args.temperature)
                loss = loss_ssl + args.supcon_weight * loss_sup
            else:
                loss = loss_ssl

            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
            sched.step()
            epoch_loss += loss.item()
            state.update(epoch=epoch, step=state["step"] + 1, loss=loss.item(),
                         l_ssl=loss_ssl.item(), l_sup=loss_sup.item())
            for cb in callbacks:
                cb.on_step_end(state)
        state["epoch_loss"] = epoch_loss / steps_per_epoch
        for cb in callbacks:
            cb.on_epoch_end(state)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
