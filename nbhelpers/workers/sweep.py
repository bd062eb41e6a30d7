"""Bandwidth sweep, like nccl-tests' all_reduce_perf: per size, warm-up, timed iterations, a check.

For each size (bytes, nccl-tests' meaning of ``size``, see :mod:`nbhelpers.diagnosis.busbw`) every rank runs
``--warmup`` untimed calls, then ``--iters`` timed calls (a barrier first, the average per call), and
one checked call on known values.  Each size is one stage event carrying this rank's times; the
kernel takes the slowest rank per size (as nccl-tests does) and computes algbw and busbw.

Run by hand::

    torchrun --nproc-per-node 2 -m nbhelpers.workers.sweep --sizes 4K:16M:4 --op all_reduce

From a notebook: ``nbhelpers.scenarios.sweep(sizes="4K:16M:4")``.
"""
from __future__ import annotations

import argparse
import time

from nbhelpers.diagnosis.busbw import OPS, human, parse_size, size_range
from nbhelpers.runtime.events import stage
from nbhelpers.workers.common import CheckFailed, join, leave, log, sync


def parse_sizes(text: str) -> list[int]:
    """``"4K:256M:4"`` (lo:hi:factor) or ``"1M,16M,64M"``."""
    if ":" in text:
        parts = text.split(":")
        return size_range(parts[0], parts[1], int(parts[2]) if len(parts) > 2 else 4)
    return [parse_size(s) for s in text.split(",") if s.strip()]


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m nbhelpers.workers.sweep", description=__doc__.split("\n")[0])
    p.add_argument("--op", default="all_reduce", choices=OPS)
    p.add_argument("--sizes", default="4K:256M:4", help="lo:hi:factor or a comma list (bytes, K/M/G suffixes)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--backend", default="auto", choices=["auto", "gloo", "nccl"])
    p.add_argument("--timeout", type=float, default=60.0, help="process-group timeout, seconds")
    return p.parse_args(argv)


class Bench:
    """Buffers and one call of ``op`` for ``size`` bytes on this rank (float32)."""

    def __init__(self, op: str, size: int, world: int, rank: int, dev):
        import torch
        import torch.distributed as dist

        self.op, self.world, self.rank, self.dist = op, world, rank, dist
        numel = max(size // 4 // world * world, world)  # divisible by the world for gather/scatter
        self.numel = numel
        part = numel // world
        z = lambda k: torch.zeros(k, device=dev)  # noqa: E731  zeros stay zeros: no overflow over iterations
        if op == "all_reduce":
            self.a = z(numel)
        elif op == "all_gather":
            self.a, self.b = z(part), z(numel)
        elif op == "reduce_scatter":
            self.a, self.b = z(numel), z(part)
        else:
            self.a = z(numel)

    def call(self, async_op: bool = False):
        d = self.dist
        if self.op == "all_reduce":
            return d.all_reduce(self.a, async_op=async_op)
        if self.op == "all_gather":
            return d.all_gather_into_tensor(self.b, self.a, async_op=async_op)
        if self.op == "reduce_scatter":
            return d.reduce_scatter_tensor(self.b, self.a, async_op=async_op)
        return d.broadcast(self.a, src=0, async_op=async_op)

    def check(self) -> None:
        """Fill with known values, run once, compare; leaves zeros behind for the next timings."""
        import torch

        n, r = self.world, self.rank
        if self.op == "all_reduce":
            self.a.fill_(r + 1)
            self.call()
            got, want = (self.a.min().item(), self.a.max().item()), (n * (n + 1) / 2,) * 2
        elif self.op == "all_gather":
            self.a.fill_(r + 1)
            self.call()
            got = self.b.view(n, -1)[:, 0].tolist()
            want = [float(i + 1) for i in range(n)]
            got = got if bool((self.b.view(n, -1) == torch.tensor(want, device=self.b.device)[:, None]).all()) else None
        elif self.op == "reduce_scatter":
            self.a.fill_(r + 1)
            self.call()
            got, want = (self.b.min().item(), self.b.max().item()), (n * (n + 1) / 2,) * 2
        else:
            self.a.fill_(42.0 if r == 0 else -1.0)
            self.call()
            got, want = (self.a.min().item(), self.a.max().item()), (42.0, 42.0)
        if got != want:
            raise CheckFailed(f"{self.op} of {human(self.numel * 4)}: expected {want}, got {got}")
        for t in (getattr(self, "a", None), getattr(self, "b", None)):
            if t is not None:
                t.zero_()



def main(argv=None) -> None:
    args = parse_args(argv)
    dist, dev = join(args.backend, args.timeout)
    world, rank = dist.get_world_size(), dist.get_rank()
    sizes = parse_sizes(args.sizes)
    log(f"{args.op} sweep over {len(sizes)} sizes {human(sizes[0])}..{human(sizes[-1])}, world {world}, {dist.get_backend()}")
    for i, size in enumerate(sizes):
        with stage(f"{human(size)}", op=args.op, size=size, index=i, of=len(sizes)) as out:
            b = Bench(args.op, size, world, rank, dev)
            for _ in range(args.warmup):
                b.call()
            sync(dev)
            dist.barrier()
            times = []
            for _ in range(args.iters):
                t0 = time.perf_counter()
                b.call()
                sync(dev)
                times.append(time.perf_counter() - t0)
            b.check()
            out.update(bytes=b.numel * 4, times=times, check="ok")
            del b
    leave(dist, "sweep")


if __name__ == "__main__":
    main()
