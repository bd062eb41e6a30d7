"""NCCL_DEBUG log parser: lines per second and what it understands, vs one plain channel regex.

Input: the real public lines shipped in nbhelpers/data/nccl_real_lines.log, repeated to ~100k lines.
The baseline is what one would write first: a single regex for "Channel a -> b via X" lines only.
"""
from __future__ import annotations

import re
import statistics
import time

from nbhelpers.diagnosis.nccllog import parse_lines, sample_log

TITLE = "NCCL log parser: throughput and lines understood vs a plain channel regex"
PLAIN = re.compile(r"Channel (\d+)\S* : (\d+)\[\w+\] -> (\d+)\[\w+\].* via (\S+)")


def plain(lines):
    return [m.groups() for ln in lines if (m := PLAIN.search(ln))]


def _time(fn, lines, reps):
    out, times = None, []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn(lines)
        times.append(time.perf_counter() - t0)
    return out, statistics.median(times)


def rows(reps: int) -> list[dict]:
    base = [ln for ln in sample_log().splitlines() if ln and not ln.startswith("#")]
    nccl = [ln for ln in base if "NCCL" in ln]
    lines = base * max(1, 100_000 // len(base))
    parsed, t_full = _time(parse_lines, lines, reps)
    matched, t_plain = _time(plain, lines, reps)
    understood = sum(r["kind"] != "other" for r in parse_lines(base))
    return [
        {"method": "plain channel regex (baseline)", "lines": len(lines),
         "lines/s": f"{len(lines) / t_plain:,.0f}", "ratio": "1.00",
         "NCCL lines understood": f"{len(plain(base))}/{len(nccl)}", "ranks/interfaces": "no"},
        {"method": "nbhelpers.diagnosis.nccllog.parse_lines", "lines": len(lines),
         "lines/s": f"{len(lines) / t_full:,.0f}", "ratio": f"{t_plain / t_full:.2f}",
         "NCCL lines understood": f"{understood}/{len(nccl)}", "ranks/interfaces": "yes"},
    ]
