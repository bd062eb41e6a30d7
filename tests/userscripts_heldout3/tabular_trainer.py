"""MLP classifier for the synthetic sensor-fault table, with callbacks and auto-resume.

The queue we run on is preemptible, so the trainer writes a checkpoint every --save-every steps
to <out>/checkpoints/step_XXXXXX.pt and picks up from the newest one when it is restarted.

    bash setup/tabular_trainer.sh
    torchrun --nproc-per-node 2 tabular_trainer.py
"""
import argparse
import glob
import json
import os
import re
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))


def make_split(n, n_features=24, n_classes=5, seed=0):
    g = torch.Generator().manual_seed(1000)          # same class layout for every split
    centers = torch.randn(n_classes, n_features, generator=g) * 1.5
    mix = torch.randn(n_features, n_features, generator=g) / n_features ** 0.5
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, n_classes, (n,), generator=g)
    x = centers[y] + torch.randn(n, n_features, generator=g)
    x = torch.tanh(x @ mix) + 0.1 * torch.randn(n, n_features, generator=g)
    return TensorDataset(x, y)


class MLP(nn.Module):
    def __init__(self, d_in, d_hidden, n_classes, p_drop=0.1):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_in, d_hidden), nn.LayerNorm(d_hidden), nn.GELU(), nn.Dropout(p_drop),
            nn.Linear(d_hidden, d_hidden), nn.LayerNorm(d_hidden), nn.GELU(), nn.Dropout(p_drop),
            nn.Linear(d_hidden, n_classes))

    def forward(self, x):
        return self.net(x)


class Callback:
    def on_fit_start(self, trainer): ...
    def on_step_end(self, trainer, loss): ...
    def on_epoch_end(self, trainer, metrics): ...
    def on_fit_end(self, trainer): ...


class ProgressLogger(Callback):
    def __init__(self, every=50):
        self.every, self.t0 = every, None

    def on_fit_start(self, trainer):
        self.t0 = time.time()
        trainer.log(f"fit: step {trainer.global_step} -> {trainer.args.max_steps}")

    def on_step_end(self, trainer, loss):
        if trainer.global_step % self.every == 0:
            lr = trainer.sched.get_last_lr()[0]
            trainer.log(f"step {trainer.global_step} loss {loss:.4f} lr {lr:.2e} "
                        f"({time.time() - self.t0:.1f}s)")

    def on_epoch_end(self, trainer, metrics):
        trainer.log(f"epoch {trainer.epoch} " + " ".join(f"{k} {v:.4f}" for k, v in metrics.items()))
        if trainer.is_main:
            with open(os.path.join(trainer.args.out, "metrics.jsonl"), "a") as f:
                f.write(json.dumps({"epoch": trainer.epoch, "step": trainer.global_step, **metrics}) + "\n")


class ModelCheckpoint(Callback):
    def __init__(self, every, keep_last=3):
        self.every, self.keep_last = every, keep_last

    def on_step_end(self, trainer, loss):
        if trainer.global_step % self.every == 0:
            trainer.save_checkpoint()
            if trainer.is_main:
                for old in trainer.list_checkpoints()[:-self.keep_last]:
                    os.remove(old)

    def on_fit_end(self, trainer):
        if trainer.global_step % self.every:
            trainer.save_checkpoint()


class Trainer:
    def __init__(self, args, callbacks):
        self.args, self.callbacks = args, callbacks
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.is_main = self.rank == 0
        self.ckpt_dir = os.path.join(args.out, "checkpoints")
        os.makedirs(self.ckpt_dir, exist_ok=True)

        torch.manual_seed(args.seed)
        self.train_ds = make_split(args.n_train, seed=args.seed)
        self.val_ds = make_split(args.n_val, seed=args.seed + 1)
        self.sampler = DistributedSampler(self.train_ds, shuffle=True, seed=args.seed)
        self.train_dl = DataLoader(self.train_ds, batch_size=args.batch_size, sampler=self.sampler)
        self.val_dl = DataLoader(self.val_ds, batch_size=256,
                                 sampler=DistributedSampler(self.val_ds, shuffle=False))

        self.model = DDP(MLP(24, args.hidden, 5, args.dropout))
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=args.lr, weight_decay=args.wd)
        # step decay rather than cosine: the horizon does not change when a job is extended
        self.sched = torch.optim.lr_scheduler.StepLR(self.opt, step_size=args.lr_step, gamma=0.5)
        self.global_step, self.epoch = 0, 0

    def log(self, msg):
        if self.is_main:
            print(f"[trainer] {msg}", flush=True)

    def list_checkpoints(self):
        paths = glob.glob(os.path.join(self.ckpt_dir, "step_*.pt"))
        return sorted(paths, key=lambda p: int(re.search(r"step_(\d+)\.pt$", p).group(1)))

    def save_checkpoint(self):
        if not self.is_main:
            return
        path = os.path.join(self.ckpt_dir, f"step_{self.global_step:06d}.pt")
        torch.save({"model": self.model.module.state_dict(), "optimizer": self.opt.state_dict(),
                    "scheduler": self.sched.state_dict(), "step": self.global_step,
                    "epoch": self.epoch, "args": vars(self.args)}, path)
        self.log(f"saved {os.path.relpath(path, HERE)}")

    def resume(self):
        ckpts = self.list_checkpoints()
        if not ckpts:
            self.log("no checkpoint found, starting from scratch")
            return
        state = torch.load(ckpts[-1], map_location="cpu")
        self.model.module.load_state_dict(state["model"])
        self.opt.load_state_dict(state["optimizer"])
        self.sched.load_state_dict(state["scheduler"])
        self.global_step, self.epoch = state["step"], state["epoch"]
        self.log(f"resumed from {os.path.basename(ckpts[-1])} (epoch {self.epoch}, step {self.global_step})")

    @torch.no_grad()
    def evaluate(self):
        self.model.eval()
        stats = torch.zeros(3)
        for x, y in self.val_dl:
            logits = self.model(x)
            stats += torch.tensor([F.cross_entropy(logits, y, reduction="sum").item(),
                                   (logits.argmax(1) == y).sum().item(), y.numel()])
        dist.all_reduce(stats)
        self.model.train()
        return {"val_loss": (stats[0] / stats[2]).item(), "val_acc": (stats[1] / stats[2]).item()}

    def fit(self):
        self.resume()
        for cb in self.callbacks:
            cb.on_fit_start(self)
        self.model.train()
        while self.global_step < self.args.max_steps:
            self.sampler.set_epoch(self.epoch)
            for x, y in self.train_dl:
                loss = F.cross_entropy(self.model(x), y, label_smoothing=0.05)
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
                self.opt.step()
                self.sched.step()
                self.global_step += 1
                for cb in self.callbacks:
                    cb.on_step_end(self, loss.item())
                if self.global_step >= self.args.max_steps:
                    break
            metrics = self.evaluate()
            for cb in self.callbacks:
                cb.on_epoch_end(self, metrics)
            self.epoch += 1
        for cb in self.callbacks:
            cb.on_fit_end(self)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=os.path.join(HERE, "runs", "tabular"))
    p.add_argument("--n-train", type=int, default=8000)
    p.add_argument("--n-val", type=int, default=2000)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--wd", type=float, default=0.01)
    p.add_argument("--lr-step", type=int, default=400)
    p.add_argument("--max-steps", type=int, default=1200)
    p.add_argument("--save-every", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pg-timeout", type=int, default=10)
    args = p.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    trainer = Trainer(args, [ProgressLogger(every=100), ModelCheckpoint(args.save_every)])
    trainer.fit()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
