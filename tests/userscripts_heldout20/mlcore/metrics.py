"""Metric accumulators that know how to synchronise across the job."""
from __future__ import annotations

import numpy as np
import torch
import torch.distributed as dist

from .world import World


class MeanAbsoluteError:
    def __init__(self):
        self.reset()

    def reset(self):
        self.total = torch.zeros(2, dtype=torch.float64)

    def update(self, pred, target):
        self.total += torch.tensor([(pred - target).abs().sum().item(), target.numel()], dtype=torch.float64)

    def compute(self) -> float:
        t = self.total.clone()
        if World.current().multi:
            dist.all_reduce(t)
        return (t[0] / t[1]).item()


class Mean:
    def __init__(self):
        self.s, self.n = 0.0, 0

    def update(self, v, n=1):
        self.s += float(v) * n
        self.n += n

    def compute(self, sync=True) -> float:
        t = torch.tensor([self.s, float(self.n)], dtype=torch.float64)
        if sync and World.current().multi:
            dist.all_reduce(t)
        return (t[0] / t[1].clamp(min=1)).item()


def gather_varlen(t: torch.Tensor) -> torch.Tensor:
    """Concatenate a 1-D tensor from every process (coordinator-side ranking metrics)."""
    w = World.current()
    if not w.multi:
        return t
    parts = [torch.empty_like(t) for _ in range(w.size)]
    dist.all_gather(parts, t)
    return torch.cat(parts)


class DomainLoss:
    """Per-domain running loss (sum, count), reduced across the job at epoch end."""

    def __init__(self, domains):
        self.domains = list(domains)
        self.buf = {d: [] for d in self.domains}

    def update(self, per_sample_loss: np.ndarray, domain_ids: np.ndarray):
        for i, d in enumerate(self.domains):
            sel = per_sample_loss[domain_ids == i]
            if sel.size:
                self.buf[d].append(sel)

    def _local(self, d):
        if not self.buf[d]:
            return torch.zeros(2)
        v = np.concatenate(self.buf[d])
        return torch.from_numpy(np.array([v.sum(), v.size]))

    def compute(self) -> dict:
        out = {}
        for d in self.domains:
            t = self._local(d)
            if World.current().multi:
                dist.all_reduce(t)
            out[d] = (t[0] / max(t[1].item(), 1.0)).item()
        self.buf = {d: [] for d in self.domains}
        return out
