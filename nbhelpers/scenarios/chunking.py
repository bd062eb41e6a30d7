"""Notebook 03's chunking runs: whole vs chunked all_reduce measured in the same run, and a chunked
all_reduce that a rank never joins (:func:`nbhelpers.chunked.chunked_all_reduce` is the utility)."""
from __future__ import annotations

from nbhelpers.errors import WorkbookError
from nbhelpers.runtime import machine
from nbhelpers.runtime.launcher import launch
from nbhelpers.scenarios.api import Gallery

__all__ = ["compare_chunking", "missing_rank"]


def compare_chunking(size_mb: float = 64.0, chunks_mb=(1, 4, 16), *, nproc: int = 2, reps: int = 3,
                     timeout: float = 60.0, live: bool | None = None, **kw):
    """Whole vs chunked all_reduce of ``size_mb`` MiB: median time (slowest rank) and peak extra RSS.

    One row per configuration; ``ratio`` is time / whole tensor's time (same run).
    """
    import statistics

    import pandas as pd

    cfg = ",".join(str(c) for c in (0, *chunks_mb))
    with machine.exclusive():  # timings and RSS: nothing else runs on this machine meanwhile
        res = launch("chunking", ["--size-mb", str(size_mb), "--chunks-mb", cfg, "--reps", str(reps),
                                  "--timeout", str(timeout), "--chunk-timeout", str(timeout)],
                     nproc=nproc, timeout=timeout * 3 + 60, live=live, name="chunking", **{"hang_after": None, **kw})
    if not res.ok:
        raise WorkbookError(f"the chunking run failed: {res.verdict.reason}", f"logs in {res.log_dir}")
    by: dict[str, list[dict]] = {}
    for e in res.events:
        if e.get("status") == "ok" and "times" in e:
            by.setdefault(e["stage"], []).append(e)
    rows = []
    for name, evs in by.items():
        per_rep = [max(ts) for ts in zip(*(e["times"] for e in evs))]  # the slowest rank, per rep
        peak = max(max(e["peak_extra"]) for e in evs)
        rows.append({"config": name, "chunk MiB": evs[0]["chunk_bytes"] / 2**20 or size_mb,
                     "calls": evs[0]["chunks"], "median ms": round(statistics.median(per_rep) * 1e3, 1),
                     "min ms": round(min(per_rep) * 1e3, 1),
                     "busbw GB/s": round(evs[0]["size"] / statistics.median(per_rep) / 1e9 * 2 * (nproc - 1) / nproc, 3),
                     "peak extra RSS MiB": round(peak / 2**20, 1), "check": evs[0]["check"]})
    table = pd.DataFrame(rows).set_index("config")
    table["time / whole"] = (table["median ms"] / table.loc["whole", "median ms"]).round(2)
    return Gallery(table, {"chunking": res})


def missing_rank(size_mb: float = 16.0, chunk_mb: float = 1.0, *, chunk_timeout: float = 2.0, nproc: int = 2,
                 fault_rank: int = 1, stall: float = 30.0, live: bool | None = None, **kw):
    """Chunked all_reduce while rank ``fault_rank`` never calls it: the first chunk waits its full bound."""
    args = ["--size-mb", str(size_mb), "--chunks-mb", str(chunk_mb), "--chunk-timeout", str(chunk_timeout),
            "--fault", "missing", "--fault-rank", str(fault_rank), "--stall", str(stall),
            "--timeout", str(max(10.0, 3 * chunk_timeout))]
    return launch("chunking", args, nproc=nproc, timeout=chunk_timeout + stall + 30, live=live,
                  name="chunked-missing-rank", **kw)
