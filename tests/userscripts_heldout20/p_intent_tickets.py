"""Support-ticket intent classifier (bag of embeddings) trained with DDP."""
import logging
from functools import partial

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from projkit import callbacks as cb
from projkit.config import load_config
from projkit.data import intent_records, local_tickets
from projkit.dist import distributed
from projkit.models import build
from projkit.trainer import Trainer

CONFIG = """
name: intent-boe
epochs: 3
optim:
  lr: 0.005
  grad_clip: 2.0
data:
  n_samples: 6000
  batch_size: 32
  num_classes: 6
extra:
  vocab: 500
  label_smoothing: 0.05
"""

log = logging.getLogger("intent")


def smoothed_ce(model, batch, smoothing):
    tokens, target = batch
    return F.cross_entropy(model(tokens), target, label_smoothing=smoothing)


def main():
    cfg = load_config(CONFIG)
    with distributed(cfg.dist) as ctx:
        records = intent_records(cfg.data.n_samples, vocab=cfg.extra["vocab"], seed=cfg.data.seed)
        ds, encoder = local_tickets(records, ctx)
        log.info("local shard: %d tickets, %d intents", len(ds), len(encoder))
        loader = DataLoader(ds, batch_size=cfg.data.batch_size, shuffle=True, drop_last=True,
                            generator=torch.Generator().manual_seed(cfg.seed))

        torch.manual_seed(cfg.seed)
        model = build("bag_of_embeddings", vocab=cfg.extra["vocab"], num_classes=cfg.data.num_classes)
        opt = torch.optim.Adam(model.parameters(), lr=cfg.optim.lr)
        step = partial(smoothed_ce, smoothing=cfg.extra["label_smoothing"])
        trainer = Trainer(model, opt, ctx, cfg, step_fn=step, callbacks=[cb.LossLogger(every=20)])
        trainer.fit(loader)

        model.eval()
        with torch.no_grad():
            acc = sum((model(t).argmax(-1) == y).sum().item() for t, y in loader) / (len(loader) * cfg.data.batch_size)
        acc = ctx.all_mean(acc)
        if ctx.leader:
            log.info("train accuracy %.4f", acc)


if __name__ == "__main__":
    main()
