"""Tabular churn model written Lightning-style, driven by a small hand-written fit loop.

    torchrun --nproc-per-node 2 lit_style_tabular.py --max-epochs 4
"""
import argparse
import json
import math
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def make_churn_table(n, n_features=24, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, n_features, generator=g)
    w = torch.randn(n_features, generator=g)
    logits = x @ w + 0.5 * torch.randn(n, generator=g)
    return TensorDataset(x, (logits > 0).long())


class LitChurn(nn.Module):
    """Mirrors the LightningModule hooks so the code ports over later."""

    def __init__(self, n_features=24, hidden=96, lr=3e-3, weight_decay=1e-4):
        super().__init__()
        self.hparams = dict(n_features=n_features, hidden=hidden, lr=lr, weight_decay=weight_decay)
        self.net = nn.Sequential(
            nn.Linear(n_features, hidden), nn.SiLU(),
            nn.Linear(hidden, hidden), nn.SiLU(),
            nn.Linear(hidden, 2),
        )
        self.current_epoch = 0
        self.global_step = 0
        self._val_outputs = []
        self.logged = {}

    # -- "trainer" properties ------------------------------------------------
    @property
    def global_rank(self):
        return dist.get_rank() if dist.is_initialized() else 0

    @property
    def world_size(self):
        return dist.get_world_size() if dist.is_initialized() else 1

    def log(self, name, value, sync_dist=False):
        value = torch.as_tensor(value, dtype=torch.float32).detach().clone()
        if sync_dist and self.world_size > 1:
            dist.all_reduce(value)
            value /= self.world_size
        self.logged[name] = value.item()

    # -- hooks ----------------------------------------------------------------
    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self._val_outputs.append({
            "loss": F.cross_entropy(logits, y, reduction="sum").item(),
            "correct": (logits.argmax(-1) == y).sum().item(),
            "n": len(y),
        })

    def on_validation_epoch_end(self):
        n = sum(o["n"] for o in self._val_outputs)
        loss = sum(o["loss"] for o in self._val_outputs) / n
        acc = sum(o["correct"] for o in self._val_outputs) / n
        self.log("val_loss", loss, sync_dist=True)
        self.log("val_acc", acc, sync_dist=True)
        if self.global_rank == 0:
            per_rank = [None] * self.world_size
            dist.all_gather_object(per_rank, {"rank": self.global_rank, "n": n, "acc": acc})
            table = "  ".join(f"r{r['rank']}:{r['acc']:.3f}(n={r['n']})" for r in per_rank)
            print(f"[epoch {self.current_epoch}] val_loss={self.logged['val_loss']:.4f} "
                  f"val_acc={self.logged['val_acc']:.3f} | {table}", flush=True)
        self._val_outputs.clear()

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.parameters(), lr=self.hparams["lr"],
                                weight_decay=self.hparams["weight_decay"])
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=100)
        return opt, sched


def fit(module, train_ds, val_ds, max_epochs, batch_size):
    rank, world = module.global_rank, module.world_size
    train_sampler = DistributedSampler(train_ds, num_replicas=world, rank=rank, shuffle=True)
    val_sampler = DistributedSampler(val_ds, num_replicas=world, rank=rank, shuffle=False)
    train_dl = DataLoader(train_ds, batch_size=batch_size, sampler=train_sampler)
    val_dl = DataLoader(val_ds, batch_size=256, sampler=val_sampler)

    model = DDP(module)
    opt, sched = module.configure_optimizers()
    for epoch in range(max_epochs):
        module.current_epoch = epoch
        train_sampler.set_epoch(epoch)
        model.train()
        t0 = time.time()
        for batch_idx, batch in enumerate(train_dl):
            # route through DDP so gradients are reduced
            x, y = batch
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            module.global_step += 1
        module.log("train_loss", loss, sync_dist=True)

        model.eval()
        with torch.no_grad():
            for batch_idx, batch in enumerate(val_dl):
                module.validation_step(batch, batch_idx)
        module.on_validation_epoch_end()
        if rank == 0:
            print(f"  epoch {epoch} took {time.time() - t0:.2f}s train_loss={module.logged['train_loss']:.4f}",
                  flush=True)
    return module.logged


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--max-epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--pg-timeout", type=float, default=10.0)
    args = p.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    torch.manual_seed(7)
    module = LitChurn()
    metrics = fit(module, make_churn_table(4096, seed=1), make_churn_table(1024, seed=2),
                  args.max_epochs, args.batch_size)
    if module.global_rank == 0:
        print(json.dumps({k: round(v, 4) for k, v in metrics.items()}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
