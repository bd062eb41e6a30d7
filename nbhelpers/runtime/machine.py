"""Share this machine between notebooks and tests running side by side, except while something measures.

Every world (:class:`~nbhelpers.runtime.launcher.Run`, a node of a multi-node run, a single-process worker)
holds a *shared* claim on the machine while its processes live; a measurement (a bandwidth sweep, the
chunking benchmark, a speed A/B test) holds an *exclusive* one: it waits until the worlds running now
have ended, and worlds started meanwhile wait until it is done.  So ``make run`` and ``make test`` can run
notebooks side by side and still measure on a quiet machine.

The claims are ``flock(2)`` locks on two files named by ``$NBH_MACHINE_LOCK`` (set by ``run-all`` and by
the test session; every process started from there inherits it).  Without it every claim is free, as in
a user's own kernel.  A waiting measurement goes first: a shared claim passes through a gate that the
measurement holds while it waits, so a stream of short worlds cannot starve it.  A measurement's own
worlds (the runs it times) claim nothing: its process already holds the machine.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["ENV", "EXCLUSIVE_WAIT_S", "exclusive", "shared", "waited"]

ENV = "NBH_MACHINE_LOCK"
EXCLUSIVE_WAIT_S = 300.0   # a measurement waits at most this long for the worlds running now, then goes on
_lock = threading.Lock()
_state = {"shared": 0, "fd": None, "exclusive": 0}  # this process's claims (one shared lock serves all its worlds)
waited: dict[str, float] = {"shared": 0.0, "exclusive": 0.0}  # seconds this process spent waiting, by kind


def _files() -> tuple[Path, Path] | None:
    base = os.environ.get(ENV)
    if not base:
        return None
    Path(base).parent.mkdir(parents=True, exist_ok=True)
    return Path(base + ".gate"), Path(base)


def _open(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT, 0o666)


@contextlib.contextmanager
def shared() -> Iterator[None]:
    """Hold the machine with others (a world's lifetime); waits while a measurement holds it."""
    files = _files()
    with _lock:
        free = files is None or _state["exclusive"] or _state["fd"] is not None
        if free:
            _state["shared"] += 1
    if not free:
        gate, main = files
        t0 = time.monotonic()
        g = _open(gate)
        try:
            fcntl.flock(g, fcntl.LOCK_EX)  # at once, unless a measurement is waiting or running
            fd = _open(main)
            fcntl.flock(fd, fcntl.LOCK_SH)
        finally:
            os.close(g)
        waited["shared"] += time.monotonic() - t0
        with _lock:
            _state["shared"] += 1
            if _state["fd"] is None:
                _state["fd"] = fd
            else:  # another thread of this process got there first
                os.close(fd)
    try:
        yield
    finally:
        with _lock:
            _state["shared"] -= 1
            if _state["shared"] == 0 and _state["fd"] is not None:
                os.close(_state["fd"])  # closing the descriptor releases the lock
                _state["fd"] = None


@contextlib.contextmanager
def exclusive() -> Iterator[None]:
    """Hold the machine alone (a measurement): waits for the worlds running now, holds back new ones.  Within a
    process that itself has a world running, or after :data:`EXCLUSIVE_WAIT_S`, it goes on without."""
    files = _files()
    with _lock:
        free = files is None or _state["exclusive"] or _state["shared"]
        _state["exclusive"] += 1
    fds: list[int] = []
    try:
        if not free:
            gate, main = files
            t0 = time.monotonic()
            fds.append(_open(gate))
            fcntl.flock(fds[0], fcntl.LOCK_EX)
            fds.append(_open(main))
            deadline = t0 + EXCLUSIVE_WAIT_S
            while True:
                try:
                    fcntl.flock(fds[1], fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.05)
            waited["exclusive"] += time.monotonic() - t0
        yield
    finally:
        for fd in fds:
            os.close(fd)
        with _lock:
            _state["exclusive"] -= 1
