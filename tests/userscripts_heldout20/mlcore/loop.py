"""Generator-based training loop with hand-rolled gradient averaging."""
from __future__ import annotations

import time
from typing import Callable, Iterable

import torch
import torch.distributed as dist

from .world import World


def broadcast_parameters(model: torch.nn.Module, src: int = 0):
    w = World.current()
    if w.multi:
        for p in model.state_dict().values():
            dist.broadcast(p, src)


def average_gradients(model: torch.nn.Module, group=None):
    """Flatten all grads into one buffer, all_reduce once, scatter back."""
    w = World.current()
    if not w.multi:
        return
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat, group=group)
    flat /= w.size
    off = 0
    for g in grads:
        n = g.numel()
        g.copy_(flat[off: off + n].view_as(g))
        off += n


def train_steps(model, optimizer, batches: Iterable, loss_fn: Callable, *, bus=None, clip=0.0):
    """Yield one record per optimisation step; the caller decides when to stop."""
    model.train()
    for step, batch in enumerate(batches):
        t0 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model, batch)
        loss.backward()
        average_gradients(model)
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        rec = {"step": step, "loss": loss.item(), "dt": time.perf_counter() - t0}
        if bus is not None:
            bus.emit("step_end", **rec)
        yield rec


def shard_bounds(n: int, world: World):
    """[start, stop) of this process' contiguous slice; the last process takes the tail."""
    per = n // world.size
    start = world.ordinal * per
    stop = n if world.ordinal == world.size - 1 else start + per
    return start, stop


def batched(n: int, batch_size: int, *, seed: int, epoch: int):
    g = torch.Generator().manual_seed(seed + epoch)
    perm = torch.randperm(n, generator=g)
    for i in range(0, n - batch_size + 1, batch_size):
        yield perm[i: i + batch_size]
