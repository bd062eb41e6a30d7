"""Flight Recorder analysis at scale: N-rank dumps made from the real 2-rank gloo ``skip`` recording.

``scale_dumps`` copies the healthy rank's dump to N-1 ranks and the odd rank's dump to one (``odd_rank``),
so the verdict must stay "rank <odd_rank> never reached #5".  Timed: ``read_dumps`` (N pickle files),
``analyse`` (table, torch's matcher ``build_collectives``, the verdict) and torch's matcher alone.

    python bench/bench_flightrec.py            # or: python bench/run.py bench_flightrec
"""
from __future__ import annotations

import os
import pickle
import statistics
import sys
import tempfile
import time
from pathlib import Path

from nbhelpers.diagnosis import flightrec
from nbhelpers.diagnosis.flightrec import analyse, read_dumps

TITLE = "Flight Recorder: read + analyse N-rank dumps scaled from a real 2-rank gloo skip"
SRC = Path(__file__).resolve().parent.parent / "tests" / "data" / "fr" / "skip"


def scale_dumps(src_folder, dst_folder, n: int, odd_rank: int, prefix: str = "fr_trace_rank_") -> Path:
    """Write ``n`` per-rank dumps into ``dst_folder``: the source's odd rank (its report's culprit) as
    ``odd_rank``, a healthy source rank everywhere else; group configs list all ``n`` ranks."""
    src = read_dumps(src_folder)
    odd = analyse(src).culprit_rank
    if odd is None:
        raise ValueError(f"{src_folder}: no odd rank to copy (the dumps agree)")
    healthy = next(r for r in src.ranks if r != odd)
    raw = {r: flightrec._load(src.ranks[r].path)[0] for r in (odd, healthy)}
    for d in raw.values():
        for cfg in (d.get("pg_config") or {}).values():
            cfg["ranks"] = str(list(range(n)))
    dst = Path(dst_folder)
    dst.mkdir(parents=True, exist_ok=True)
    blobs = {r: pickle.dumps(d) for r, d in raw.items()}
    for r in range(n):
        (dst / f"{prefix}{r}").write_bytes(blobs[odd if r == odd_rank else healthy])
    return dst


def _time(fn, reps):
    out, times = None, []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, statistics.median(times)


def rows(reps: int = 3, sizes=(2, 64, 1024)) -> list[dict]:
    analyse(SRC)  # import torch and its analyser once, outside the timings
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            odd = n // 2 if n > 2 else 1
            folder = scale_dumps(SRC, os.path.join(tmp, str(n)), n, odd)
            dumps, t_read = _time(lambda f=folder: read_dumps(f), reps)
            rep, t_an = _time(lambda d=dumps: analyse(d), reps)
            members = flightrec._members(dumps, n)
            _, t_torch = _time(lambda d=dumps, m=members: flightrec._torch_first_failure(d, m), reps)
            assert rep.culprit_rank == odd and rep.first_disagreement["seq"] == 5, rep.text()
            out.append({"ranks": n, "read_dumps s": f"{t_read:.3f}", "analyse s": f"{t_an:.3f}",
                        "of which torch matcher s": f"{t_torch:.3f}", "table rows": len(rep.table),
                        "verdict": f"#{rep.first_disagreement['seq']} missing rank {rep.culprit_rank}"})
    return out


if __name__ == "__main__":
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    for r in rows(reps):
        print(r)
