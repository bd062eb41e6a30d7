"""Trainer callbacks. Each hook receives the trainer as first argument."""
from __future__ import annotations

import logging
import math
import os
import time

import torch

from . import ckpt

log = logging.getLogger("projkit.callbacks")

HOOKS = ("on_fit_start", "on_train_batch_end", "on_epoch_end", "on_fit_end")


class Callback:
    order = 50

    def on_fit_start(self, trainer): ...
    def on_train_batch_end(self, trainer, step, loss): ...
    def on_epoch_end(self, trainer, epoch): ...
    def on_fit_end(self, trainer): ...


class CallbackList:
    def __init__(self, callbacks=()):
        self._cbs = sorted(callbacks, key=lambda c: c.order)

    def add(self, cb):
        self._cbs.append(cb)
        self._cbs.sort(key=lambda c: c.order)

    def fire(self, hook, *args, **kw):
        assert hook in HOOKS, hook
        for cb in self._cbs:
            getattr(cb, hook)(*args, **kw)


class WarmupCosine(Callback):
    order = 10

    def __init__(self, warmup, total):
        self.warmup, self.total = warmup, total

    def on_train_batch_end(self, trainer, step, loss):
        s = trainer.global_step
        scale = s / max(1, self.warmup) if s < self.warmup else 0.5 * (1 + math.cos(math.pi * min(1.0, s / self.total)))
        for g in trainer.optimizer.param_groups:
            g["lr"] = g["initial_lr"] * max(scale, 0.05)


class LossLogger(Callback):
    order = 20

    def __init__(self, every=10):
        self.every = every
        self._acc, self._n, self._t0 = 0.0, 0, time.time()

    def on_train_batch_end(self, trainer, step, loss):
        self._acc += loss
        self._n += 1
        if trainer.global_step % self.every == 0:
            mean = trainer.ctx.all_mean(self._acc / self._n)
            if trainer.ctx.leader:
                log.info("step %d loss %.4f (%.1fs)", trainer.global_step, mean, time.time() - self._t0)
            self._acc, self._n = 0.0, 0


class Checkpoint(Callback):
    order = 90

    def __init__(self, directory, every_n_epochs=1, keep_last=2):
        self.directory, self.every, self.keep_last = directory, every_n_epochs, keep_last

    def on_epoch_end(self, trainer, epoch):
        if (epoch + 1) % self.every:
            return
        if trainer.ctx.leader:
            path = os.path.join(self.directory, f"epoch{epoch:03d}.pt")
            ckpt.save_checkpoint(trainer.state_dict(epoch), path)
            ckpt.prune(self.directory, self.keep_last)
        trainer.ctx.barrier()


@torch.no_grad()
def _tta_views(x):
    yield x
    yield torch.flip(x, dims=[-1])
    yield torch.flip(x, dims=[-2])
    yield torch.rot90(x, 1, dims=[-2, -1])
    yield torch.rot90(x, 3, dims=[-2, -1])
    for shift in (-2, 2):
        yield torch.roll(x, shifts=shift, dims=-1)
        yield torch.roll(x, shifts=shift, dims=-2)


class FullValidation(Callback):
    """Accuracy with test-time augmentation on the complete held-out set."""
    order = 60

    def __init__(self, dataset, batch_size=256):
        self.dataset, self.batch_size = dataset, batch_size
        self.history = []

    @torch.no_grad()
    def _evaluate(self, model):
        model.eval()
        correct = 0
        loader = torch.utils.data.DataLoader(self.dataset, batch_size=self.batch_size)
        for x, y in loader:
            probs = sum(torch.softmax(model(v), -1) for v in _tta_views(x))
            correct += (probs.argmax(-1) == y).sum().item()
        model.train()
        return correct / len(self.dataset)

    def on_epoch_end(self, trainer, epoch):
        t0 = time.time()
        if trainer.ctx.leader:
            acc = self._evaluate(trainer.unwrapped)
            self.history.append(acc)
            log.info("epoch %d val_acc(tta) %.4f in %.1fs", epoch, acc, time.time() - t0)
        trainer.ctx.barrier()
