"""Slow, not stuck: the straggler named live, how soon, how often wrongly, and what the sampling costs.

Realistic DDP jobs (`examples/slow/train_straggler.py`) supervised as any script is:
- each cause (one rank's slow data path; rank 0's extra metrics every step; one rank's DataLoader without workers;
  a busy process on one rank's core) on 2, 3 and 4 ranks: the rank named, and
  seconds from the first collective seen (the job past its start-up, when the slowdown begins) to the name;
  (the busy neighbour needs a core per rank: with more ranks than cores, pinned ranks share cores among
  themselves and every rank is as slow as the one beside the neighbour, so that row says so instead);
- balanced jobs, ``reps`` runs each on 2 and 3 ranks: how many named a straggler (should be none);
- the cost of reading the stacks twice a second: the balanced job's own steps/s with the watch on vs off
  (``hang_after=None``), interleaved, medians; baseline the watch off, same run.
"""
from __future__ import annotations

import os
import statistics

from nbhelpers.scenarios.supervise import example, printed_rate, supervise

TITLE = "Straggler watch: named rank and seconds, false stragglers, sampling cost (baseline: watch off, same run)"


def job(args, nproc=2, **kw):
    return supervise(example("train_straggler"), args, nproc=nproc, timeout=600, live=False, **kw)


def rows(reps: int) -> list[dict]:
    out = []
    for cause, slow in (("data", 1), ("extra", 0), ("workers", 1), ("cpu", 1)):
        for nproc in (2, 3, 4):
            if cause == "cpu" and nproc > len(os.sched_getaffinity(0)):
                out.append({"what": f"{cause}: rank {slow} slow, {nproc} ranks", "named": "not run",
                            "s after first collective": "",
                            "shares": f"{nproc} ranks on {len(os.sched_getaffinity(0))} cores share cores already",
                            "vs baseline": ""})
                continue
            res = job(["--cause", cause, "--slow-rank", str(slow), "--steps", "150"], nproc)
            s = res.straggler
            out.append({"what": f"{cause}: rank {slow} slow, {nproc} ranks",
                        "named": "nobody" if not s else f"rank {s['rank']}",
                        "s after first collective": round(s["named_after_s"] - s["first_collective_s"], 1) if s else "",
                        "shares": "" if not s else " ".join(f"{r}:{v:.0%}" for r, v in s["shares"].items()),
                        "vs baseline": ""})
    false = total = 0
    for nproc in (2, 3):
        for _ in range(max(1, reps)):
            res = job(["--cause", "none", "--steps", "200"], nproc)
            total += 1
            false += res.straggler is not None
    out.append({"what": f"balanced jobs named a straggler ({total} runs)", "named": f"{false} of {total}",
                "s after first collective": "", "shares": "", "vs baseline": ""})
    on, off = [], []
    for _ in range(max(3, reps)):
        off.append(printed_rate(job(["--cause", "none", "--steps", "200"], hang_after=None)))
        on.append(printed_rate(job(["--cause", "none", "--steps", "200"])))
    m_on, m_off = statistics.median(on), statistics.median(off)
    out.append({"what": "balanced job, steps/s: watch off (baseline)", "named": "", "s after first collective": "",
                "shares": f"{m_off:.1f}", "vs baseline": "1.00x"})
    out.append({"what": "balanced job, steps/s: stacks read twice a second", "named": "", "s after first collective": "",
                "shares": f"{m_on:.1f}", "vs baseline": f"{m_on / m_off:.3f}x"})
    return out
