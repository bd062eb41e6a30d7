"""Run a command with N busy loops beside it: the workbook on a slower or busier machine.

    python bench/busy.py 2 -- make test          # or: make test BUSY=2, make run BUSY=2
    python bench/busy.py 2 --seconds 60          # just burn two cores for a minute

Each busy loop is a Python process spinning on the CPU (no sleep, no I/O), so two loops on two
cores give every other process about half the machine. They start before the command, are stopped
when it ends (also on Ctrl-C or SIGTERM: they get SIGKILL), and die with this script if it is
killed (they poll their parent). The command's exit status is this script's.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

SPIN = "import os, time\nppid = os.getppid()\nwhile os.getppid() == ppid:\n    t = time.monotonic()\n" \
       "    while time.monotonic() - t < 0.5:\n        pass\n"


def start(n: int) -> list[subprocess.Popen]:
    """``n`` busy loops, each its own Python process; each ends by itself once this process is gone."""
    return [subprocess.Popen([sys.executable, "-c", SPIN], stdin=subprocess.DEVNULL) for _ in range(n)]


def stop(loops: list[subprocess.Popen]) -> None:
    for p in loops:
        p.kill()
    for p in loops:
        p.wait()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("n", type=int, help="how many busy loops (0: run the command alone)")
    p.add_argument("--seconds", type=float, default=None, help="with no command: spin this long")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- the command to run beside them")
    args = p.parse_args(argv)
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd and args.seconds is None:
        p.error("give a command after --, or --seconds")
    loops = start(max(0, args.n))
    if loops:
        print(f"busy.py: {len(loops)} busy loop(s) beside: {' '.join(cmd) or f'{args.seconds:g} s'}",
              file=sys.stderr, flush=True)

    def on_signal(signum, _frame):
        stop(loops)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    try:
        if not cmd:
            time.sleep(args.seconds)
            return 0
        return subprocess.call(cmd, env={**os.environ, "NBH_BUSY": str(len(loops))})  # tests can tell
    except KeyboardInterrupt:
        return 130
    finally:
        stop(loops)


if __name__ == "__main__":
    sys.exit(main())
