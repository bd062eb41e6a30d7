"""Notebook 04's kernel side: the checkpoint race in trials and the SIGKILL test (their tables and timeline are in
:mod:`nbhelpers.views.incidents`).

    res = race(size_mb=50, trials=10)      # one torchrun world; every variant in the same run
    nb.variant_table(res)                   # variant x failures/trials x time overhead
    nb.error_table(res)                     # what torch raised on the torn reads, and the classifier's word
    nb.race_timeline(res, trial=0)          # per variant and rank: write, each read attempt, its outcome
    sigkill_test(kills=20, mode="safe")    # kill a writer mid-save, load the latest each time
"""
from __future__ import annotations

import sys
import uuid
from typing import Sequence

from nbhelpers.runtime.launcher import RunResult, launch, run_one, runs_dir
from nbhelpers.scenarios.api import Gallery

VARIANTS = ("racy", "barrier", "atomic", "atomic_barrier", "broadcast", "verify")
DESCRIBE = {
    "racy": "torch.save to the final path; the others load as soon as the file exists",
    "barrier": "torch.save, barrier, then load",
    "atomic": "temp + fsync + os.replace + fsync dir; the others poll for the final path",
    "atomic_barrier": "atomic save, barrier, then load",
    "broadcast": "rank 0 saves and loads, then broadcasts the tensors",
    "verify": "torch.save; the others wait for the zip end record, then load",
}


def race(size_mb: float = 50.0, trials: int = 10, variants: Sequence[str] = VARIANTS, *, nproc: int = 2,
         timeout: float | None = None, live: bool | None = None, **kw) -> RunResult:
    """Run every variant ``trials`` times in one world of ``nproc`` ranks (rank 0 writes)."""
    args = ["--size-mb", str(size_mb), "--trials", str(trials), "--variants", ",".join(variants)]
    run_timeout = timeout or 60 + trials * len(variants) * (1 + size_mb / 25)
    return launch("ckpt_race", args, nproc=nproc, timeout=run_timeout, live=live, name="ckpt-race", **kw)


# --- the SIGKILL test ------------------------------------------------------------------------------

def sigkill_test(kills: int = 20, size_mb: float = 8.0, mode: str = "safe", keep: int = 2, seed: int = 0,
                 timeout: float = 240.0, quiet: bool = False):
    """Kill a checkpoint writer with SIGKILL mid-save ``kills`` times, loading the "latest" after each.

    ``mode="safe"``: :class:`~nbhelpers.checkpoint.CheckpointManager`; ``"plain"``: ``torch.save`` onto
    ``latest.pt``.  One row per kill; ``.summary`` counts the kills, those caught mid-write
    (a temp file present), the unloadable "latest"s, and temp files left after the load.
    """
    import pandas as pd

    from nbhelpers.errors import WorkbookError

    d = runs_dir() / f"killtest-{mode}-{uuid.uuid4().hex[:6]}"

    def progress(ev):
        if not quiet and ev.get("stage") == "kill" and (ev["kill"] + 1) % 5 == 0:
            print(f"  {mode}: {ev['kill'] + 1}/{kills} kills", file=sys.stderr, flush=True)

    rc, events, out = run_one("ckpt_killtest", ["--dir", str(d), "--mode", mode, "--kills", str(kills),
                                                   "--size-mb", str(size_mb), "--keep", str(keep),
                                                   "--seed", str(seed)], timeout=timeout, progress=progress)
    import shutil

    shutil.rmtree(d, ignore_errors=True)
    rows = [e for e in events if e.get("stage") == "kill"]
    if rc != 0 or len(rows) < kills:
        raise WorkbookError(f"the SIGKILL test ({mode}) ended early: exit {rc}, {len(rows)}/{kills} kills done",
                            "read its output:\n" + out[-2000:])
    df = pd.DataFrame([{"kill": e["kill"], "ran s": e["delay_s"], "saves acked": e["saves_in_run"],
                        "last acked step": e["acked"], "temp file at kill": ", ".join(e["temp_at_kill"]),
                        "loaded step": e["loaded"], "problem": e["problem"] or "",
                        "temp files after load": len(e["temp_after_load"])} for e in rows]).set_index("kill")
    head = next((e for e in events if e.get("stage") == "killtest"), {})
    return Gallery(df, summary={
        "mode": mode, "kills": len(df), "size_mb": size_mb, "save_s": head.get("save_s"),
        "mid_write": int((df["temp file at kill"] != "").sum()) if mode == "safe" else None,
        "unloadable": int((df["problem"] != "").sum()),
        "temp_left_after_load": int(df["temp files after load"].sum()),
    })


# --- the hang after rank 0 loads a checkpoint: a collective inside rank-0-only loading code ------------

def rank0_collective(timeout: float = 3.0, fixed: bool = False, *, nproc: int = 2, live: bool | None = None,
                     **kw) -> RunResult:
    """Rank 0 loads the checkpoint and calls ``dist.broadcast`` inside ``if rank == 0:``; the others go on to
    the next all_reduce.  Both wait until the process group ``timeout``; the verdict names rank 0.
    ``fixed=True``: the broadcast is called by every rank and the run passes."""
    args = ["--timeout", str(timeout)] + (["--fixed"] if fixed else [])
    return launch("ckpt_deadlock", args, nproc=nproc, timeout=max(45.0, 4 * timeout + 30), live=live,
                  name="rank0-collective" + ("-fixed" if fixed else ""), **kw)
