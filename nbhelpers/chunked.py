"""Chunked all_reduce in place, each chunk's wait bounded, with progress.

    chunked_all_reduce(t, chunk_bytes=16 << 20, timeout_s=30, progress=print_progress)

What it buys: every wait is bounded by ``timeout_s`` (``work.wait(timeout=...)``, which really
returns control: measured in notebook 03), you see how far it got, and a backend that copies or
stages the whole buffer (NCCL's registration, a host staging copy, ``torch.cat`` of gathered
pieces) only ever holds one chunk.  What it does not buy: speed (more calls, more latency), or any
cure for a rank that never arrives: the first chunk then waits exactly as long as the whole tensor
would have.  After a chunk times out the collective is still in flight in the backend: the process
group cannot be trusted any more; abort (exit, or ``destroy_process_group``) instead of retrying.
"""
from __future__ import annotations

import math
import time
from datetime import timedelta
from typing import Callable


class ChunkTimeout(RuntimeError):
    """One chunk's all_reduce did not complete within its bound (a peer did not take part)."""

    def __init__(self, index: int, chunks: int, done_bytes: int, total_bytes: int, timeout_s: float, cause: str):
        self.index, self.chunks, self.done_bytes, self.total_bytes = index, chunks, done_bytes, total_bytes
        self.timeout_s = timeout_s
        super().__init__(f"chunk {index + 1}/{chunks} of the all_reduce timed out after {timeout_s:g} s "
                         f"({done_bytes} of {total_bytes} bytes done): a peer never took part in it. "
                         f"The process group is no longer usable; backend said: {cause}")


def chunk_plan(numel: int, elem_bytes: int, chunk_bytes: int | None) -> list[tuple[int, int]]:
    """(start, stop) element ranges; ``chunk_bytes`` None or 0 means one chunk (the whole tensor)."""
    if numel == 0:
        return []
    per = numel if not chunk_bytes else max(1, chunk_bytes // elem_bytes)
    return [(s, min(s + per, numel)) for s in range(0, numel, per)]


def chunked_all_reduce(tensor, chunk_bytes: int | None = 64 << 20, *, timeout_s: float | None = None, op=None,
                       group=None, progress: Callable[[int, int, int, float], None] | None = None):
    """Reduce ``tensor`` in place, ``chunk_bytes`` at a time; raises :class:`ChunkTimeout` on a stuck chunk.

    ``tensor`` must be contiguous: the often-copied ``_chunked_all_reduce`` called ``tensor.flatten()``, which
    copies a non-contiguous tensor, so its result landed in the copy and the caller's tensor stayed unreduced.
    ``progress(done_chunks, chunks, done_bytes, seconds)`` is called after each chunk.
    """
    import torch.distributed as dist

    if not tensor.is_contiguous():
        raise ValueError("chunked_all_reduce needs a contiguous tensor: a flattened copy of a non-contiguous one "
                         "would be reduced instead of the tensor itself (call .contiguous() and copy back)")
    op = dist.ReduceOp.SUM if op is None else op
    flat = tensor.view(-1)
    plan = chunk_plan(flat.numel(), flat.element_size(), chunk_bytes)
    total = flat.numel() * flat.element_size()
    t0 = time.perf_counter()
    for i, (a, b) in enumerate(plan):
        work = dist.all_reduce(flat[a:b], op=op, group=group, async_op=True)
        try:
            if timeout_s is None:
                work.wait()
            else:
                work.wait(timeout=timedelta(seconds=timeout_s))
        except RuntimeError as exc:
            raise ChunkTimeout(i, len(plan), a * flat.element_size(), total, timeout_s or math.nan,
                               str(exc).splitlines()[0][:300]) from exc
        if progress is not None:
            progress(i + 1, len(plan), b * flat.element_size(), time.perf_counter() - t0)
    return tensor


class PeakRSS:
    """Peak resident memory above the level at entry, sampled every ``every`` seconds in a thread.

    Reads /proc via psutil; an allocation freed between two samples can be missed, so treat small
    differences as noise.
    """

    def __init__(self, every: float = 0.001):
        self.every, self.peak, self.base = every, 0, 0

    def __enter__(self):
        import threading

        import psutil

        self._proc = psutil.Process()
        self.base = self.peak = self._proc.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self._proc.memory_info().rss)
            self._stop.wait(self.every)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._proc.memory_info().rss)

    @property
    def extra_bytes(self) -> int:
        return self.peak - self.base


# ---- kernel side: measure it in a torchrun world ------------------------------------------------
