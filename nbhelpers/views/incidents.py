"""The tables and charts of the incidents' results: the checkpoint race, the desync, the busbw sweep, torn files'
causes, /dev/shm, the env presets, the path checks and the two-host lab.  Each renders what a scenario returned
(``nbhelpers.scenarios.*``); nothing here starts a process.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Sequence

from nbhelpers.scenarios.ckptrace import DESCRIBE, VARIANTS
from nbhelpers.runtime.launcher import GLOO_SOURCE
from nbhelpers.scenarios.presets import ADVISED_EXPORTS, presets

if TYPE_CHECKING:
    from nbhelpers.runtime.launcher import RunResult

ABORT = re.compile(r"EnforceNotMet|terminate called|what\(\):|Received data size")  # gloo's abort, in a rank's log


def _first_line(text: str | None) -> str:
    return (text or "").splitlines()[0][:200] if text else ""

__all__ = [
    "trials_table", "variant_table", "error_table", "race_timeline", "sequence_table", "sequence_chart",
    "flight_recorder_table", "rank_error_table", "check_table", "shm_table", "sweep_chart", "causes_table",
    "presets_table", "advice_lint_table", "results_markdown"
]


# ---- ckptrace --------------------------------------------------------------------------------------------------------

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

# ---- desync ----------------------------------------------------------------------------------------------------------

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
            found = [ln for ln in res.logs.get(r, "").splitlines() if ABORT.search(ln)]
            lines = sorted(found, key=lambda ln: "size" not in ln)[:1]
        rows.append({"rank": r, "exit": rec.get("returncode"),
                     "signal": rec.get("signal") if not rec.get("stop_signal") else f"(stopped: {rec['stop_signal']})",
                     "error": GLOO_SOURCE.sub("", lines[-1]).strip()[:300] if lines else ""})
    return pd.DataFrame(rows).set_index("rank")

# ---- netcheck --------------------------------------------------------------------------------------------------------

def check_table(rows: list[dict]):
    import pandas as pd

    df = pd.DataFrame(rows)
    df.insert(0, "", df.pop("ok").map({True: "✔", False: "✘"}))
    return df.set_index("check")

# ---- shm -------------------------------------------------------------------------------------------------------------

def shm_table(rows: list[dict]):
    import pandas as pd

    cols = ["shm_mb", "batch_size", "status", "seconds", "batches", "error", "worker stderr", "classified as"]
    out = [{c: r.get(c, "") for c in cols} | ({"status": "skipped", "error": r["skipped"]} if r.get("skipped") else {})
           for r in rows]
    return pd.DataFrame(out, columns=cols)

# ---- sweep -----------------------------------------------------------------------------------------------------------

def sweep_chart(table, title: str | None = None):
    """Log-log chart: busbw and algbw (left) against size; time per call on a second axis."""
    import plotly.graph_objects as go

    fig = go.Figure()
    x = table["bytes"]
    fig.add_trace(go.Scatter(x=x, y=table["busbw GB/s"], mode="lines+markers", name="busbw GB/s",
                             hovertext=list(table.index), hoverinfo="text+y"))
    fig.add_trace(go.Scatter(x=x, y=table["algbw GB/s"], mode="lines+markers", name="algbw GB/s",
                             line=dict(dash="dot")))
    fig.add_trace(go.Scatter(x=x, y=table["time ms"], mode="lines+markers", name="time ms", yaxis="y2",
                             line=dict(color="#7f7f7f")))
    op = table["op"].iloc[0] if len(table) else ""
    fig.update_layout(title=title or f"{op} sweep: bandwidth and time per call vs size",
                      xaxis=dict(type="log", title="size (bytes)"),
                      yaxis=dict(type="log", title="GB/s"),
                      yaxis2=dict(type="log", title="ms per call", overlaying="y", side="right"),
                      height=420, margin=dict(l=10, r=10, t=40, b=30), legend=dict(x=0.01, y=0.99))
    return fig

# ---- torncauses ------------------------------------------------------------------------------------------------------

def causes_table(rows: list[dict]):
    """One row per cause: the writer's and the reader's first message lines, the category, the verdict."""
    import pandas as pd

    out = []
    for r in rows:
        if r.get("skipped"):
            out.append({"cause": r["cause"], "writer saw": "", "reader saw": "", "classified as": "",
                        "explain_torn says": f"skipped: {r['skipped']}"})
            continue
        out.append({"cause": r["cause"], "writer saw": _first_line(r.get("save error")) or "(nothing: save returned)",
                    "reader saw": _first_line(r.get("load error")), "classified as": r.get("category"),
                    "explain_torn says": f"{r['verdict']}: {r['why']}"})
    return pd.DataFrame(out).set_index("cause")

# ---- presets ---------------------------------------------------------------------------------------------------------

def presets_table(nproc_per_node: int = 2):
    """One row per preset: intent, what it does now, variables set and dropped, timeout."""
    import pandas as pd

    return pd.DataFrame([{"preset": p.name, "intent": p.intent, "corrected": p.summary,
                          "sets": ", ".join(f"{c.name}={c.value}" for c in p.changes),
                          "drops": ", ".join(d.name for d in p.dropped), "timeout s": p.timeout_s,
                          "in code": p.in_code} for p in presets(nproc_per_node).values()]).set_index("preset")


def advice_lint_table(interfaces: list[dict] | None = None):
    """Lint each advised export list: one row per finding, with the advice it came from."""
    from dataclasses import asdict, fields

    import pandas as pd

    from nbhelpers.diagnosis.lint import Finding
    from nbhelpers.runtime.fingerprint import lint_env

    rows = [{"advised": source, **asdict(f)} for source, env in ADVISED_EXPORTS.items()
            for f in lint_env(env, interfaces=interfaces)]
    return pd.DataFrame(rows, columns=["advised", *(f.name for f in fields(Finding))])

# ---- netlab ----------------------------------------------------------------------------------------------------------

def results_markdown(table) -> str:
    """The lab's results table as Markdown rows (for the notebook's closing note and reports)."""
    def cell(v) -> str:
        return "" if v is None or v != v else str(v).replace("|", "/")

    out = []
    for fault, r in table.iterrows():
        after = "" if r["failed after s"] != r["failed after s"] or r["failed after s"] is None else f"{r['failed after s']:.1f} s"
        bw = r["largest all_reduce MB/s"]
        err = r["error"] or (f"none; largest all_reduce {bw:.1f} MB/s" if bw == bw and bw is not None else "none")
        out.append(f"| {fault} | {after or '-'} | {cell(r['failed first']) or '-'} | {cell(err)} | "
                   f"{cell(r['other node']) or '-'} | {cell(r['category']) or '-'} |")
    return "\n".join(out)
