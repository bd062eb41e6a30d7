"""A job whose every step ran, failed anyway: a rank aborts in interpreter shutdown (no destroy_process_group).

Rank 0's last collective is an async all_reduce it never waits for; it ends its script without
``destroy_process_group`` while rank 1, a moment behind, has yet to join that collective.  Rank 1
joins half a second after rank 0 started shutting down; gloo's worker thread on rank 0 then finishes the collective and
drops its tensors, which needs the GIL; Python, finalizing, stops the thread (``pthread_exit``),
C++ calls ``std::terminate``: "terminate called without an active exception", SIGABRT, exit -6,
and torchrun fails the job.  An ``atexit`` handler that holds the GIL for about a second stands for
any slow shutdown (loggers flushing, DataLoader workers being joined) and makes the timing certain;
a plain script that ends right after a synchronous collective hits the same race by chance (about
one rank exit in five on an idle 2-core machine, torch 2.13, gloo; rarer under load).

Run by hand (the abort, then the fix: wait on the work, destroy the group)::

    torchrun --nproc-per-node 2 -m nbhelpers.workers.exit_abort
    torchrun --nproc-per-node 2 -m nbhelpers.workers.exit_abort --destroy

From Python: ``nbhelpers.launch("exit_abort", nproc=2)``; the verdict kind is ``exit_abort``.
"""
from __future__ import annotations

import argparse
import atexit
import time

from nbhelpers.runtime.events import emit, stage
from nbhelpers.workers.common import join, leave, log

ENDING = "exit_abort/rank0-ending"


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m nbhelpers.workers.exit_abort", description=__doc__.split("\n")[0])
    p.add_argument("--destroy", action="store_true", help="the fix: wait on the async work, destroy the group")
    p.add_argument("--timeout", type=float, default=30.0, help="process-group timeout (s)")
    p.add_argument("--slow-exit", type=int, default=100_000_000,
                   help="size of the sum an atexit handler computes holding the GIL (about 1 s per 50M)")
    p.add_argument("--lag", type=float, default=0.5, help="how long after rank 0 starts exiting rank 1 joins (s)")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    # registered before anything else, so it runs last in shutdown (atexit is last-in, first-out)
    atexit.register(sum, range(args.slow_exit))
    dist, _ = join("gloo", args.timeout)  # gloo: the thread that aborts is gloo's pt_gloo_runloop
    import torch

    rank = dist.get_rank()
    store = dist.distributed_c10d._get_default_store()
    t = torch.ones(4)
    with stage("last_step", destroy=args.destroy):
        if rank == 0:
            work = dist.all_reduce(t, async_op=True)  # the handle is dropped below unless --destroy
            if args.destroy:
                store.set(ENDING, "1")
                work.wait()
            else:
                atexit.register(store.set, ENDING, "1")  # runs first in shutdown: "rank 0 is exiting"
        else:
            store.wait([ENDING])
            time.sleep(args.lag)  # rank 0 is in its last atexit handler by then
            dist.all_reduce(t)
    if args.destroy or rank != 0:
        leave(dist, "exit_abort")
    else:
        emit("done", "ok")
        log("script ended without destroy_process_group")


if __name__ == "__main__":
    main()
