"""Process trees: stop them for sure (TERM, grace, KILL), and never leave one behind.

Every run registers its root process here; an ``atexit`` hook (kernel shutdown or restart) stops
whatever is still alive.  A kernel killed with SIGKILL cannot run hooks: the launcher covers that
case with PR_SET_PDEATHSIG on torchrun, and the rank shim with the same on each rank.
"""
from __future__ import annotations

import atexit
import ctypes
import os
import signal
import threading
import time
from contextlib import contextmanager

import psutil

_live: dict[int, "psutil.Process"] = {}
_lock = threading.Lock()
_hook_installed = False
_prctl = None


def parent_death_preexec(sig: int = signal.SIGTERM):
    """A ``preexec_fn`` that makes the child receive ``sig`` when the spawning thread exits.

    libc is looked up before the fork, so the child only makes one plain system call.
    """
    global _prctl
    if _prctl is None:
        _prctl = ctypes.CDLL(None, use_errno=True).prctl
    prctl = _prctl
    return lambda: prctl(1, int(sig))


def register(proc: psutil.Process) -> None:
    global _hook_installed
    with _lock:
        _live[proc.pid] = proc
        if not _hook_installed:
            atexit.register(stop_all)
            _hook_installed = True


def unregister(pid: int) -> None:
    with _lock:
        _live.pop(pid, None)


def snapshot(root: psutil.Process) -> list[psutil.Process]:
    """The root and every descendant now alive (processes keep identity even once orphaned)."""
    try:
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


RUNNING = object()   # exit_status(): the process has not ended


def exit_status(pid: int):
    """:data:`RUNNING` while ``pid`` runs; once it has ended, its return code as ``Popen`` gives it (negative: the
    signal) while it waits to be reaped (Linux keeps the status in ``/proc/PID/stat``), else None (reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None if not psutil.pid_exists(pid) else RUNNING
    if fields[0] not in ("Z", "X"):
        return RUNNING
    try:
        status = int(fields[49])   # field 52: the exit status in the form waitpid() reports it
    except (IndexError, ValueError):
        return None
    return -(status & 0x7F) if status & 0x7F else (status >> 8) & 0xFF


def alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def stop_tree(root: psutil.Process, first: list[psutil.Process] | None = None, grace: float = 8.0) -> dict:
    """TERM ``first`` (default: the root), wait up to ``grace`` s, then KILL every survivor.

    Returns what happened: how many were alive, how many needed KILL, and how long it took.
    """
    t0 = time.monotonic()
    tree = snapshot(root)
    for p in first if first is not None else [root]:
        try:
            p.send_signal(signal.SIGTERM)
        except psutil.NoSuchProcess:
            pass
    deadline = t0 + grace
    while time.monotonic() < deadline:
        tree = list({p.pid: p for p in tree + [c for q in alive(tree) for c in snapshot(q)[1:]]}.values())
        if not alive(tree):
            break
        time.sleep(0.05)
    survivors = alive(tree)
    for p in survivors:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(survivors, timeout=3)
    return {"processes": len(tree), "killed": len(survivors), "seconds": time.monotonic() - t0}


def find_runs(under: str = "") -> list[psutil.Process]:
    """Live processes started by a workbook run (tagged NBH_RUN_DIR) whose run dir starts with ``under``."""
    out = []
    for p in psutil.process_iter(["status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and p.environ().get("NBH_RUN_DIR", "\0").startswith(under):
                out.append(p)
        except psutil.Error:
            pass
    return out


def stop_all() -> None:
    with _lock:
        roots = list(_live.values())
        _live.clear()
    for root in roots:
        stop_tree(root, grace=3.0)


@contextmanager
def signals_deferred():
    """Hold SIGINT and SIGTERM until the block ends, then act on the first one as its handler would have (raise
    KeyboardInterrupt, or end the process).  For blocks that must not be cut short: a KeyboardInterrupt raised while
    Python imports torch leaves torch half-initialised, and the supervisor then died of SIGSEGV (a SIGTERM that
    arrived while the hang watch read the ranks' collective records, in make test).  Outside the main thread,
    where handlers cannot be set, the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []
    old = {s: signal.signal(s, lambda n, _f: got.append(n)) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if got:
            h = old[signal.Signals(got[0])]
            if callable(h):
                h(got[0], None)
            elif h == signal.SIG_DFL:
                os.kill(os.getpid(), got[0])
