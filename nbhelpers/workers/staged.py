"""Staged multi-node test: connect -> small all_reduce -> growing sizes and iterations.

Each stage is an event carrying the node (torchrun's GROUP_RANK), so per-node progress shows
where the world got to; the first failure ends the rank with that stage named.  Sizes grow
(default 4K, 64K, 1M, 8M bytes) and so do the iterations (1, 2, 4, 8), each checked and timed:
the sweep's bandwidth shows a capped or slow link.

Run by hand on two nodes (same command on both, node rank 0 and 1; the endpoint is node 0's
address)::

    torchrun --nnodes 2 --node-rank 0 --nproc-per-node 1 --rdzv-backend c10d \\
        --rdzv-endpoint 10.0.0.1:29500 --rdzv-id job1 -m nbhelpers.workers.staged --timeout 10

From a notebook: ``nbhelpers.runtime.multinode.staged_test(...)`` or the lab in notebook 05.
"""
from __future__ import annotations

import argparse
import os
import socket
import time

from nbhelpers.runtime.events import emit, stage
from nbhelpers.workers.common import device_for, init, log, pick_backend, sync

UNITS = {"K": 2**10, "M": 2**20, "G": 2**30}


def parse_size(text: str) -> int:
    text = text.strip().upper().rstrip("B")
    return int(float(text[:-1]) * UNITS[text[-1]]) if text[-1] in UNITS else int(text)


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m nbhelpers.workers.staged", description=__doc__.split("\n")[0])
    p.add_argument("--backend", default="auto", choices=["auto", "gloo", "nccl"])
    p.add_argument("--timeout", type=float, default=30.0, help="each collective's timeout once every rank is ready, s")
    p.add_argument("--start-timeout", type=float, default=None,
                   help="bound on init_process_group and the first barrier, s (default: common.START_TIMEOUT_S, "
                        "or $NBH_START_TIMEOUT)")
    p.add_argument("--sizes", default="4K,64K,1M,8M", help="all_reduce sizes in bytes (K, M suffixes)")
    p.add_argument("--iters", default="1,2,4,8", help="iterations per size (one number, or one per size)")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    iters = [int(i) for i in args.iters.split(",")]
    iters = iters * len(sizes) if len(iters) == 1 else iters
    node = int(os.environ.get("GROUP_RANK", "0"))
    where = {"node": node, "master": f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}"}
    backend = pick_backend(args.backend)
    log(f"node {node}: connecting to {where['master']} with {backend} (timeout {args.timeout:g} s, "
        f"GLOO_SOCKET_IFNAME={os.environ.get('GLOO_SOCKET_IFNAME', '(unset)')})")
    import torch

    with stage("connect", backend=backend, **where):
        dist = init(backend, args.timeout, args.start_timeout)
    world, rank = dist.get_world_size(), dist.get_rank()
    dev = device_for(backend)

    with stage("hello", node=node) as out:  # every rank learns where the others are
        names = [None] * world
        dist.all_gather_object(names, f"node{node}/{socket.gethostname()}/pid{os.getpid()}")
        out["peers"] = names
    log(f"world of {world}: {names}")

    with stage("small_allreduce", node=node):
        t = torch.full((256,), float(rank + 1), device=dev)
        dist.all_reduce(t)
        want = world * (world + 1) / 2
        if t[0].item() != want:
            raise RuntimeError(f"small all_reduce: expected {want}, got {t[0].item()}")

    for size, n in zip(sizes, iters):
        with stage(f"allreduce_{size}", node=node, size=size, iters=n) as out:
            t = torch.ones(max(1, size // 4), device=dev)
            t0 = time.perf_counter()
            for _ in range(n):
                dist.all_reduce(t)
            sync(dev)
            secs = (time.perf_counter() - t0) / n
            if t[0].item() != world ** n:
                raise RuntimeError(f"all_reduce of {size} bytes: expected {world ** n}, got {t[0].item()}")
            out.update(seconds_op=secs, algbw_gbs=size / secs / 1e9)
        log(f"all_reduce {size} B x{n}: {secs * 1e3:.2f} ms/op, {size / secs / 1e6:.1f} MB/s")

    dist.destroy_process_group()
    emit("done", "ok", node=node)
    log("staged test passed")


if __name__ == "__main__":
    main()
