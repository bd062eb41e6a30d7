"""What each timeout really bounds: measured on a collective that a peer never joins.

Rank ``--late-rank`` takes part in setting up four process groups and then never calls another
collective (it waits on the store until the others are done).  Rank 0 measures, each on a fresh
group so that one failure does not poison the next:

1. ``pg-timeout``: a blocking all_reduce on a group created with ``timeout=--pg-timeout``;
2. ``wait(timeout)``: ``all_reduce(async_op=True).wait(timeout=--wait-timeout)``;
3. ``monitored_barrier``: ``monitored_barrier(timeout=--monitored-timeout, wait_all_ranks=True)``;
4. ``signal.alarm``: ``signal.alarm(--alarm)`` around a blocking all_reduce (the often-suggested
   ``nccl_timeout_handler``).

Each result is an event ``measure`` with the bound asked for, the seconds until control came
back, and what was raised.  Run by hand::

    torchrun --nproc-per-node 2 -m nbhelpers.workers.timeouts --pg-timeout 3 --alarm 1
"""
from __future__ import annotations

import argparse
import signal
import time
from datetime import timedelta

from nbhelpers.runtime.events import emit, error_text, stage
from nbhelpers.workers.common import exit_now, init, log, ready, shorten, start_timeout


class AlarmFired(Exception):
    """Raised by the SIGALRM handler, as the often-suggested nccl_timeout_handler does."""


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m nbhelpers.workers.timeouts", description=__doc__.split("\n")[0])
    p.add_argument("--pg-timeout", type=float, default=3.0)
    p.add_argument("--wait-timeout", type=float, default=1.0)
    p.add_argument("--monitored-timeout", type=float, default=1.5)
    p.add_argument("--alarm", type=float, default=1.0)
    p.add_argument("--late-rank", type=int, default=1)
    return p.parse_args(argv)


def measure(name: str, bound: float, fn) -> None:
    t0 = time.perf_counter()
    try:
        fn()
        raised, text = None, ""
    except BaseException as exc:  # noqa: BLE001 - we report whatever came back
        raised, text = type(exc).__name__, error_text(exc).splitlines()[-1][:300]
    took = time.perf_counter() - t0
    emit("measure", "info", mechanism=name, bound_s=bound, took_s=took, raised=raised, error=text)
    log(f"{name}: asked {bound:g} s, control back after {took:.2f} s, raised {raised}: {text[:120]}")


def main(argv=None) -> None:
    args = parse_args(argv)
    import torch

    with stage("rendezvous", backend="gloo"):
        dist = init("gloo", max(args.pg_timeout, 10.0))
    rank = dist.get_rank()
    with stage("groups"):  # made with the start-up timeout, shortened once every rank has them (common.init)
        groups = [dist.new_group(backend="gloo", timeout=timedelta(seconds=start_timeout(args.pg_timeout)))
                  for _ in range(4)]
        for g in groups:
            ready(dist, "gloo", g)
            shorten(dist, args.pg_timeout, g)
    store = dist.distributed_c10d._get_default_store()
    if rank == args.late_rank:
        with stage("elsewhere", note="never calls the collectives rank 0 measures"):
            store.wait(["timeouts-done"], timedelta(seconds=120))
        emit("done", "ok")
        return
    if rank != 0:
        store.wait(["timeouts-done"], timedelta(seconds=120))
        emit("done", "ok")
        return
    t = torch.ones(1024)
    with stage("measure-all"):
        measure("pg timeout (init/new_group timeout=)", args.pg_timeout, lambda: dist.all_reduce(t, group=groups[0]))
        measure("work.wait(timeout=)", args.wait_timeout,
                lambda: dist.all_reduce(t, group=groups[1], async_op=True).wait(
                    timeout=timedelta(seconds=args.wait_timeout)))
        measure("monitored_barrier(timeout=)", args.monitored_timeout,
                lambda: dist.monitored_barrier(groups[2], timeout=timedelta(seconds=args.monitored_timeout),
                                               wait_all_ranks=True))

        def alarmed():
            def handler(signum, frame):
                raise AlarmFired(f"signal.alarm({args.alarm:g}) fired")
            old = signal.signal(signal.SIGALRM, handler)
            signal.setitimer(signal.ITIMER_REAL, args.alarm)
            try:
                dist.all_reduce(t, group=groups[3])
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, old)
        measure("signal.alarm around the call", args.alarm, alarmed)
    store.set("timeouts-done", "1")
    emit("done", "ok")
    log("measured every timeout")
    # no destroy_process_group: the groups have collectives in flight that will never complete; and no interpreter
    # shutdown either: gloo threads torn down at exit may abort the rank (SIGABRT, see the culprit rule exit_without_destroy)
    exit_now(0, "the groups still have collectives in flight, so the interpreter's shutdown is skipped")


if __name__ == "__main__":
    main()
