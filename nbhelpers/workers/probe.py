"""Staged start-up probe: where does a distributed start-up fail, on which rank, and how?

Stages, each reported as an event: fingerprint -> rendezvous (init_process_group) -> device ->
small_allreduce (checked) -> barrier -> large_allreduce (checked, timed) -> allgather_broadcast
(checked) -> destroy.  Faults can be injected on one rank to show each failure for real.

Run by hand (healthy, then a straggler that rank 0 will time out on after 5 s)::

    torchrun --nproc-per-node 2 -m nbhelpers.workers.probe
    torchrun --nproc-per-node 2 -m nbhelpers.workers.probe --timeout 5 --fault stall --fault-rank 1

A collective mismatch (rank 1's large all_reduce has twice the elements): gloo aborts the process
(SIGABRT) unless ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` is set, which names the mismatch in a Python error::

    torchrun --nproc-per-node 2 -m nbhelpers.workers.probe --timeout 5 --fault mismatch
    TORCH_DISTRIBUTED_DEBUG=DETAIL torchrun --nproc-per-node 2 -m nbhelpers.workers.probe --timeout 5 --fault mismatch

From a notebook: ``nbhelpers.probe(nproc=2, fault="stall")``.
"""
from __future__ import annotations

import argparse
import os
import time

from nbhelpers.runtime.events import stage
from nbhelpers.workers.common import (
    START_TIMEOUT_S,
    CheckFailed,
    closed_port,
    device_for,
    exit_now,
    init,
    leave,
    log,
    pick_backend,
    start_timeout,
    sync,
)

STAGES = ["fingerprint", "rendezvous", "device", "small_allreduce", "barrier",
          "large_allreduce", "allgather_broadcast", "destroy"]
FAULTS = ["none", "never-join", "stall", "exit", "wrong-port", "mismatch"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m nbhelpers.workers.probe", description=__doc__.split("\n")[0])
    p.add_argument("--backend", default="auto", choices=["auto", "gloo", "nccl"])
    p.add_argument("--timeout", type=float, default=30.0, help="each collective's timeout once every rank is ready, s")
    p.add_argument("--start-timeout", type=float, default=None,
                   help=f"bound on init_process_group and the first barrier, s (default {START_TIMEOUT_S:g}, "
                        "or $NBH_START_TIMEOUT)")
    p.add_argument("--size-mb", type=float, default=16.0, help="large all_reduce size in MiB (float32)")
    p.add_argument("--fault", default="none", choices=FAULTS)
    p.add_argument("--fault-rank", type=int, default=1)
    p.add_argument("--fault-stage", default="large_allreduce", choices=STAGES[2:],
                   help="stage before which 'stall' and 'exit' strike")
    p.add_argument("--stall", type=float, default=30.0, help="seconds a stalled rank sleeps")
    return p.parse_args(argv)


def inject(args, rank: int, before: str) -> None:
    """Strike the configured fault if this rank and stage are the chosen ones."""
    if rank != args.fault_rank or args.fault == "none":
        return
    if before == "rendezvous" and args.fault == "never-join":
        log(f"fault: never joining (sleeping {args.stall:.0f} s before init_process_group)")
        time.sleep(args.stall)
    elif before == "rendezvous" and args.fault == "wrong-port":
        port = closed_port()
        log(f"fault: MASTER_PORT {os.environ.get('MASTER_PORT')} -> {port} (nothing listens there)")
        os.environ["MASTER_PORT"] = str(port)
        os.environ["TORCHELASTIC_USE_AGENT_STORE"] = "False"
    elif before == args.fault_stage and args.fault == "stall":
        log(f"fault: stalling {args.stall:.0f} s before {before}")
        time.sleep(args.stall)
    elif before == args.fault_stage and args.fault == "exit":
        exit_now(3, f"fault: exit before {before}")


def check(name: str, got, want) -> None:
    if got != want:
        raise CheckFailed(f"{name}: expected {want}, got {got}")


def main(argv=None) -> None:
    args = parse_args(argv)
    rank = int(os.environ.get("RANK", "0"))
    with stage("fingerprint") as out:
        from nbhelpers.runtime.fingerprint import collect
        fp = collect()
        out["fingerprint"] = fp
        backend = pick_backend(args.backend)
        out["backend"] = backend
    log(f"torch {fp['torch']}, backend {backend}, world {os.environ.get('WORLD_SIZE')}")
    import torch

    inject(args, rank, "rendezvous")
    with stage("rendezvous", backend=backend, timeout=args.timeout,
               start_timeout=start_timeout(args.timeout, args.start_timeout)):
        dist = init(backend, args.timeout, args.start_timeout)
    world = dist.get_world_size()

    inject(args, rank, "device")
    with stage("device") as out:
        dev = device_for(backend)
        out["device"] = str(dev)

    inject(args, rank, "small_allreduce")
    with stage("small_allreduce"):
        t = torch.full((1024,), float(rank + 1), device=dev)
        dist.all_reduce(t)
        check("sum of rank+1", t[0].item(), world * (world + 1) / 2)

    inject(args, rank, "barrier")
    with stage("barrier"):
        dist.barrier()

    inject(args, rank, "large_allreduce")
    with stage("large_allreduce", size_mb=args.size_mb) as out:
        n = int(args.size_mb * 2**20 / 4)
        if args.fault == "mismatch" and rank == args.fault_rank:
            n *= 2
            log(f"fault: large all_reduce with {n} elements instead of {n // 2} (a shape mismatch)")
        t = torch.full((n,), float(rank + 1), device=dev)
        t0 = time.perf_counter()
        dist.all_reduce(t)
        sync(dev)
        secs = time.perf_counter() - t0
        check("large sum", (t.min().item(), t.max().item()), (world * (world + 1) / 2,) * 2)
        algbw = n * 4 / secs / 1e9
        out.update(seconds_op=secs, algbw_gbs=algbw, busbw_gbs=algbw * 2 * (world - 1) / world)
    log(f"large all_reduce {args.size_mb:g} MiB in {secs * 1e3:.1f} ms")

    inject(args, rank, "allgather_broadcast")
    with stage("allgather_broadcast"):
        parts = [torch.zeros(1, device=dev) for _ in range(world)]
        dist.all_gather(parts, torch.full((1,), float(rank), device=dev))
        check("all_gather ranks", [int(p.item()) for p in parts], list(range(world)))
        b = torch.full((4,), 42.0 if rank == 0 else -1.0, device=dev)
        dist.broadcast(b, src=0)
        check("broadcast from 0", b.tolist(), [42.0] * 4)

    inject(args, rank, "destroy")
    leave(dist, "probe")


if __name__ == "__main__":
    main()
