"""Kernel side of the bandwidth sweep: launch it, tabulate algbw/busbw per size (the chart: views.incidents).

    table = sweep(sizes="4K:16M:4")        # a DataFrame, one row per size; table.runs["sweep"]
    nb.sweep_chart(table)                  # log-log plotly chart of busbw (and time) vs size

Per size the time is the *slowest* rank's average per call (nccl-tests reports the same), so one
slow rank shows up as a slow world.
"""
from __future__ import annotations

import statistics

from nbhelpers.diagnosis.busbw import bus_factor, human
from nbhelpers.runtime import machine
from nbhelpers.runtime.launcher import launch
from nbhelpers.scenarios.api import Gallery


def sweep_args(*, op: str = "all_reduce", sizes: str = "4K:256M:4", warmup: int = 2, iters: int = 5,
               timeout: float = 60.0, backend: str = "auto") -> list[str]:
    return ["--op", op, "--sizes", sizes, "--warmup", str(warmup), "--iters", str(iters),
            "--timeout", str(timeout), "--backend", backend]


def sweep(sizes: str = "4K:256M:4", *, op: str = "all_reduce", nproc: int = 2, warmup: int = 2, iters: int = 5,
          timeout: float = 60.0, backend: str = "auto", run_timeout: float = 600.0, live: bool | None = None,
          **kw):
    """Run the sweep worker on ``nproc`` ranks; return its table (raises if the run failed)."""
    from nbhelpers.errors import WorkbookError

    with machine.exclusive():  # bandwidth: nothing else runs on this machine meanwhile
        res = launch("sweep", sweep_args(op=op, sizes=sizes, warmup=warmup, iters=iters, timeout=timeout,
                                         backend=backend), nproc=nproc, timeout=run_timeout, live=live,
                     name=f"sweep-{op}", **{"hang_after": None, **kw})  # timings: no stack sampling
    if not res.ok:
        raise WorkbookError(f"the {op} sweep failed: {res.verdict.reason}",
                            f"logs in {res.log_dir}; rank 0's tail:\n{res.log(0, 15)}")
    table = sweep_table(res.events, nproc)
    return Gallery(table, {"sweep": res})


def sweep_table(events: list[dict], world: int):
    """One row per size from the ranks' events: time of the slowest rank, algbw, busbw, check."""
    import pandas as pd

    per_size: dict[int, list[dict]] = {}
    for e in events:
        if e.get("status") == "ok" and "times" in e and "bytes" in e:
            per_size.setdefault(e["bytes"], []).append(e)
    rows = []
    for size, evs in sorted(per_size.items()):
        op = evs[0]["op"]
        per_rank = {e["rank"]: statistics.fmean(e["times"]) for e in evs}
        slowest = max(per_rank, key=per_rank.get)
        t = per_rank[slowest]
        algbw = size / t / 1e9
        rows.append({"size": human(size), "bytes": size, "op": op, "ranks reporting": len(evs),
                     "time ms": round(t * 1e3, 3), "min rank time ms": round(min(per_rank.values()) * 1e3, 3),
                     "slowest rank": slowest, "algbw GB/s": round(algbw, 3),
                     "busbw GB/s": round(algbw * bus_factor(op, world), 3),
                     "check": "ok" if all(e.get("check") == "ok" for e in evs) and len(evs) == world else "MISSING"})
    return pd.DataFrame(rows).set_index("size")


def peak_busbw(table, min_bytes: int = 1 << 20) -> float:
    """The sweep's best bus bandwidth over sizes of at least ``min_bytes`` (small sizes are latency)."""
    big = table[table["bytes"] >= min_bytes]
    return float((big if len(big) else table)["busbw GB/s"].max())
