"""Short all_reduce benchmark with a compute step: what an env setting does to speed, per rank.

Stages, each an event: rendezvous -> compute (an n x n float32 matmul, repeated; the median step time and
torch's intra-op thread count) -> allreduce (each size repeated after a warm-up; median time, algbw and
busbw of the largest size, every size in ``sizes``) -> destroy.

Run by hand::

    torchrun --nproc-per-node 2 -m nbhelpers.workers.allreduce_bench --sizes-kb 64,1024,4096
    OMP_NUM_THREADS=2 torchrun --nproc-per-node 2 -m nbhelpers.workers.allreduce_bench --matmul 384

From a notebook: ``nbhelpers.ab_test([...configs...], target="allreduce_bench")``.
"""
from __future__ import annotations

import argparse
import statistics
import time

from nbhelpers.runtime.events import stage
from nbhelpers.workers.common import join, log, sync


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m nbhelpers.workers.allreduce_bench",
                                description=__doc__.split("\n")[0])
    p.add_argument("--backend", default="auto", choices=["auto", "gloo", "nccl"])
    p.add_argument("--timeout", type=float, default=30.0, help="init and collective timeout, seconds")
    p.add_argument("--sizes-kb", default="64,1024,4096", help="comma-separated all_reduce sizes in KiB")
    p.add_argument("--iters", type=int, default=5, help="timed repetitions per size (after one warm-up)")
    p.add_argument("--matmul", type=int, default=256, help="n of the n x n compute step; 0 skips it")
    p.add_argument("--matmul-iters", type=int, default=5)
    return p.parse_args(argv)



def main(argv=None) -> None:
    args = parse_args(argv)
    import torch

    dist, dev = join(args.backend, args.timeout)
    world = dist.get_world_size()

    if args.matmul > 0:
        with stage("compute", n=args.matmul) as out:
            a = torch.randn(args.matmul, args.matmul, device=dev)
            times = []
            for _ in range(args.matmul_iters + 1):
                t0 = time.perf_counter()
                (a @ a).sum().item()
                sync(dev)
                times.append(time.perf_counter() - t0)
            out.update(step_ms=statistics.median(times[1:]) * 1e3, threads=torch.get_num_threads())
        log(f"compute: {args.matmul}x{args.matmul} matmul {out['step_ms']:.2f} ms/step with "
            f"{out['threads']} intra-op thread(s)")

    sizes = [float(s) for s in args.sizes_kb.split(",") if s.strip()]
    with stage("allreduce", sizes_kb=sizes, iters=args.iters) as out:
        results = []
        for kb in sizes:
            n = max(1, int(kb * 1024 / 4))
            t = torch.ones(n, device=dev)
            times = []
            for _ in range(args.iters + 1):
                sync(dev)
                t0 = time.perf_counter()
                dist.all_reduce(t)
                sync(dev)
                times.append(time.perf_counter() - t0)
            secs = statistics.median(times[1:])
            algbw = n * 4 / secs / 1e9
            results.append({"size_kb": kb, "ms": secs * 1e3, "algbw_gbs": algbw,
                            "busbw_gbs": algbw * 2 * (world - 1) / world})
        out.update(sizes=results, busbw_gbs=results[-1]["busbw_gbs"], op_ms=results[-1]["ms"])
    for r in results:
        log(f"all_reduce {r['size_kb']:g} KiB: {r['ms']:.3f} ms, busbw {r['busbw_gbs']:.3f} GB/s")

    with stage("destroy"):
        dist.destroy_process_group()
    log("bench passed")


if __name__ == "__main__":
    main()
