"""Shape classifier: a small LightningModule-style model driven by a hand-written DDP loop, with EMA weights.

    bash setup/subproc_report.sh
    torchrun --nproc-per-node 2 subproc_report.py
"""
import argparse
import copy
import json
import os
import subprocess
import sys
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


class ShapeClassifier(nn.Module):
    """Lightning-ish module: the model plus its steps and optimizer config."""

    def __init__(self, lr=2e-3, weight_decay=1e-4, n_classes=4):
        super().__init__()
        self.hparams = dict(lr=lr, weight_decay=weight_decay, n_classes=n_classes)
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2),
        )
        self.classifier = nn.Linear(32 * 4, n_classes)

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))

    def training_step(self, model, batch):
        x, y = batch
        logits = model(x)
        return F.cross_entropy(logits, y), (logits.argmax(1) == y).float().mean()

    @torch.no_grad()
    def validation_step(self, model, batch):
        x, y = batch
        logits = model(x)
        return torch.stack([F.cross_entropy(logits, y, reduction="sum"),
                            (logits.argmax(1) == y).sum().float(), torch.tensor(float(len(y)))])

    def configure_optimizers(self, params, total_steps):
        opt = torch.optim.AdamW(params, lr=self.hparams["lr"], weight_decay=self.hparams["weight_decay"])
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total_steps, eta_min=1e-5)
        return opt, sched


class EMA:
    def __init__(self, model, decay=0.995):
        self.decay = decay
        self.shadow = copy.deepcopy(model).eval()
        for p in self.shadow.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def update(self, model):
        for s, p in zip(self.shadow.parameters(), model.parameters()):
            s.lerp_(p.detach(), 1.0 - self.decay)


class JsonlLogger:
    def __init__(self, run_dir):
        os.makedirs(run_dir, exist_ok=True)
        self.run_dir = run_dir
        self.fh = open(os.path.join(run_dir, "metrics.jsonl"), "a")

    def log_dict(self, metrics, step, epoch):
        self.fh.write(json.dumps({"step": step, "epoch": epoch, **metrics}) + "\n")

    def close(self):
        self.fh.close()


def run_validation(module, model, loader):
    model.eval()
    acc = torch.zeros(3)
    for batch in loader:
        acc += module.validation_step(model, batch)
    dist.all_reduce(acc)
    return {"loss": (acc[0] / acc[2]).item(), "acc": (acc[1] / acc[2]).item()}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default=os.path.join(HERE, "data", "shapes.pt"))
    p.add_argument("--run-dir", default=os.path.join(HERE, "lightning_logs", "shapes-cnn"))
    p.add_argument("--max-epochs", type=int, default=6)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--ema-decay", type=float, default=0.995)
    p.add_argument("--log-every-n-steps", type=int, default=10)
    p.add_argument("--pg-timeout", type=int, default=10)
    p.add_argument("--seed", type=int, default=17)
    args = p.parse_args()

    dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)

    data = torch.load(args.data)
    train_ds, val_ds = TensorDataset(*data["train"]), TensorDataset(*data["val"])
    train_sampler = DistributedSampler(train_ds, shuffle=True, seed=args.seed)
    train_dl = DataLoader(train_ds, batch_size=args.batch_size, sampler=train_sampler, drop_last=True)
    val_dl = DataLoader(val_ds, batch_size=200, sampler=DistributedSampler(val_ds, shuffle=False))

    module = ShapeClassifier(lr=args.lr)
    model = DDP(module)
    ema = EMA(module, decay=args.ema_decay)
    opt, sched = module.configure_optimizers(model.parameters(), args.max_epochs * len(train_dl))
    logger = JsonlLogger(args.run_dir) if rank == 0 else None

    step = 0
    for epoch in range(args.max_epochs):
        t0 = time.time()
        model.train()
        train_sampler.set_epoch(epoch)
        for batch in train_dl:
            loss, acc = module.training_step(model, batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            ema.update(module)
            step += 1
            if logger and step % args.log_every_n_steps == 0:
                logger.log_dict({"train/loss": loss.item(), "train/acc": acc.item(),
                                 "lr": sched.get_last_lr()[0]}, step, epoch)

        val = run_validation(module, model, val_dl)
        val_ema = run_validation(module, ema.shadow, val_dl)
        if rank == 0:
            print(f"epoch {epoch}: val/loss {val['loss']:.4f} val/acc {val['acc']:.4f} "
                  f"val/acc_ema {val_ema['acc']:.4f} ({time.time() - t0:.1f}s)", flush=True)
            logger.log_dict({"val/loss": val["loss"], "val/acc": val["acc"], "val/acc_ema": val_ema["acc"]},
                            step, epoch)
            torch.save({"epoch": epoch, "step": step, "state_dict": module.state_dict(),
                        "ema": ema.shadow.state_dict(), "hparams": module.hparams},
                       os.path.join(args.run_dir, "last.ckpt"))
            # refresh the markdown summary for the dashboard
            subprocess.run([sys.executable, os.path.join(HERE, "tools", "report.py"), args.run_dir], check=True)

    if logger:
        logger.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
