"""Per-rank supervisor that torchrun starts in place of the worker.

    python -m nbhelpers.runtime.rankshim --log-dir DIR -- -m nbhelpers.workers.probe [args]
    python -m nbhelpers.runtime.rankshim --log-dir DIR -- train.py [args]

It runs ``python <args>`` as a child in a session of its own with stdin closed and stdout+stderr
merged into ``DIR/rank<R>.log``, and keeps an exit record ``DIR/rank<R>.json`` (pid, start, end,
return code, signal, and which signal, if any, it was told to stop with).  When torchrun or the
launcher sends it SIGTERM it first dumps the child's Python stack with py-spy into
``DIR/rank<R>.stack.txt`` (where was this rank when the world was torn down?) and then forwards the
signal.  If the shim itself dies, the kernel kills the child (PR_SET_PDEATHSIG), so no rank
outlives its supervisor.
"""
from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from nbhelpers.runtime.stacks import dump_text

PR_SET_PDEATHSIG = 1
STACK_DUMP_TIMEOUT_S = 10.0


def _exited(pid: int) -> bool:
    """Whether the child has exited, without reaping it (``Popen.poll`` in a signal handler answers None
    while the main thread blocks in ``wait``)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def set_parent_death_signal(sig: int) -> None:
    """Ask the kernel to send ``sig`` to this process when its parent exits (Linux only)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig)
    except (OSError, AttributeError):
        pass


def dump_stack(pid: int, out: Path) -> None:
    """Write the Python stacks of ``pid`` (all threads) to ``out``; say why when it cannot."""
    out.write_text(dump_text(pid, timeout=STACK_DUMP_TIMEOUT_S))


class Shim:
    def __init__(self, log_dir: Path, argv: list[str]):
        self.rank = os.environ.get("RANK", os.environ.get("LOCAL_RANK", "0"))
        self.dir = log_dir
        self.argv = argv
        self.record: dict = {"rank": int(self.rank), "shim_pid": os.getpid(), "argv": argv,
                             "host": os.uname().nodename, "local_rank": int(os.environ.get("LOCAL_RANK", "0"))}
        self.child: subprocess.Popen | None = None
        self.stopping = False

    def path(self, suffix: str) -> Path:
        return self.dir / f"rank{self.rank}{suffix}"

    def save(self) -> None:
        tmp = self.path(".json.tmp")
        tmp.write_text(json.dumps(self.record))
        os.replace(tmp, self.path(".json"))

    def on_signal(self, signum, _frame) -> None:
        if self.stopping:
            return
        self.stopping = True
        child = self.child
        if child is not None and _exited(child.pid):
            return  # the rank ended on its own just before the stop: run() records how, it was not stopped
        self.record.update(stop_signal=signal.Signals(signum).name, stop_time=time.time())
        if child is not None and child.poll() is None:
            if not self.path(".stack.txt").exists():  # the launcher reads every rank at once before a stop
                dump_stack(child.pid, self.path(".stack.txt"))
            self.record["stack_file"] = self.path(".stack.txt").name
            try:
                os.killpg(child.pid, signum)
            except ProcessLookupError:
                pass
        self.save()

    def run(self) -> int:
        self.dir.mkdir(parents=True, exist_ok=True)
        set_parent_death_signal(signal.SIGTERM)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self.on_signal)
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with open(self.path(".log"), "ab", buffering=0) as log:
            self.child = subprocess.Popen(
                [sys.executable, *self.argv], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=env, start_new_session=True,
                preexec_fn=lambda: set_parent_death_signal(signal.SIGKILL))
            self.record.update(pid=self.child.pid, start=time.time())
            self.save()
            rc = self.child.wait()
        self.record.update(end=time.time(), returncode=rc,
                           signal=signal.Signals(-rc).name if rc < 0 else None)
        self.save()
        return rc


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 3 or argv[0] != "--log-dir" or "--" not in argv:
        sys.exit(__doc__)
    split = argv.index("--")
    rc = Shim(Path(argv[1]), argv[split + 1:]).run()
    if rc < 0:  # die the way the child died, so torchrun reports the same signal
        if -rc not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(-rc, signal.SIG_DFL)
        os.kill(os.getpid(), -rc)
    sys.exit(rc)


if __name__ == "__main__":
    main()
