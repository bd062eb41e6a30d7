"""Benchmark a few candidate architectures on the same data, one after another.

Lightning-style modules (training_step / validation_step / configure_optimizers)
driven by a small hand-written DDP loop, so it runs under plain torchrun.
Results for every candidate end up in results/compare.json.
"""
import argparse
import json
import os
import time
from dataclasses import dataclass, asdict
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


@dataclass
class HParams:
    name: str
    hidden: int = 64
    depth: int = 1
    lr: float = 1e-3
    aux_weight: float = 0.0   # weight of the auxiliary "coarse label" loss
    epochs: int = 2


CANDIDATES = [
    HParams("baseline_mlp", hidden=64, depth=1),
    HParams("deep_mlp", hidden=96, depth=3, lr=5e-4),
    HParams("deep_mlp_aux", hidden=96, depth=3, lr=5e-4, aux_weight=0.3),
]


class LitClassifier(nn.Module):
    def __init__(self, hp: HParams, in_dim=20, n_classes=8, n_coarse=2):
        super().__init__()
        self.hparams = hp
        layers, d = [], in_dim
        for _ in range(hp.depth):
            layers += [nn.Linear(d, hp.hidden), nn.ReLU()]
            d = hp.hidden
        self.backbone = nn.Sequential(*layers)
        self.head = nn.Linear(d, n_classes)
        # coarse head is part of every deep model so checkpoints stay interchangeable
        self.aux_head = nn.Linear(d, n_coarse) if hp.depth > 1 else None

    def forward(self, x):
        h = self.backbone(x)
        out = {"logits": self.head(h)}
        if self.aux_head is not None and self.hparams.aux_weight > 0:
            out["coarse"] = self.aux_head(h)
        return out

    def training_step(self, model, batch):
        x, y = batch
        out = model(x)
        loss = F.cross_entropy(out["logits"], y)
        if "coarse" in out:
            loss = loss + self.hparams.aux_weight * F.cross_entropy(out["coarse"], y % 2)
        return loss

    @torch.no_grad()
    def validation_step(self, batch):
        x, y = batch
        logits = self(x)["logits"]
        return torch.tensor([F.cross_entropy(logits, y, reduction="sum").item(),
                             (logits.argmax(1) == y).sum().item(), len(y)], dtype=torch.float64)

    def configure_optimizers(self, params):
        opt = torch.optim.Adam(params, lr=self.hparams.lr)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 20))
        return opt, sched


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(20, 8, generator=torch.Generator().manual_seed(99))
    x = torch.randn(n, 20, generator=g)
    y = (x @ w + 0.5 * torch.randn(n, 8, generator=g)).argmax(1)
    return TensorDataset(x, y)


def fit(module: LitClassifier, train_ds, val_ds, rank, world, bs):
    model = DDP(module)
    opt, sched = module.configure_optimizers(model.parameters())
    sampler = DistributedSampler(train_ds, num_replicas=world, rank=rank, shuffle=True, seed=7)
    train_dl = DataLoader(train_ds, batch_size=bs, sampler=sampler, drop_last=True)
    val_dl = DataLoader(val_ds, batch_size=512,
                        sampler=DistributedSampler(val_ds, num_replicas=world, rank=rank, shuffle=False))
    for epoch in range(module.hparams.epochs):
        sampler.set_epoch(epoch)
        model.train()
        for batch in train_dl:
            loss = module.training_step(model, batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
    module.eval()
    stats = torch.zeros(3, dtype=torch.float64)
    for batch in val_dl:
        stats += module.validation_step(batch)
    dist.all_reduce(stats)
    return {"val_loss": stats[0].item() / stats[2].item(), "val_acc": stats[1].item() / stats[2].item()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--out", default="results/compare.json")
    ap.add_argument("--only", default=None, help="comma separated candidate names")
    ap.add_argument("--pg-timeout", type=int, default=10)
    args = ap.parse_args()

    dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    train_ds, val_ds = make_data(4000, seed=0), make_data(1000, seed=1)

    candidates = CANDIDATES
    if args.only:
        keep = set(args.only.split(","))
        candidates = [c for c in CANDIDATES if c.name in keep]

    results = []
    for hp in candidates:
        torch.manual_seed(0)
        t0 = time.time()
        metrics = fit(LitClassifier(hp), train_ds, val_ds, rank, world, args.batch_size)
        metrics.update(asdict(hp), seconds=round(time.time() - t0, 2))
        results.append(metrics)
        if rank == 0:
            print(f"{hp.name:>14}: val_loss={metrics['val_loss']:.4f} "
                  f"val_acc={metrics['val_acc']:.3f} ({metrics['seconds']}s)", flush=True)

    if rank == 0:
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)
        best = max(results, key=lambda r: r["val_acc"])
        print(f"best candidate: {best['name']} ({best['val_acc']:.3f})", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
