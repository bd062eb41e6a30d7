"""Small CNN on synthetic blob images; TTA validation every epoch."""
import logging

import torch

from projkit import callbacks as cb
from projkit.config import load_config
from projkit.data import blob_images, make_loader
from projkit.dist import distributed
from projkit.models import build
from projkit.trainer import Trainer

CONFIG = """
name: blobs-cnn
epochs: 1
optim:
  lr: 0.004
  warmup_steps: 5
data:
  n_samples: 4096
  batch_size: 64
  eval_batch_size: 256
  num_classes: 8
extra:
  val_samples: 4608
  image_size: 32
"""

log = logging.getLogger("blobs")


def main():
    cfg = load_config(CONFIG)
    with distributed(cfg.dist) as ctx:
        size = cfg.extra["image_size"]
        train = blob_images(cfg.data.n_samples, cfg.data.num_classes, size=size, seed=1)
        val = blob_images(cfg.extra["val_samples"], cfg.data.num_classes, size=size, seed=2)
        loader = make_loader(train, ctx, cfg.data.batch_size, seed=cfg.seed, drop_last=True)

        torch.manual_seed(cfg.seed)
        model = build("small_cnn", num_classes=cfg.data.num_classes)
        opt = torch.optim.Adam(model.parameters(), lr=cfg.optim.lr)
        validation = cb.FullValidation(val, batch_size=cfg.data.eval_batch_size)
        trainer = Trainer(model, opt, ctx, cfg, callbacks=[
            cb.WarmupCosine(cfg.optim.warmup_steps, len(loader) * cfg.epochs),
            cb.LossLogger(every=8),
            validation,
        ])
        trainer.fit(loader)
        if ctx.leader:
            log.info("val history: %s", ["%.3f" % a for a in validation.history])


if __name__ == "__main__":
    main()
