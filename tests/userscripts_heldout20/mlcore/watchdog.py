"""Hang watchdog: if the training loop stops making progress, dump stacks and kill
the process so the launcher can restart the job instead of burning allocation."""
from __future__ import annotations

import faulthandler
import logging
import os
import signal
import sys
import threading
import time

log = logging.getLogger("mlcore.watchdog")


class HangWatchdog:
    def __init__(self, timeout_s: float, poll_s: float = 0.5):
        self.timeout_s, self.poll_s = timeout_s, poll_s
        self._last = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="hang-watchdog")

    def kick(self, **_):
        self._last = time.monotonic()

    def attach(self, bus):
        bus.on("log", self.kick)
        return self

    def start(self):
        self._last = time.monotonic()
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()

    def _run(self):
        while not self._stop.wait(self.poll_s):
            idle = time.monotonic() - self._last
            if idle > self.timeout_s:
                sys.stderr.write(f"watchdog: no progress for {idle:.1f}s, dumping stacks and killing pid {os.getpid()}\n")
                faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
                sys.stderr.flush()
                os.kill(os.getpid(), signal.SIGKILL)
