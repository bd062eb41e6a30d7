"""Conversion model with an auxiliary spend-regression head (multi-task, DDP)."""
import logging
from functools import partial

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from projkit import callbacks as cb
from projkit.config import load_config
from projkit.data import contiguous_subset, multitask_table
from projkit.dist import DistContext, distributed
from projkit.models import build
from projkit.trainer import Trainer

CONFIG = """
name: conv-multitask
epochs: 3
optim:
  lr: 0.002
data:
  n_samples: 4096
  batch_size: 64
  n_features: 24
extra:
  aux_weight: 0.3
  labelled_frac: 0.4
"""

log = logging.getLogger("multitask")


def multitask_step(model, batch, aux_weight):
    x, y, aux, has_aux = batch
    out = model(x, aux_mask=has_aux)
    loss = F.cross_entropy(out["logits"], y)
    if "aux" in out:
        loss = loss + aux_weight * F.mse_loss(out["aux"], aux[has_aux])
    return loss


def main():
    cfg = load_config(CONFIG)
    with distributed(cfg.dist) as ctx:
        full = multitask_table(cfg.data.n_samples, cfg.data.n_features, seed=cfg.data.seed,
                               labelled_frac=cfg.extra["labelled_frac"])
        part = contiguous_subset(full, ctx)  # each worker owns one part-file of the export
        loader = DataLoader(part, batch_size=cfg.data.batch_size, shuffle=True, drop_last=True)

        torch.manual_seed(cfg.seed)
        model = build("multitask", d_in=cfg.data.n_features)
        opt = torch.optim.AdamW(model.parameters(), lr=cfg.optim.lr)
        trainer = Trainer(model, opt, ctx, cfg, step_fn=partial(multitask_step, aux_weight=cfg.extra["aux_weight"]),
                          callbacks=[cb.LossLogger(every=10)])
        trainer.fit(loader)
        if ctx.leader:
            log.info("done after %d steps", trainer.global_step)


if __name__ == "__main__":
    main()
