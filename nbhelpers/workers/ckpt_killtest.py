"""SIGKILL a checkpoint writer mid-save, over and over; after each kill, load the "latest".

One process imports torch once, then per kill: forks a writer that saves checkpoints in a loop
(``safe``: :class:`nbhelpers.checkpoint.CheckpointManager`; ``plain``: ``torch.save`` onto
``latest.pt``), lets it run a random time, sends it SIGKILL, and loads what a restarted job would
load.  One event per kill: the last step the writer acknowledged, whether a temp file was caught
mid-write, what loaded (step) or the error, and the temp files left after the load.

Run by hand::

    python -m nbhelpers.workers.ckpt_killtest --dir /tmp/kt --kills 20 --mode safe
    python -m nbhelpers.workers.ckpt_killtest --dir /tmp/kt --kills 20 --mode plain
"""
from __future__ import annotations

import argparse
import os
import random
import select
import shutil
import signal
import time
from pathlib import Path

from nbhelpers.runtime.events import emit, error_text


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m nbhelpers.workers.ckpt_killtest", description=__doc__.split("\n")[0])
    p.add_argument("--dir", required=True, help="checkpoint directory (emptied first, removed at the end)")
    p.add_argument("--mode", choices=["safe", "plain"], default="safe")
    p.add_argument("--kills", type=int, default=20)
    p.add_argument("--size-mb", type=float, default=8.0)
    p.add_argument("--keep", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-delay", type=float, default=None,
                   help="longest run before the kill, seconds (default: about 3 saves, measured)")
    return p.parse_args(argv)


def make_state(step: int, size_mb: float):
    import torch

    n = max(1, int(size_mb * 2**20 / 4 / 4))
    return {"step": step, **{f"layer{i}.weight": torch.full((n,), float(step)) for i in range(4)}}


def writer(d: Path, mode: str, size_mb: float, keep: int, start_step: int, ack_fd: int) -> None:
    """The child: save forever (until killed), writing each completed step to ``ack_fd``."""
    import ctypes

    import torch

    from nbhelpers.checkpoint import CheckpointManager

    ctypes.CDLL(None).prctl(1, int(signal.SIGKILL))  # die with the parent, whatever happens to it
    mgr = CheckpointManager(d, keep=keep)
    deadline = time.time() + 120
    step = start_step
    while time.time() < deadline:
        state = make_state(step, size_mb)
        if mode == "safe":
            mgr.save(state, step)
        else:
            torch.save(state, d / "latest.pt")
        os.write(ack_fd, f"{step}\n".encode())
        step += 1
    os._exit(0)


def check_loaded(state, step: int) -> str | None:
    """None when the loaded state is the whole checkpoint of ``step``."""
    bad = [k for k, v in state.items() if k != "step" and not bool((v == float(step)).all())]
    return f"tensors {bad} do not hold step {step}" if bad or state.get("step") != step else None


def load_latest(d: Path, mode: str):
    import torch

    from nbhelpers.checkpoint import CheckpointManager

    if mode == "safe":
        state, entry = CheckpointManager(d).load_latest()
        return state, entry["step"]
    state = torch.load(d / "latest.pt", map_location="cpu")
    return state, state["step"]


def temps(d: Path) -> list[str]:
    from nbhelpers.checkpoint import TEMP_MARK

    return sorted(p.name for p in d.iterdir() if TEMP_MARK in p.name) if d.is_dir() else []


def one_kill(d: Path, args, k: int, delay: float, start_step: int) -> dict:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(r)
        try:
            writer(d, args.mode, args.size_mb, args.keep, start_step, w)
        finally:
            os._exit(1)
    os.close(w)
    acked, buf, t0 = [], b"", time.time()
    while time.time() - t0 < delay:
        ready, _, _ = select.select([r], [], [], max(0.0, delay - (time.time() - t0)))
        if ready:
            chunk = os.read(r, 4096)
            if not chunk:
                break
            buf += chunk
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    buf += b"".join(iter(lambda: os.read(r, 4096), b""))
    os.close(r)
    acked = [int(x) for x in buf.split()]
    ev = {"kill": k, "delay_s": round(delay, 3), "acked": acked[-1] if acked else None,
          "saves_in_run": len(acked), "temp_at_kill": temps(d)}
    t1 = time.time()
    try:
        state, step = load_latest(d, args.mode)
        ev.update(loaded=step, problem=check_loaded(state, step))
        if ev["acked"] is not None and step < ev["acked"]:
            ev["problem"] = f"loaded step {step} but step {ev['acked']} had been saved"
    except Exception as exc:  # noqa: BLE001 - the error is the measurement
        ev.update(loaded=None, problem=error_text(exc), error_type=type(exc).__name__)
    ev.update(load_s=round(time.time() - t1, 3), temp_after_load=temps(d))
    return ev


def main(argv=None) -> None:
    args = parse_args(argv)
    d = Path(args.dir)
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    rng = random.Random(args.seed)
    os.environ["OMP_NUM_THREADS"] = "1"  # no OpenMP pool in the parent: a forked child would deadlock on it
    import torch  # once, before forking

    torch.set_num_threads(1)

    from nbhelpers.checkpoint import CheckpointManager

    t = time.time()  # step 0, saved whole before any kill; timed, so that kills land within a few saves
    if args.mode == "safe":
        CheckpointManager(d, keep=args.keep).save(make_state(0, args.size_mb), 0)
    else:
        torch.save(make_state(0, args.size_mb), d / "latest.pt")
    save_s = time.time() - t
    max_delay = args.max_delay or max(0.05, 3 * save_s)
    emit("killtest", "running", mode=args.mode, kills=args.kills, size_mb=args.size_mb, save_s=round(save_s, 3),
         max_delay_s=round(max_delay, 3))
    step = 1
    try:
        for k in range(args.kills):
            ev = one_kill(d, args, k, rng.uniform(0.3 * save_s, max_delay), step)
            step = max(step, (ev["acked"] or 0) + 1) + 1
            emit("kill", "fail" if ev["problem"] else "ok", **ev)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    emit("killtest", "ok")


if __name__ == "__main__":
    main()
