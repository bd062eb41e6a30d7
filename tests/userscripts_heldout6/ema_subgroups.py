"""LightningModule-style autoencoder with a hand-written DDP loop, EMA weights and callbacks.

A separate gloo group is used for the (small) metric reductions so they never queue
behind gradient traffic on the default group.

    torchrun --nproc-per-node 2 ema_subgroups.py
"""
import argparse
import copy
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class LitAutoEncoder(nn.Module):
    def __init__(self, in_dim=32, hidden=64, latent=8, lr=1e-3, grad_ckpt=True):
        super().__init__()
        self.hparams = dict(in_dim=in_dim, hidden=hidden, latent=latent, lr=lr)
        self.encoder = nn.Sequential(nn.Linear(in_dim, hidden), nn.LayerNorm(hidden), nn.SiLU(),
                                     nn.Linear(hidden, latent))
        self.decoder = nn.Sequential(nn.Linear(latent, hidden), nn.SiLU(), nn.Linear(hidden, in_dim))
        self.grad_ckpt = grad_ckpt

    def forward(self, x):
        if self.grad_ckpt and self.training:
            z = checkpoint(self.encoder, x, use_reentrant=False)
        else:
            z = self.encoder(x)
        return self.decoder(z)

    def training_step(self, batch):
        (x,) = batch
        return F.mse_loss(self(x), x)

    def validation_step(self, batch):
        (x,) = batch
        return F.mse_loss(self(x), x, reduction="sum"), x.numel()

    def configure_optimizers(self, total_steps):
        decay = [p for n, p in self.named_parameters() if p.ndim >= 2]
        no_decay = [p for n, p in self.named_parameters() if p.ndim < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                 {"params": no_decay, "weight_decay": 0.0}], lr=self.hparams["lr"])
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=self.hparams["lr"], total_steps=total_steps)
        return opt, sched


class EMA:
    def __init__(self, model, decay=0.99):
        self.decay = decay
        self.shadow = copy.deepcopy(model).eval()
        for p in self.shadow.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def update(self, model):
        for s, p in zip(self.shadow.parameters(), model.parameters()):
            s.mul_(self.decay).add_(p.detach(), alpha=1 - self.decay)


class Callback:
    def on_train_batch_end(self, loop, loss): ...
    def on_validation_end(self, loop, metrics): ...


class ThroughputLogger(Callback):
    def __init__(self, every=25):
        self.every, self.t = every, time.time()

    def on_train_batch_end(self, loop, loss):
        if loop.step % self.every == 0:
            dt = time.time() - self.t
            self.t = time.time()
            loop.print(f"step {loop.step} loss {loss:.4f} {self.every / dt:.1f} it/s")


class BestTracker(Callback):
    def __init__(self):
        self.best = float("inf")

    def on_validation_end(self, loop, metrics):
        # metrics are already reduced over all ranks, so every rank agrees
        if metrics["val_mse_ema"] < self.best:
            self.best = metrics["val_mse_ema"]
            if loop.rank == 0:
                torch.save(loop.ema.shadow.state_dict(), "/tmp/ema_subgroups_best.pt")
            loop.print(f"new best ema val {self.best:.5f}")


class Loop:
    def __init__(self, module, epochs, batch_size, callbacks, pg_timeout):
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        # every rank must take part in new_group, even for a group it would not be in
        self.metric_group = dist.new_group(ranks=list(range(self.world)), backend="gloo",
                                           timeout=timedelta(seconds=pg_timeout))
        self.module = module
        self.model = DDP(module)
        self.ema = EMA(module)
        self.epochs, self.batch_size, self.callbacks = epochs, batch_size, callbacks
        self.step = 0

    def print(self, msg):
        if self.rank == 0:
            print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)

    def reduce_sum(self, values):
        t = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(t, group=self.metric_group)
        return t.tolist()

    @torch.no_grad()
    def validate(self, loader):
        totals = {"val_mse": [0.0, 0], "val_mse_ema": [0.0, 0]}
        self.model.eval()
        for batch in loader:
            for name, net in (("val_mse", self.module), ("val_mse_ema", self.ema.shadow)):
                (x,) = batch
                s = F.mse_loss(net(x), x, reduction="sum").item()
                totals[name][0] += s
                totals[name][1] += x.numel()
        flat = [v for name in sorted(totals) for v in totals[name]]
        red = self.reduce_sum(flat)
        return {name: red[2 * i] / max(red[2 * i + 1], 1) for i, name in enumerate(sorted(totals))}

    def fit(self, train_ds, val_ds):
        sampler = DistributedSampler(train_ds, drop_last=True)
        train_dl = DataLoader(train_ds, batch_size=self.batch_size, sampler=sampler, drop_last=True)
        val_dl = DataLoader(val_ds, batch_size=128, sampler=DistributedSampler(val_ds, shuffle=False))
        opt, sched = self.module.configure_optimizers(self.epochs * len(train_dl))
        for epoch in range(self.epochs):
            sampler.set_epoch(epoch)
            self.model.train()
            for batch in train_dl:
                (x,) = batch
                loss = F.mse_loss(self.model(x), x)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                sched.step()
                self.ema.update(self.module)
                self.step += 1
                for cb in self.callbacks:
                    cb.on_train_batch_end(self, loss.item())
            metrics = self.validate(val_dl)
            self.print(f"epoch {epoch} " + " ".join(f"{k}={v:.5f}" for k, v in metrics.items()))
            for cb in self.callbacks:
                cb.on_validation_end(self, metrics)


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, 8, generator=g)
    mix = torch.randn(8, 32, generator=torch.Generator().manual_seed(99))
    return TensorDataset(torch.tanh(z @ mix) + 0.05 * torch.randn(n, 32, generator=g))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--pg-timeout", type=int, default=10)
    args = ap.parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    torch.manual_seed(0)
    module = LitAutoEncoder()
    loop = Loop(module, args.epochs, args.batch_size, [ThroughputLogger(), BestTracker()], args.pg_timeout)
    loop.fit(make_data(4096, 0), make_data(1000, 1))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
