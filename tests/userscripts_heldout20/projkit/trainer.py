"""A small Trainer with a callback registry."""
from __future__ import annotations

import logging
import time
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from .callbacks import CallbackList

log = logging.getLogger("projkit.trainer")


def classification_step(model, batch):
    x, y = batch
    return F.cross_entropy(model(x), y)


class Trainer:
    def __init__(self, model: nn.Module, optimizer, ctx, cfg, *, step_fn: Callable = classification_step,
                 callbacks=(), ddp_kwargs=None):
        self.ctx, self.cfg = ctx, cfg
        self.model = DDP(model, **(ddp_kwargs or {})) if ctx.distributed else model
        self.optimizer = optimizer
        for g in optimizer.param_groups:
            g.setdefault("initial_lr", g["lr"])
        self.step_fn = step_fn
        self.callbacks = CallbackList(callbacks)
        self.global_step = 0
        self.start_epoch = 0

    @property
    def unwrapped(self) -> nn.Module:
        return self.model.module if isinstance(self.model, DDP) else self.model

    def state_dict(self, epoch: int) -> dict:
        return {"model": self.unwrapped.state_dict(), "optim": self.optimizer.state_dict(),
                "epoch": epoch, "global_step": self.global_step}

    def load_state_dict(self, state: dict) -> None:
        self.unwrapped.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optim"])
        self.start_epoch = state["epoch"] + 1
        self.global_step = state["global_step"]

    def training_step(self, batch) -> float:
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.step_fn(self.model, batch)
        loss.backward()
        clip = self.cfg.optim.grad_clip
        if clip:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip)
        self.optimizer.step()
        return loss.item()

    def fit(self, train_loader, epochs=None):
        epochs = epochs if epochs is not None else self.cfg.epochs
        self.callbacks.fire("on_fit_start", self)
        t0 = time.time()
        for epoch in range(self.start_epoch, epochs):
            sampler = getattr(train_loader, "sampler", None)
            if hasattr(sampler, "set_epoch"):
                sampler.set_epoch(epoch)
            self.model.train()
            for step, batch in enumerate(train_loader):
                loss = self.training_step(batch)
                self.global_step += 1
                self.callbacks.fire("on_train_batch_end", self, step, loss)
            self.callbacks.fire("on_epoch_end", self, epoch)
        self.callbacks.fire("on_fit_end", self)
        if self.ctx.leader:
            log.info("fit done: %d steps in %.1fs", self.global_step, time.time() - t0)
        return self
