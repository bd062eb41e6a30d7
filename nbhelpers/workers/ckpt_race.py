"""The checkpoint race: rank 0 saves while the other ranks load; fixes measured in the same run.

Per trial and variant, after a barrier: rank 0 writes a state dict of ``--size-mb`` to a fresh
path; the other ranks get it as the variant says:

- ``racy``            plain ``torch.save``; readers poll for the file and load it as soon as it exists
- ``barrier``         plain ``torch.save``, then a barrier; readers load after the barrier
- ``atomic``          temp file + fsync + ``os.replace`` + fsync dir; readers poll for the final path
- ``atomic_barrier``  atomic save, then a barrier, then load
- ``broadcast``       rank 0 saves and loads; readers receive the tensors by ``dist.broadcast``
- ``verify``          plain ``torch.save``; readers wait until the zip end record is there, then load

Events: ``write`` (rank 0, start/end), ``read`` (each load attempt: ok, or fail with the exception
type and message torch raised), ``trial`` (per rank: first attempt failed?, attempts, seconds until
this rank held the state).  A reader whose first attempt fails retries (with back-off) so the
timeline shows how long the file stays torn.  The files live under ``--dir`` and are removed.

Run by hand::

    torchrun --nproc-per-node 2 -m nbhelpers.workers.ckpt_race --size-mb 50 --trials 5
"""
from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path

from nbhelpers.runtime.events import emit, error_text
from nbhelpers.workers.common import init, log

VARIANTS = ["racy", "barrier", "atomic", "atomic_barrier", "broadcast", "verify"]
BARRIER_FIRST = {"barrier", "atomic_barrier"}
ATOMIC = {"atomic", "atomic_barrier"}
N_TENSORS = 8


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m nbhelpers.workers.ckpt_race", description=__doc__.split("\n")[0])
    p.add_argument("--size-mb", type=float, default=50.0, help="state dict size, MiB (float32)")
    p.add_argument("--trials", type=int, default=10)
    p.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, from {VARIANTS}")
    p.add_argument("--dir", default=None, help="where checkpoints are written (default: <run dir>/ckpt-race)")
    p.add_argument("--timeout", type=float, default=60.0, help="process group timeout, seconds")
    p.add_argument("--poll", type=float, default=0.001, help="readers' polling interval, seconds")
    p.add_argument("--give-up", type=float, default=20.0, help="a reader stops retrying after this many seconds")
    return p.parse_args(argv)


def make_state(size_mb: float, tag: int):
    """``N_TENSORS`` float32 tensors of ``size_mb`` in all, each filled with ``tag + i`` (checkable)."""
    import torch

    n = max(1, int(size_mb * 2**20 / 4 / N_TENSORS))
    return {f"layer{i}.weight": torch.full((n,), float(tag + i)) for i in range(N_TENSORS)}


def check_state(state, tag: int) -> str | None:
    """None if ``state`` is the whole state of ``tag``, else what is wrong (a torn read that 'succeeded')."""
    if sorted(state) != sorted(f"layer{i}.weight" for i in range(N_TENSORS)):
        return f"wrong keys: {sorted(state)[:4]}"
    for i in range(N_TENSORS):
        t = state[f"layer{i}.weight"]
        if float(t[0]) != tag + i or float(t[-1]) != tag + i:
            return f"layer{i}.weight holds {float(t[0])}, expected {tag + i}"
    return None


def attempt(path: Path, tag: int, variant: str, trial: int, n: int):
    """One load attempt, reported as a ``read`` event; returns the state or None."""
    import torch

    t0 = time.time()
    try:
        state = torch.load(path, map_location="cpu")
        problem = check_state(state, tag)
        if problem:
            raise ValueError(f"loaded but wrong: {problem}")
    except Exception as exc:  # noqa: BLE001 - whatever torch raises is the measurement
        emit("read", "fail", variant=variant, trial=trial, attempt=n, start=t0, end=time.time(),
             error_type=type(exc).__name__, error=error_text(exc),
             size_seen=path.stat().st_size if path.exists() else None)
        return None
    emit("read", "ok", variant=variant, trial=trial, attempt=n, start=t0, end=time.time())
    return state


def poll_and_load(path: Path, tag: int, variant: str, trial: int, args, ready=lambda p: p.exists()):
    """Wait until ``ready(path)``, then load; retry with back-off after a failure. (attempts, first ok?)"""
    deadline = time.time() + args.give_up
    n, wait = 0, args.poll
    while time.time() < deadline:
        if not ready(path):
            time.sleep(args.poll)
            continue
        n += 1
        if attempt(path, tag, variant, trial, n) is not None:
            return n, n == 1
        time.sleep(wait)
        wait = min(wait * 2, 0.02)
    emit("read", "fail", variant=variant, trial=trial, attempt=n + 1, error_type="GaveUp",
         error=f"no successful load within {args.give_up:.0f} s")
    return n, False


def receive_broadcast(dist, state_shape):
    import torch

    out = {}
    for name, n in state_shape:
        t = torch.empty(n)
        dist.broadcast(t, src=0)
        out[name] = t
    return out


def run_trial(dist, rank: int, variant: str, trial: int, args, base: Path, state, shapes) -> None:
    import torch

    from nbhelpers.checkpoint import atomic_save, has_end_record

    path = base / f"{variant}-{trial}.pt"
    tag = 1000 * (trial + 1)
    dist.barrier()
    t0 = time.time()
    attempts, first_ok, write = 0, True, None
    if rank == 0:
        for i in range(N_TENSORS):  # this trial's values, so a stale or torn read cannot pass the check
            state[f"layer{i}.weight"].fill_(float(tag + i))
        w0 = emit("write", "running", variant=variant, trial=trial, path=path.name)["t"]
        if variant in ATOMIC:
            atomic_save(state, path)
        else:
            torch.save(state, path)
        write = time.time() - w0
        emit("write", "ok", variant=variant, trial=trial, start=w0, end=time.time(), size=path.stat().st_size)
        if variant in BARRIER_FIRST:
            dist.barrier()
        elif variant == "broadcast":
            loaded = attempt(path, tag, variant, trial, 1)  # rank 0 loads its own, finished file
            attempts, first_ok = 1, loaded is not None
            for name, _ in shapes:
                dist.broadcast(loaded[name] if loaded is not None else state[name], src=0)
    else:
        if variant in BARRIER_FIRST:
            dist.barrier()
            attempts, first_ok = poll_and_load(path, tag, variant, trial, args)
        elif variant == "broadcast":
            r0 = time.time()
            got = receive_broadcast(dist, shapes)
            problem = check_state(got, tag)
            emit("read", "fail" if problem else "ok", variant=variant, trial=trial, attempt=1, start=r0,
                 end=time.time(), via="broadcast", **({"error_type": "ValueError", "error": problem} if problem else {}))
            attempts, first_ok = 1, problem is None
        elif variant == "verify":
            attempts, first_ok = poll_and_load(path, tag, variant, trial, args, ready=has_end_record)
        else:  # racy, atomic
            attempts, first_ok = poll_and_load(path, tag, variant, trial, args)
    emit("trial", "ok" if first_ok else "fail", variant=variant, trial=trial, start=t0, end=time.time(),
         attempts=attempts, first_ok=first_ok, loaded_s=time.time() - t0, write_s=write)
    dist.barrier()
    if rank == 0:
        path.unlink(missing_ok=True)


def main(argv=None) -> None:
    args = parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        raise SystemExit(f"unknown variants {sorted(unknown)}; choose from {VARIANTS}")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    dist = init("gloo", args.timeout)  # files and CPU tensors: gloo whatever the GPUs
    rank = dist.get_rank()
    base = Path(args.dir or Path(os.environ.get("NBH_RUN_DIR", ".")) / "ckpt-race")
    if rank == 0:
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir(parents=True)
    state = make_state(args.size_mb, 0) if rank == 0 else None
    n = max(1, int(args.size_mb * 2**20 / 4 / N_TENSORS))
    shapes = [(f"layer{i}.weight", n) for i in range(N_TENSORS)]
    emit("race", "running", variants=variants, trials=args.trials, size_mb=args.size_mb, torch=torch.__version__)
    log(f"{args.trials} trials x {variants}, {args.size_mb:g} MiB state, files in {base}")
    try:
        for trial in range(args.trials):
            k = trial % len(variants)  # rotate the order: no variant always runs first or last
            for variant in variants[k:] + variants[:k]:
                run_trial(dist, rank, variant, trial, args, base, state, shapes)
    finally:
        if rank == 0:
            shutil.rmtree(base, ignore_errors=True)
    emit("race", "ok")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
