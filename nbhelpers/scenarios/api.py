"""What a scenario that starts several runs returns: the table to look at, and the runs behind it."""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["Gallery", "run_side_by_side"]


@dataclass
class Gallery:
    """Runs of one scenario side by side.

    ``table`` is a DataFrame with one row per run (or per measurement); ``runs`` maps each row's key to
    what produced it (a :class:`~nbhelpers.runtime.launcher.RunResult`, or a lab scenario); ``summary``
    holds counts a scenario adds.  The table's own API is reachable on the gallery itself
    (``gallery.loc[...]``, ``gallery["status"]``), so a notebook reads it like the DataFrame it shows.
    """
    table: Any
    runs: dict[str, Any] = field(default_factory=dict)
    summary: dict = field(default_factory=dict)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.table, name)

    def __getitem__(self, key):
        return self.table[key]

    def __len__(self) -> int:
        return len(self.table)

    def __repr__(self) -> str:
        return f"<Gallery {len(self.table)} rows, runs: {', '.join(map(str, self.runs)) or 'none'}>\n{self.table!r}"

    def _repr_html_(self) -> str:
        return self.table._repr_html_()


def run_side_by_side(jobs: dict[str, Callable[[], Any]], parallel: int = 2) -> dict[str, Any]:
    """Run independent jobs (each starts and waits for its own world) ``parallel`` at a time; results in the
    order of ``jobs``, one progress line per finished job.  An interrupt stops every world still running.

    For galleries of faults whose time is spent waiting on timeouts: two worlds side by side halve the
    wait.  Not for runs that measure bandwidth or time, which must have the machine to themselves."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from nbhelpers.runtime import procs

    if parallel <= 1:
        return {k: job() for k, job in jobs.items()}
    done: dict[str, Any] = {}
    t0 = time.monotonic()
    pool = ThreadPoolExecutor(max_workers=parallel)
    try:
        futures = {pool.submit(job): key for key, job in jobs.items()}
        for fut in as_completed(futures):
            key = futures[fut]
            done[key] = fut.result()
            status = getattr(done[key], "status", "done")
            print(f"[{time.monotonic() - t0:5.1f}s] {key}: {status}", file=sys.stderr, flush=True)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        procs.stop_all()
        raise
    finally:
        pool.shutdown(wait=True)
    return {k: done[k] for k in jobs}
