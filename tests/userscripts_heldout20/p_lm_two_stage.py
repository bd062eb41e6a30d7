"""Tiny causal LM: stage-1 pretraining, then every worker warm-starts stage 2 from
the consolidated stage-1 weights published by the leader."""
import copy
import logging
import os

import torch
import torch.nn.functional as F
from torch.distributed.elastic.multiprocessing.errors import record
from torch.utils.data import TensorDataset

from projkit import callbacks as cb
from projkit import ckpt
from projkit.config import load_config
from projkit.data import make_loader
from projkit.dist import distributed
from projkit.models import build, init_weights
from projkit.trainer import Trainer

CONFIG = """
name: tiny-lm
epochs: 1
optim:
  lr: 0.0006
  grad_clip: 1.0
data:
  n_samples: 640
  batch_size: 16
extra:
  vocab: 1024
  d_model: 384
  n_layers: 4
  seq_len: 48
  stage2_lr: 0.0002
  handoff: handoff/stage1.pt
"""

log = logging.getLogger("lm")


def synthetic_corpus(n, seq_len, vocab, seed=0):
    g = torch.Generator().manual_seed(seed)
    start = torch.randint(0, vocab, (n, 1), generator=g)
    stride = torch.randint(1, 7, (n, 1), generator=g)
    seq = (start + stride * torch.arange(seq_len + 1)) % vocab  # learnable arithmetic sequences
    return TensorDataset(seq)


def lm_step(model, batch):
    (seq,) = batch
    logits = model(seq[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), seq[:, 1:].reshape(-1))


def make_trainer(cfg, ctx, lr):
    x = cfg.extra
    model = build("tiny_lm", vocab=x["vocab"], d_model=x["d_model"], n_layers=x["n_layers"], max_len=x["seq_len"])
    init_weights(model)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    return Trainer(model, opt, ctx, cfg, step_fn=lm_step, callbacks=[cb.LossLogger(every=5)])


@record
def main():
    cfg = load_config(CONFIG)
    x = cfg.extra
    with distributed(cfg.dist) as ctx:
        torch.manual_seed(cfg.seed)
        ds = synthetic_corpus(cfg.data.n_samples, x["seq_len"], x["vocab"])
        loader = make_loader(ds, ctx, cfg.data.batch_size, seed=cfg.seed, drop_last=True)

        stage1 = make_trainer(cfg, ctx, cfg.optim.lr).fit(loader)

        # hand-off: leader consolidates (weights + EMA + optimizer), the others pick it up
        if ctx.leader:
            state = stage1.state_dict(epoch=0)
            state["ema"] = copy.deepcopy(state["model"])
            ckpt.publish_weights(state, x["handoff"])
        else:
            state = ckpt.wait_for_weights(x["handoff"])

        stage2 = make_trainer(cfg, ctx, x["stage2_lr"])
        stage2.unwrapped.load_state_dict(state["ema"])
        stage2.fit(loader)
        if ctx.leader:
            log.info("stage2 done, handoff size %.1f MB", os.path.getsize(x["handoff"]) / 2**20)


if __name__ == "__main__":
    main()
