"""Small training utilities shared by our sentiment experiments."""
import logging
import math
import os

import torch
import torch.distributed as dist

log = logging.getLogger("es_tools")


class EarlyStopping:
    """Patience-based early stopping on a metric that should go down."""

    def __init__(self, patience=3, min_delta=0.0):
        self.patience = patience
        self.min_delta = min_delta
        self.best = math.inf
        self.bad_epochs = 0
        self.should_stop = False

    def step(self, value):
        if value < self.best - self.min_delta:
            self.best = value
            self.bad_epochs = 0
            return True
        self.bad_epochs += 1
        if self.bad_epochs >= self.patience:
            self.should_stop = True
        return False


class Checkpointer:
    """Saves model + ZeRO optimizer state.

    ZeroRedundancyOptimizer keeps only a shard of the optimizer state on each
    rank, so the full state has to be consolidated onto the writer first.
    """

    def __init__(self, ckpt_dir, model, optimizer, writer_rank=0):
        self.ckpt_dir = ckpt_dir
        self.model = model
        self.optimizer = optimizer
        self.writer_rank = writer_rank
        self.is_writer = dist.get_rank() == writer_rank

    def _full_optimizer_state(self):
        self.optimizer.consolidate_state_dict(to=self.writer_rank)
        return self.optimizer.state_dict() if self.is_writer else None

    def save(self, tag, **extra):
        opt_state = self._full_optimizer_state()
        if not self.is_writer:
            return None
        path = os.path.join(self.ckpt_dir, f"{tag}.pt")
        state = {"model": self.model.module.state_dict(), "optimizer": opt_state}
        state.update(extra)
        torch.save(state, path)
        log.info("wrote %s", path)
        return path
