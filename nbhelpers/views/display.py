"""How runs look: a rank x stage matrix and a timeline (the live per-rank table is
:mod:`nbhelpers.runtime.progress`)."""
from __future__ import annotations

import html

from nbhelpers.runtime.progress import STATUS_COLOR, STATUS_MARK

__all__ = ["stage_table", "timeline"]


def stage_table(result):
    """Rank x stage: a mark and the seconds each stage took (✔ passed, ✘ failed, … never finished)."""
    df = result.stages
    if df.empty:
        import pandas as pd

        return pd.DataFrame()
    order = list(dict.fromkeys(df.sort_values("start")["stage"]))
    cell = df.apply(lambda r: f"{STATUS_MARK.get(r['status'], r['status'])} "
                    + ("" if r["seconds"] != r["seconds"] else f"{r['seconds']:.2f}s"), axis=1)
    m = df.assign(cell=cell).pivot(index="rank", columns="stage", values="cell")
    return m.reindex(columns=order).fillna("·")


def timeline(result, title: str | None = None):
    """A plotly Gantt chart: one row per rank, one bar per stage, coloured by outcome."""
    import plotly.graph_objects as go

    df = result.stages.copy()
    df["end"] = df["end"].fillna(result.wall_s)
    fig = go.Figure()
    for status, group in df.groupby("status"):
        fig.add_trace(go.Bar(
            y=[f"rank {r}" for r in group["rank"]], x=group["end"] - group["start"], base=group["start"],
            orientation="h", name=status, marker_color=STATUS_COLOR.get(status, "#7f7f7f"),
            text=group["stage"], textposition="inside", insidetextanchor="middle",
            hovertext=[f"{s}: {st} {d:.3f}s" + (f"<br>{html.escape(str(e))[:200]}" if e else "")
                       for s, st, d, e in zip(group["stage"], group["status"], group["end"] - group["start"],
                                              group["error"])],
            hoverinfo="text"))
    for r, rec in result.records.items():
        if rec.get("end"):
            fig.add_trace(go.Scatter(x=[rec["end"] - result.started], y=[f"rank {r}"], mode="markers",
                                     marker_symbol="x", marker_size=12, marker_color="black", showlegend=False,
                                     hovertext=f"rank {r} exit {rec.get('returncode')} {rec.get('signal') or ''}",
                                     hoverinfo="text"))
    fig.update_layout(barmode="overlay", height=140 + 40 * result.nproc, xaxis_title="seconds since launch",
                      title=title or f"{result.name}: {result.status}", margin=dict(l=10, r=10, t=40, b=30))
    fig.update_yaxes(autorange="reversed")
    return fig


def waiting_chart(result, title: str | None = None):
    """Each rank's share of its recent stack samples spent waiting in a collective, over the run: a rank far below
    its peers is the one they wait for (:mod:`nbhelpers.diagnosis.straggler`); the moment it was named is marked."""
    import plotly.graph_objects as go

    fig = go.Figure()
    series = result.waiting or []
    for r in sorted({r for _, shares in series for r in shares}):
        pts = [(t, shares[r]) for t, shares in series if r in shares]
        fig.add_trace(go.Scatter(x=[t for t, _ in pts], y=[100 * s for _, s in pts], mode="lines", name=f"rank {r}"))
    s = result.straggler
    if s:
        fig.add_vline(x=s["named_after_s"], line_dash="dot",
                      annotation_text=f"rank {s['rank']} named", annotation_position="top left")
    fig.update_layout(title=title or f"{result.name}: time spent waiting in collectives, per rank",
                      xaxis_title="seconds since launch", yaxis_title="% of the last samples waiting",
                      yaxis_range=[0, 105], height=320, margin=dict(l=10, r=10, t=40, b=30))
    return fig
