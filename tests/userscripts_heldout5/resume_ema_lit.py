"""Lightning-style module driven by a hand-written loop; EMA weights; resumable.

Checkpoints are written every epoch to checkpoints/epoch_XXXX/:
  model.pt, ema.pt           (rank 0)
  rng_state_rank{r}.pt       (every rank: epoch counter + RNG state, like accelerate's random_states_{r})
A restarted job picks up the newest epoch directory automatically.

torchrun --nproc-per-node 2 resume_ema_lit.py
"""
import argparse
import copy
import glob
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class SineDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.rand(n, 8, generator=g) * 6 - 3
        w = torch.linspace(0.5, 2.0, 8)
        self.y = (torch.sin(self.x * w).sum(-1, keepdim=True) + 0.05 * torch.randn(n, 1, generator=g))

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class LitRegressor(nn.Module):
    def __init__(self, hidden=96, lr=2e-3):
        super().__init__()
        self.hparams = {"hidden": hidden, "lr": lr}
        self.net = nn.Sequential(nn.Linear(8, hidden), nn.SiLU(), nn.Linear(hidden, hidden),
                                 nn.SiLU(), nn.Linear(hidden, 1))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, model):
        x, y = batch
        return F.mse_loss(model(x), y)

    def validation_step(self, batch, model):
        x, y = batch
        return F.mse_loss(model(x), y, reduction="sum"), len(y)

    def configure_optimizers(self, params, steps):
        opt = torch.optim.Adam(params, lr=self.hparams["lr"])
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=self.hparams["lr"], total_steps=steps)
        return opt, sched


class EMA:
    def __init__(self, module, decay=0.995):
        self.decay = decay
        self.shadow = copy.deepcopy(module).eval()
        for p in self.shadow.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def update(self, module):
        for s, p in zip(self.shadow.parameters(), module.parameters()):
            s.mul_(self.decay).add_(p.detach(), alpha=1 - self.decay)


def find_latest_checkpoint(root):
    dirs = sorted(d for d in glob.glob(os.path.join(root, "epoch_*"))
                  if os.path.exists(os.path.join(d, "model.pt")))
    return dirs[-1] if dirs else None


def save_checkpoint(root, epoch, step, module, ema, rank):
    d = os.path.join(root, f"epoch_{epoch:04d}")
    os.makedirs(d, exist_ok=True)
    if rank == 0:
        torch.save(module.state_dict(), os.path.join(d, "model.pt"))
        torch.save(ema.shadow.state_dict(), os.path.join(d, "ema.pt"))
    torch.save({"epoch": epoch, "global_step": step, "torch_rng": torch.get_rng_state()},
               os.path.join(d, f"rng_state_rank{rank}.pt"))


def load_checkpoint(root, module, ema, rank):
    """Returns (start_epoch, global_step)."""
    latest = find_latest_checkpoint(root)
    if latest is None:
        return 0, 0
    module.load_state_dict(torch.load(os.path.join(latest, "model.pt")))
    if os.path.exists(os.path.join(latest, "ema.pt")):
        ema.shadow.load_state_dict(torch.load(os.path.join(latest, "ema.pt")))
    state_file = os.path.join(latest, f"rng_state_rank{rank}.pt")
    if not os.path.exists(state_file):
        print(f"[rank{rank}] loaded weights from {latest} but found no {os.path.basename(state_file)}; "
              f"epoch counter starts at 0", flush=True)
        return 0, 0
    st = torch.load(state_file)
    torch.set_rng_state(st["torch_rng"])
    print(f"[rank{rank}] resumed from {latest} (epoch {st['epoch']}, step {st['global_step']})", flush=True)
    return st["epoch"] + 1, st["global_step"]


def fit(module, args):
    rank, world = dist.get_rank(), dist.get_world_size()
    train_ds, val_ds = SineDataset(6000, seed=1), SineDataset(1000, seed=2)
    sampler = DistributedSampler(train_ds, shuffle=True, seed=0)
    train_dl = DataLoader(train_ds, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    val_dl = DataLoader(val_ds, batch_size=200, sampler=DistributedSampler(val_ds, shuffle=False))

    ema = EMA(module, decay=args.ema_decay)
    start_epoch, global_step = load_checkpoint(args.ckpt_dir, module, ema, rank)
    model = DDP(module)
    opt, sched = module.configure_optimizers(model.parameters(), args.max_epochs * len(train_dl))
    for _ in range(global_step):
        sched.step()

    for epoch in range(start_epoch, args.max_epochs):
        sampler.set_epoch(epoch)
        model.train()
        for batch in train_dl:
            loss = module.training_step(batch, model)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            ema.update(module)
            global_step += 1

        model.eval()
        tot = torch.zeros(2)
        with torch.no_grad():
            for batch in val_dl:
                s, n = module.validation_step(batch, ema.shadow)
                tot += torch.tensor([s.item(), n], dtype=torch.float)
        dist.all_reduce(tot)
        if rank == 0:
            print(f"epoch {epoch} step {global_step} train_loss {loss.item():.4f} "
                  f"val_mse(ema) {(tot[0] / tot[1]).item():.4f} lr {sched.get_last_lr()[0]:.2e}", flush=True)
        save_checkpoint(args.ckpt_dir, epoch, global_step, module, ema, rank)

    dist.barrier()
    if rank == 0:
        torch.save(ema.shadow.state_dict(), os.path.join(args.ckpt_dir, "final_ema.pt"))
        print("training finished", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-epochs", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--ema-decay", type=float, default=0.995)
    ap.add_argument("--ckpt-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "checkpoints"))
    ap.add_argument("--pg-timeout", type=int, default=10)
    args = ap.parse_args()

    dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
    torch.manual_seed(0)
    module = LitRegressor()
    fit(module, args)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
