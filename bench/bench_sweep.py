"""Sweep worker vs a bare torch loop (busbw at 1/16/64 MiB), and chunked vs whole all_reduce, same run.

Both sides: 2 ranks, gloo, 2 warm-up + 5 timed all_reduce calls per size, slowest rank's average
per call; interleaved reps so that drifting machine load hits both alike.  The sweep adds events, a
correctness check per size and the launcher's shims; the ratio shows what that costs in measured
bandwidth (it should be ~1: the check and events sit outside the timed loop).
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from nbhelpers.runtime.ports import free_port
from nbhelpers.scenarios.chunking import compare_chunking
from nbhelpers.scenarios.sweep import sweep

TITLE = "Sweep vs bare torch loop (busbw GB/s, median), and chunked vs whole all_reduce (64 MiB, 2 ranks)"
SIZES = [1 << 20, 16 << 20, 64 << 20]
BARE = Path(__file__).resolve().parent / "_bare_allreduce.py"


def bare() -> dict[int, float]:
    per: dict[int, float] = {}
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--rdzv-backend",
                        "c10d", "--rdzv-endpoint", f"127.0.0.1:{free_port()}", str(BARE), *map(str, SIZES)],
                       capture_output=True, text=True, check=True,
                       env={**os.environ, "OMP_NUM_THREADS": "1", "BARE_OUT": out})
        for f in Path(out).glob("rank*.json"):
            for d in json.loads(f.read_text()):
                per[d["bytes"]] = max(per.get(d["bytes"], 0.0), d["time"])
    return {s: s / t / 1e9 for s, t in per.items()}  # 2 ranks: busbw = algbw


def ours() -> dict[int, float]:
    t = sweep(",".join(str(s) for s in SIZES), iters=5, warmup=2, live=False)
    return dict(zip(t["bytes"], t["busbw GB/s"]))


def rows(reps: int) -> list[dict]:
    b, o = [], []
    for _ in range(reps):
        b.append(bare())
        o.append(ours())
    out = []
    for s in SIZES:
        mb, mo = statistics.median(x[s] for x in b), statistics.median(x[s] for x in o)
        out.append({"case": f"all_reduce {s >> 20} MiB busbw", "baseline": f"bare loop {mb:.3f}",
                    "ours": f"sweep {mo:.3f}", "ratio ours/baseline": f"{mo / mb:.2f}", "peak extra RSS MiB": "",
                    "reps": reps})
    tables = [compare_chunking(64, (1, 4, 16), reps=reps, live=False) for _ in range(1)]
    t = tables[0]
    chunked = t.drop(index="whole")
    best = chunked["median ms"].idxmin()
    out.append({"case": f"64 MiB all_reduce: {best} (best) vs whole, ms", "baseline": f"whole {t.loc['whole', 'median ms']}",
                "ours": f"{best} {t.loc[best, 'median ms']}",
                "ratio ours/baseline": f"{t.loc[best, 'median ms'] / t.loc['whole', 'median ms']:.2f}",
                "peak extra RSS MiB": f"whole {t.loc['whole', 'peak extra RSS MiB']} / chunked {t.loc[best, 'peak extra RSS MiB']}",
                "reps": reps})
    for name in chunked.index:
        out.append({"case": f"  {name}, ms", "baseline": "", "ours": f"{t.loc[name, 'median ms']}",
                    "ratio ours/baseline": f"{t.loc[name, 'time / whole']:.2f}",
                    "peak extra RSS MiB": f"{t.loc[name, 'peak extra RSS MiB']}", "reps": reps})
    return out
