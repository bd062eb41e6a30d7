"""Notebook 03's calls for the real causes of collective timeouts: run a scenario, name the rank, chart it.

    res = desync_scenario("skip")                # 3 ranks, rank 1 skips a collective
    res.culprit                                   # 1
    sequence_chart(res)                           # rank x collective sequence: where each rank stopped
    gallery()                                     # every scenario, one row each

Scenarios are run by :mod:`nbhelpers.workers.desync` (each in its own torchrun world: gloo aborts
the whole process on a size mismatch, so none of this may run in the kernel).
"""
from __future__ import annotations

import re

from nbhelpers.runtime.launcher import GLOO_SOURCE, RunResult, launch
from nbhelpers.scenarios.api import Gallery, run_side_by_side

FAULTY = ("straggler", "skip", "shape", "rank0-only", "crash")


def desync_scenario(name: str, *, nproc: int = 3, fault_rank: int = 1, timeout: float = 3.0, stall: float = 30.0,
             detail: bool = False, monitored: float = 0.0, flight_recorder: int = 64, steps: int = 3,
             run_timeout: float | None = None, live: bool | None = None, **kw) -> RunResult:
    """Run one scenario; ``detail`` sets TORCH_DISTRIBUTED_DEBUG=DETAIL; ``flight_recorder`` its buffer size."""
    env = {"TORCH_FR_BUFFER_SIZE": str(flight_recorder)} if flight_recorder else {}
    if detail:
        env["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"
    env.update(kw.pop("env", {}) or {})
    fr = 0 if name == "rank0-only" else fault_rank
    args = ["--scenario", name, "--fault-rank", str(fr), "--timeout", str(timeout), "--stall", str(stall),
            "--steps", str(steps), "--monitored", str(monitored)]
    tag = name + ("-detail" if detail else "") + ("-monitored" if monitored else "")
    return launch("desync", args, nproc=nproc, timeout=run_timeout or (4 * timeout + 40), env=env, live=live,
                  name=tag, **kw)


def guilty_rank(name: str, fault_rank: int = 1) -> int | None:
    """The rank each scenario makes misbehave (what the verdict must name)."""
    return None if name in ("none", "eval-agreed") else 0 if name == "rank0-only" else fault_rank


_ABORT = re.compile(r"EnforceNotMet|terminate called|what\(\):|Received data size")


def gallery(names=FAULTY, *, nproc: int = 3, fault_rank: int = 1, timeout: float = 3.0, parallel: int = 2, **kw):
    """One run per scenario, ``parallel`` worlds at a time: who raised first, whom torchrun blames, the culprit,
    and whether it is right."""
    import pandas as pd

    def job(spec: str):
        name, _, opt = spec.partition("+")
        return desync_scenario(name, nproc=nproc, fault_rank=fault_rank, timeout=timeout, detail=opt == "detail",
                        monitored=timeout if opt == "monitored" else 0.0, **kw)

    kw.setdefault("live", False if parallel > 1 else None)
    results = run_side_by_side({spec: (lambda spec=spec: job(spec)) for spec in names}, parallel)
    rows = []
    for spec, res in results.items():
        name = spec.partition("+")[0]
        s = res.to_dict()
        want = guilty_rank(name, fault_rank)
        rows.append({"scenario": spec, "status": res.status, "failed after s": s["first_failure_s"],
                     "first to raise": s["first_to_raise"], "torchrun blames": s["torchrun_blamed"],
                     "culprit": res.culprit, "rule": res.verdict.kind, "guilty": want,
                     "right": res.culprit == want, "first error": res.first_error()})
    table = pd.DataFrame(rows).set_index("scenario")
    return Gallery(table, results)


def sequence_table(res: RunResult):
    """Rank x collective number: the call each rank made (✔ done, ✘ failed, … never returned)."""
    import pandas as pd

    cells: dict[tuple, str] = {}
    for e in res.events:
        if isinstance(e.get("seq"), int):
            mark = {"running": "…", "ok": "✔", "fail": "✘"}.get(e["status"], "")
            cells[(e["rank"], e["seq"])] = f"{mark} {e['call']} {e.get('op', '')} {e.get('shape', '')}"
    if not cells:
        return pd.DataFrame()
    df = pd.Series(cells).unstack().sort_index()
    df.index.name, df.columns.name = "rank", "collective #"
    return df.fillna("·")


def sequence_chart(res: RunResult, title: str | None = None):
    """A heatmap, rank x collective number, coloured by outcome: where each rank stopped, and on what."""
    import plotly.graph_objects as go

    df = sequence_table(res)
    code = {"✔": 0, "…": 1, "✘": 2, "·": None}
    z = [[code.get(str(c)[:1]) for c in row] for row in df.values]
    fig = go.Figure(go.Heatmap(
        z=z, x=[f"#{c}" for c in df.columns], y=[f"rank {r}" for r in df.index], text=df.values,
        texttemplate="%{text}", hoverinfo="text", zmin=0, zmax=2, showscale=False,
        colorscale=[[0, "#b7e4b7"], [0.5, "#ffd08a"], [1, "#f4a3a3"]]))
    who = "" if res.culprit is None else f" · culprit rank {res.culprit} ({res.verdict.kind})"
    fig.update_layout(title=title or f"{res.name}: each rank's collectives{who}", height=120 + 45 * res.nproc,
                      margin=dict(l=10, r=10, t=40, b=30), xaxis_title="collective number on that rank",
                      font=dict(size=10))
    fig.update_yaxes(autorange="reversed")
    return fig


def flight_recorder_table(res: RunResult):
    """The Flight Recorder entries each rank dumped when its collective failed (torch records gloo too)."""
    import pandas as pd

    rows = []
    for e in res.events:
        if e.get("stage") == "flight_recorder":
            for x in e.get("entries", []):
                rows.append({"rank": e["rank"], **x})
            if e.get("error"):
                rows.append({"rank": e["rank"], "op": "(dump failed)", "state": e["error"]})
    return pd.DataFrame(rows)


def rank_error_table(res: RunResult):
    """Per rank: exit code or signal, and the last line of the error its failing collective raised."""
    import pandas as pd

    rows = []
    for r in range(res.nproc):
        rec = res.records.get(r, {})
        err = next((e.get("error") for e in res.events if e.get("rank") == r and e.get("status") == "fail"), None)
        lines = [ln for ln in (err or "").splitlines() if ln.strip()]
        if not lines:  # killed in C++ (SIGABRT): the abort message is in the log, not in an event
            found = [ln for ln in res.logs.get(r, "").splitlines() if _ABORT.search(ln)]
            lines = sorted(found, key=lambda ln: "size" not in ln)[:1]
        rows.append({"rank": r, "exit": rec.get("returncode"),
                     "signal": rec.get("signal") if not rec.get("stop_signal") else f"(stopped: {rec['stop_signal']})",
                     "error": GLOO_SOURCE.sub("", lines[-1]).strip()[:300] if lines else ""})
    return pd.DataFrame(rows).set_index("rank")
