"""Churn classifier on tabular features: DDP + checkpoint/resume through projkit."""
import logging
import os

import torch
from torch.distributed.elastic.multiprocessing.errors import record

from projkit import callbacks as cb
from projkit import ckpt
from projkit.config import load_config
from projkit.data import make_loader, tabular_dataset
from projkit.dist import distributed, leader_first
from projkit.models import build
from projkit.trainer import Trainer

DEFAULTS = """
name: churn-mlp
epochs: 4
optim:
  lr: 0.003
  weight_decay: 0.0001
  warmup_steps: 10
  grad_clip: 1.0
data:
  n_samples: 6144
  batch_size: 64
  n_features: 40
  num_classes: 2
ckpt:
  dir: ckpt_churn
  every_n_epochs: 1
  keep_last: 2
dist:
  backend: gloo
  timeout_s: 30
"""

log = logging.getLogger("churn")


def make_trainer(cfg, ctx, steps_total):
    torch.manual_seed(cfg.seed)
    model = build("mlp", d_in=cfg.data.n_features, d_out=cfg.data.num_classes, hidden=(256, 128))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.optim.lr, weight_decay=cfg.optim.weight_decay)
    return Trainer(model, opt, ctx, cfg, callbacks=[
        cb.WarmupCosine(cfg.optim.warmup_steps, steps_total),
        cb.LossLogger(every=25),
        cb.Checkpoint(cfg.ckpt.dir, cfg.ckpt.every_n_epochs, cfg.ckpt.keep_last),
    ])


@record
def main():
    cfg = load_config(DEFAULTS)
    with distributed(cfg.dist) as ctx:
        with leader_first(ctx):
            ds = tabular_dataset(cfg.data)
        loader = make_loader(ds, ctx, cfg.data.batch_size, seed=cfg.seed)
        total = len(loader) * cfg.epochs

        # first leg: train half the epochs (simulates a pre-empted job)
        make_trainer(cfg, ctx, total).fit(loader, epochs=cfg.epochs // 2)

        # second leg: resume from the newest checkpoint
        trainer = make_trainer(cfg, ctx, total)
        path = ckpt.latest(cfg.ckpt.dir)
        trainer.load_state_dict(ckpt.load_checkpoint(path))
        if ctx.leader:
            log.info("resumed from %s at step %d", os.path.basename(path), trainer.global_step)
        trainer.fit(loader)

        ev = make_loader(ds, ctx, 512, shuffle=False)
        model = trainer.unwrapped.eval()
        with torch.no_grad():
            correct = sum((model(x).argmax(-1) == y).sum().item() for x, y in ev)
        acc = ctx.all_mean(correct / len(ev.sampler))
        if ctx.leader:
            log.info("train accuracy %.4f", acc)


if __name__ == "__main__":
    main()
