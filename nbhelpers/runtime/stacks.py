"""Python stacks of running processes, read with py-spy without stopping them.

``py-spy dump --nonblocking`` reads a process's memory while it runs (no pause: a job it reads is not
slowed); the blocking form pauses the process for the few milliseconds of the read, which gives a
consistent stack and is what a rank being torn down gets.  py-spy needs ptrace rights on the process:
root, the same user with ``kernel.yama.ptrace_scope`` 0 or 1 on a child, or ``CAP_SYS_PTRACE`` in a
container; when it cannot read a process, the text it returns says why.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

__all__ = ["DUMP_TIMEOUT_S", "dump_many", "dump_text", "py_spy"]

ANSI = re.compile(r"\x1b\[[0-9;]*m")
DUMP_TIMEOUT_S = 10.0
NO_PY_SPY = "py-spy is not installed: no stack dump (pip install py-spy)\n"


def py_spy() -> str | None:
    """The py-spy beside this Python (the venv's), else the one on PATH."""
    here = Path(sys.executable).parent / "py-spy"
    return str(here) if here.exists() else shutil.which("py-spy")


def _ignore_stop_signals() -> None:
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)


def _argv(exe: str, pid: int, nonblocking: bool) -> list[str]:
    return [exe, "dump", "--full-filenames", *(["--nonblocking"] if nonblocking else []), "--pid", str(pid)]


def _text(pid: int, rc: int | None, out: str, err: str) -> str:
    text = ANSI.sub("", out + (err if rc else ""))
    return text or f"py-spy dump of pid {pid} exited with {rc} and printed nothing\n"


def dump_text(pid: int, *, nonblocking: bool = False, timeout: float = DUMP_TIMEOUT_S) -> str:
    """All threads' Python stacks of ``pid`` as py-spy prints them, or a line saying why there are none.
    py-spy runs in a session of its own with stop signals ignored, so the TERMs that tear a world down do
    not cut the dump short; ``timeout`` still bounds it."""
    exe = py_spy()
    if exe is None:
        return NO_PY_SPY
    try:
        res = subprocess.run(_argv(exe, pid, nonblocking), capture_output=True, text=True, timeout=timeout,
                             stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_ignore_stop_signals,
                             env=dict(os.environ, NO_COLOR="1"))
    except subprocess.TimeoutExpired:
        return f"py-spy dump of pid {pid} did not finish in {timeout:.0f} s\n"
    return _text(pid, res.returncode, res.stdout, res.stderr)


def dump_many(pids: dict[int, int], *, nonblocking: bool = True, timeout: float = DUMP_TIMEOUT_S) -> dict[int, str]:
    """``dump_text`` of many processes at once (key -> pid in, key -> text out), the dumps run side by side."""
    exe = py_spy()
    if exe is None:
        return {k: NO_PY_SPY for k in pids}
    procs = {k: subprocess.Popen(_argv(exe, pid, nonblocking), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 stdin=subprocess.DEVNULL, text=True, start_new_session=True,
                                 env=dict(os.environ, NO_COLOR="1")) for k, pid in pids.items()}
    out = {}
    for k, p in procs.items():
        try:
            o, e = p.communicate(timeout=timeout)
            out[k] = _text(pids[k], p.returncode, o, e)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            out[k] = f"py-spy dump of pid {pids[k]} did not finish in {timeout:.0f} s\n"
    return out
