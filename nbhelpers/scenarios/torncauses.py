"""The same torn-checkpoint error from other causes than the race: a truncated copy, a full disk.

    truncated_copy(size_mb=20, fraction=0.5)   # a copy that stopped half-way, loaded
    full_disk(size_mb=50, disk_mb=20)          # torch.save onto a 20 MB tmpfs (private mount namespace, root)
    nb.causes_table([...])                     # side by side: the writer's and the reader's messages, the verdict

Each returns a dict with the messages torch really raised, the classifier's category for them, and
:func:`nbhelpers.checkpoint.explain_torn`'s verdict on the file left behind.
"""
from __future__ import annotations

import shutil
import uuid

from nbhelpers.runtime.launcher import runs_dir


def _category(text: str | None) -> str | None:
    from nbhelpers.runtime.learned import classify

    found = classify(text or "")
    return found[0].category if found else None


def truncated_copy(size_mb: float = 20.0, fraction: float = 0.5) -> dict:
    """Save a checkpoint, copy only ``fraction`` of it (an interrupted copy or download), load the copy."""
    import torch

    from nbhelpers.checkpoint import atomic_save, explain_torn
    from nbhelpers.runtime.events import error_text

    d = runs_dir() / f"truncated-{uuid.uuid4().hex[:6]}"
    d.mkdir(parents=True)
    try:
        n = max(1, int(size_mb * 2**20 / 4 / 8))
        src = atomic_save({f"layer{i}.weight": torch.full((n,), float(i)) for i in range(8)}, d / "source.pt")
        data = src.read_bytes()
        dst = d / "copy.pt"
        dst.write_bytes(data[:int(len(data) * fraction)])
        try:
            torch.load(dst, map_location="cpu")
            load_error = None
        except Exception as exc:  # noqa: BLE001 - the message is the measurement
            load_error = error_text(exc)
        info = explain_torn(dst, expected_size=len(data), watch_s=0.2)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return {"cause": f"truncated copy ({fraction:.0%})", "save error": None, "load error": load_error,
            "category": _category(load_error), "verdict": info["verdict"], "why": info["why"],
            "size": info["size"], "expected": len(data)}


def full_disk(size_mb: float = 50.0, disk_mb: int = 20, timeout: float = 90.0) -> dict:
    """``torch.save`` of ``size_mb`` onto a ``disk_mb`` tmpfs in a private mount namespace, then ``torch.load``.

    Needs root and ``unshare``; otherwise returns ``{"skipped": reason}``."""
    from nbhelpers.runtime.launcher import run_one
    from nbhelpers.runtime.sandbox import private_mount_unavailable, tmpfs_prefix

    reason = private_mount_unavailable()
    if reason:
        return {"cause": "full disk", "skipped": reason}
    d = runs_dir() / f"fulldisk-{uuid.uuid4().hex[:6]}"
    d.mkdir(parents=True)
    try:
        rc, events, out = run_one("ckpt_fulldisk", ["--dir", str(d), "--size-mb", str(size_mb)], timeout=timeout,
                                     prefix=tmpfs_prefix(d, f"{disk_mb}m"))
    finally:
        leftovers = list(d.iterdir()) if d.exists() else []
        shutil.rmtree(d, ignore_errors=True)
    by = {e["stage"]: e for e in events}
    if rc != 0 or "inspect" not in by:
        from nbhelpers.errors import WorkbookError

        raise WorkbookError(f"the full-disk run ended early (exit {rc})", "read its output:\n" + out[-2000:])
    save_err = by["save"].get("error")
    load_err = by["load"].get("error")
    return {"cause": f"full disk ({disk_mb} MB tmpfs, {size_mb:g} MB state)", "save error": save_err,
            "load error": load_err, "category": _category(f"{save_err or ''}\n{load_err or ''}"),
            "verdict": by["inspect"]["verdict"], "why": by["inspect"]["why"], "size": by["inspect"]["size"],
            "expected": None, "host dir left clean": not leftovers}


def race_cause(res) -> dict:
    """The race's row, from a :func:`nbhelpers.scenarios.ckptrace.race` result: its most frequent torn-read error, and
    what the readers saw of the file: its size at each failed attempt (does it grow between two looks?)."""
    from collections import Counter, defaultdict

    fails = [e for e in res.events if e.get("stage") == "read" and e.get("status") == "fail"
             and e.get("variant") == "racy" and e.get("size_seen") is not None]
    errs = Counter(e.get("error") for e in fails)
    err = errs.most_common(1)[0][0] if errs else None
    sizes = defaultdict(list)
    for e in fails:
        sizes[(e["trial"], e["rank"])].append(e["size_seen"])
    grew = [s for s in sizes.values() if len(set(s)) > 1]
    looked_twice = [s for s in sizes.values() if len(s) > 1]
    verdict = "being written" if grew else "not seen growing"
    why = (f"in {len(grew)} of {len(looked_twice)} reader-trials with two or more failed looks, the size grew between "
           f"looks (e.g. {grew[0][0]} -> {grew[0][-1]} bytes): a writer was still at it" if grew else
           "no reader looked twice at a torn file")
    return {"cause": "race (rank 0 still writing)", "save error": None, "load error": err,
            "category": _category(err), "verdict": verdict, "why": why}
