"""Chunked vs whole all_reduce: time and peak memory per chunk size; and a rank that never comes.

Each configuration (``--chunks-mb``, 0 = the whole tensor in one call) runs ``--reps`` times on a
``--size-mb`` float32 tensor; each rep is timed from a barrier and its peak extra RSS sampled, and
the result is checked.  With ``--fault missing`` rank ``--fault-rank`` never calls the all_reduce
(it sleeps), and the others' first chunk times out after ``--chunk-timeout`` seconds.

Run by hand::

    torchrun --nproc-per-node 2 -m nbhelpers.workers.chunking --size-mb 64 --chunks-mb 0,1,4,16
    torchrun --nproc-per-node 2 -m nbhelpers.workers.chunking --fault missing --chunk-timeout 2
"""
from __future__ import annotations

import argparse
import time

from nbhelpers.chunked import PeakRSS, chunk_plan, chunked_all_reduce
from nbhelpers.runtime.events import emit, stage
from nbhelpers.workers.common import join, leave, log, sync


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m nbhelpers.workers.chunking", description=__doc__.split("\n")[0])
    p.add_argument("--size-mb", type=float, default=64.0)
    p.add_argument("--chunks-mb", default="0,1,4,16", help="comma list of chunk sizes in MiB; 0 = whole tensor")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--timeout", type=float, default=60.0, help="process-group timeout, seconds")
    p.add_argument("--chunk-timeout", type=float, default=30.0, help="bound on each chunk's wait, seconds")
    p.add_argument("--fault", default="none", choices=["none", "missing"])
    p.add_argument("--fault-rank", type=int, default=1)
    p.add_argument("--stall", type=float, default=30.0)
    p.add_argument("--backend", default="auto", choices=["auto", "gloo", "nccl"])
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    import torch

    dist, dev = join(args.backend, args.timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    numel = int(args.size_mb * 2**20 / 4)
    t = torch.empty(numel, device=dev)
    want = world * (world + 1) / 2
    if args.fault == "missing":
        chunk = int(float(args.chunks_mb.split(",")[-1]) * 2**20)
        name = f"chunked {chunk >> 20} MiB"
        if rank == args.fault_rank:
            emit("elsewhere", "running", note="this rank never calls the all_reduce")
            log(f"fault: rank {rank} never calls the all_reduce (sleeping {args.stall:g} s)")
            time.sleep(args.stall)
            emit("elsewhere", "ok")
        else:
            chunks = len(chunk_plan(numel, 4, chunk))
            with stage(name, chunk_bytes=chunk, chunks=chunks, chunk_timeout=args.chunk_timeout) as out:
                t.fill_(rank + 1)
                done = []
                chunked_all_reduce(t, chunk, timeout_s=args.chunk_timeout,
                                   progress=lambda i, n, b, s: done.append(i) or emit(name, "progress", done=i, of=n))
                out["chunks_done"] = len(done)
        return
    with stage("warm-up"):  # one untimed call each way, so that the first configuration pays no first-use costs
        dist.all_reduce(t)
        chunked_all_reduce(t, 1 << 20)
    for mb in [float(x) for x in args.chunks_mb.split(",")]:
        chunk = int(mb * 2**20)
        name = "whole" if not chunk else f"chunked {mb:g} MiB"
        chunks = len(chunk_plan(numel, 4, chunk))
        with stage(name, chunk_bytes=chunk, chunks=chunks, size=numel * 4) as out:
            times, peaks = [], []
            for _ in range(args.reps):
                t.fill_(rank + 1)
                dist.barrier()
                with PeakRSS() as mem:
                    t0 = time.perf_counter()
                    if chunk:
                        chunked_all_reduce(t, chunk, timeout_s=args.chunk_timeout)
                    else:
                        dist.all_reduce(t)
                    sync(dev)
                    times.append(time.perf_counter() - t0)
                peaks.append(mem.extra_bytes)
                if (t.min().item(), t.max().item()) != (want, want):
                    raise RuntimeError(f"{name}: wrong result {t.min().item()}..{t.max().item()}, expected {want}")
            out.update(times=times, peak_extra=peaks, check="ok")
    leave(dist, "chunking")


if __name__ == "__main__":
    main()
