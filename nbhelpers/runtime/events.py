"""Structured events that rank processes write into their logs, and the kernel-side reader.

A rank prints one JSON object per line behind :data:`MARKER`; the launcher finds those lines in
the per-rank log files, so events survive whatever transport carried the log (a local file, a
log copied from another node, a pasted snippet).  Nothing here imports torch.
"""
from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
import traceback
from typing import Any, Iterable, Iterator

MARKER = "@@nbh-event "


def rank_identity() -> tuple[int, str]:
    """Global rank (from torchrun's RANK, -1 when unset) and short hostname."""
    return int(os.environ.get("RANK", "-1")), socket.gethostname().split(".")[0]


def emit(stage: str, status: str, **fields: Any) -> dict:
    """Write one event line to stdout and flush it at once (the rank may die right after)."""
    rank, host = rank_identity()
    event = {"rank": rank, "host": host, "stage": stage, "status": status, "t": time.time(), **fields}
    sys.stdout.write(MARKER + json.dumps(event, default=str) + "\n")
    sys.stdout.flush()
    return event


def error_text(exc: BaseException) -> str:
    """The exception's type and message, trimmed of torch's C++ backtrace noise."""
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    keep = [ln for ln in text.splitlines() if not ln.lstrip().startswith(("frame #", "Exception raised from"))]
    return "\n".join(keep)[:4000]


@contextlib.contextmanager
def stage(name: str, **fields: Any) -> Iterator[dict]:
    """Emit ``running`` on entry, then ``ok`` or ``fail`` (with the error text) on exit.

    The yielded dict collects extra fields for the closing event (a measured size, a check result).
    """
    extra: dict = {}
    start = emit(name, "running", **fields)["t"]
    try:
        yield extra
    except BaseException as exc:
        emit(name, "fail", start=start, end=time.time(), error=error_text(exc), **fields, **extra)
        raise
    emit(name, "ok", start=start, end=time.time(), **fields, **extra)


def parse_line(line: str) -> dict | None:
    """The event on this log line, or None. Tolerates a prefix before the marker (tee'd logs)."""
    at = line.find(MARKER)
    if at < 0:
        return None
    try:
        event = json.loads(line[at + len(MARKER):])
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


def parse_lines(lines: Iterable[str]) -> list[dict]:
    return [e for e in map(parse_line, lines) if e is not None]


def stage_rows(events: Iterable[dict]):
    """One row per (rank, stage): status, start, end, seconds, error; the last event of each wins."""
    import pandas as pd

    rows: dict[tuple, dict] = {}
    for e in events:
        key = (e.get("rank"), e.get("stage"))
        row = rows.setdefault(key, {"rank": e.get("rank"), "host": e.get("host"), "stage": e.get("stage"),
                                    "status": None, "start": None, "end": None, "error": None})
        row["status"] = e.get("status")
        row["start"] = e.get("start", row["start"] if row["start"] is not None else e.get("t"))
        if e.get("status") != "running":
            row["end"] = e.get("end", e.get("t"))
        row["error"] = e.get("error") or row["error"]
    cols = ["rank", "host", "stage", "status", "start", "end", "seconds", "error"]
    df = pd.DataFrame(list(rows.values()), columns=[c for c in cols if c != "seconds"])
    df["seconds"] = df["end"] - df["start"]
    return df[cols]
