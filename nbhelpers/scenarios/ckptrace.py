"""Notebook 04's kernel side: the checkpoint race in trials, its table and timeline, the SIGKILL test.

    res = race(size_mb=50, trials=10)      # one torchrun world; every variant in the same run
    variant_table(res)                      # variant x failures/trials x time overhead
    error_table(res)                        # what torch raised on the torn reads, and the classifier's word
    race_timeline(res, trial=0)             # per variant and rank: write, each read attempt, its outcome
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


def trials_table(res: RunResult):
    """One row per (variant, trial, rank): first attempt ok?, attempts, seconds until it held the state."""
    import pandas as pd

    rows = [{"variant": e["variant"], "trial": e["trial"], "rank": e["rank"], "first_ok": e["first_ok"],
             "attempts": e["attempts"], "loaded_s": e["loaded_s"], "write_s": e.get("write_s")}
            for e in res.events if e.get("stage") == "trial"]
    return pd.DataFrame(rows, columns=["variant", "trial", "rank", "first_ok", "attempts", "loaded_s", "write_s"])


def variant_table(res: RunResult, baseline: str = "barrier"):
    """variant x failures / trials x time: a trial fails when any rank's first load failed.

    ``all loaded s``: median seconds from the trial's start until every rank held the state;
    ``overhead``: that time over the ``baseline`` variant's (same run, same sizes).
    """
    import pandas as pd

    df = trials_table(res)
    if df.empty:
        return pd.DataFrame()
    per_trial = df.groupby(["variant", "trial"]).agg(failed=("first_ok", lambda s: not s.all()),
                                                    loaded=("loaded_s", "max"), write=("write_s", "max"),
                                                    attempts=("attempts", "max"))
    g = per_trial.groupby("variant")
    table = pd.DataFrame({"failures": g["failed"].sum().astype(int), "trials": g.size(),
                          "write s": g["write"].median().round(3), "all loaded s": g["loaded"].median().round(3),
                          "max attempts": g["attempts"].max()})
    table["failures/trials"] = table["failures"].astype(str) + "/" + table["trials"].astype(str)
    base = table["all loaded s"].get(baseline)
    table[f"overhead vs {baseline}"] = (table["all loaded s"] / base).round(2) if base else None
    table["how"] = [DESCRIBE.get(v, "") for v in table.index]
    order = [v for v in VARIANTS if v in table.index] + [v for v in table.index if v not in VARIANTS]
    return table.loc[order, ["failures/trials", "failures", "trials", "write s", "all loaded s",
                             f"overhead vs {baseline}", "max attempts", "how"]]


def error_table(res: RunResult):
    """The distinct errors the torn reads raised (type, first line), how often, and their category."""
    import pandas as pd

    from nbhelpers.runtime.learned import classify

    rows: dict[tuple, dict] = {}
    for e in res.events:
        if e.get("stage") == "read" and e.get("status") == "fail":
            first = (e.get("error") or "").splitlines()[0][:160] if e.get("error") else ""
            row = rows.setdefault((e.get("error_type"), first), {"error type": e.get("error_type"), "message": first,
                                                                 "count": 0, "variants": set(), "full": e.get("error")})
            row["count"] += 1
            row["variants"].add(e["variant"])
    out = []
    for row in rows.values():
        found = classify(row.pop("full") or "")
        out.append({**row, "variants": ", ".join(sorted(row["variants"])),
                    "classified as": found[0].category if found else "(nothing)"})
    return pd.DataFrame(out, columns=["error type", "message", "count", "variants", "classified as"]).sort_values(
        "count", ascending=False, ignore_index=True)


def race_timeline(res: RunResult, trial: int = 0, variants: Sequence[str] | None = None, title: str | None = None):
    """One row per (variant, rank): rank 0's write as a bar, every read attempt as a bar coloured by outcome,
    in milliseconds from the trial's start (the barrier that opens it)."""
    import plotly.graph_objects as go

    evs = [e for e in res.events if e.get("trial") == trial and (variants is None or e.get("variant") in variants)]
    starts = {}
    for e in evs:
        if e["stage"] == "trial":
            starts[e["variant"]] = min(starts.get(e["variant"], e["start"]), e["start"])
    order = [v for v in VARIANTS if v in starts] + [v for v in starts if v not in VARIANTS]
    fig = go.Figure()
    kinds = {"write": ("write (rank 0)", "#1f77b4"), "ok": ("read ok", "#2ca02c"), "fail": ("read failed", "#d62728")}
    shown = set()
    for e in evs:
        if e["stage"] not in ("write", "read") or e["status"] == "running" or e["variant"] not in starts:
            continue
        kind = "write" if e["stage"] == "write" else e["status"]
        s, end = e.get("start", e["t"]), e.get("end", e["t"])
        t0 = starts[e["variant"]]
        hover = (f"{e['variant']} rank {e['rank']}: {kind} {1e3 * (end - s):.1f} ms"
                 + (f"<br>attempt {e.get('attempt')}" if e["stage"] == "read" else "")
                 + (f"<br>{e.get('error_type')}: {(e.get('error') or '')[:150]}" if kind == "fail" else ""))
        name, color = kinds[kind]
        fig.add_trace(go.Bar(y=[f"{e['variant']} · rank {e['rank']}"], x=[max(1e3 * (end - s), 0.6)],
                             base=[1e3 * (s - t0)], orientation="h", marker_color=color, name=name,
                             legendgroup=kind, showlegend=kind not in shown, hovertext=hover, hoverinfo="text",
                             marker_line_width=0.5, marker_line_color="white"))
        shown.add(kind)
    rows = [f"{v} · rank {r}" for v in order for r in range(res.nproc)]
    fig.update_layout(barmode="overlay", height=120 + 26 * len(rows), xaxis_title="ms since the trial's barrier",
                      title=title or f"Checkpoint race, trial {trial}: rank 0 writes, the others read",
                      margin=dict(l=10, r=10, t=40, b=30))
    fig.update_yaxes(categoryorder="array", categoryarray=rows, autorange="reversed")
    return fig


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
