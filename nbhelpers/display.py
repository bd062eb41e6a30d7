"""How runs look: a live per-rank table while they go, a rank x stage matrix, a timeline.

In a Jupyter kernel the live table is one display that is updated in place (a display handle,
not an ``Output`` widget: those stall headless execution); elsewhere progress goes to stderr as
one line per stage change.
"""
from __future__ import annotations

import html
import sys
import time

STATUS_MARK = {"ok": "✔", "fail": "✘", "running": "…", None: ""}
STATUS_COLOR = {"ok": "#2ca02c", "fail": "#d62728", "running": "#ff7f0e"}


def in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    ip = get_ipython()
    return ip is not None and hasattr(ip, "kernel")


def _rank_rows(run) -> list[dict]:
    rows = []
    for r in run.local_ranks():
        tail = run.tails[r]
        ev = tail.events[-1] if tail.events else None
        last = tail.lines[-1] if tail.lines else ""
        rows.append({"rank": r, "stage": ev["stage"] if ev else "starting",
                     "status": ev["status"] if ev else "", "since": time.time() - ev["t"] if ev else None,
                     "last": last[-140:]})
    return rows


def _since(row: dict) -> str:
    return "" if row["since"] is None else f"{row['since']:.1f} s"


class LiveView:
    """Progress of a running :class:`~nbhelpers.launcher.Run`, throttled to a few updates a second."""

    def __init__(self, run, live: bool | None = None, every: float = 0.5):
        self.run, self.every = run, every
        self.kernel = in_kernel() if live is None else (live and in_kernel())
        self.text = live is None and not self.kernel or (live is True and not self.kernel)
        self.handle = None
        self.last = 0.0
        self.seen: dict[int, tuple] = {}
        if self.kernel:
            from IPython.display import HTML, display

            self.handle = display(HTML(self._html()), display_id=True)

    def _html(self) -> str:
        run = self.run
        head = (f"<b>{html.escape(run.name)}</b> · {run.nproc} ranks · {run.elapsed:.1f} s of "
                f"{run.timeout:.0f} s timeout · logs <code>{html.escape(str(run.log_dir))}</code>")
        if run.early_verdict is not None:
            head += (f"<br><b style='color:#d62728'>culprit: rank {run.early_verdict.culprit}</b> "
                     f"({html.escape(run.early_verdict.reason)}); stopping the other ranks ...")
        cells = "".join(
            f"<tr><td>{r['rank']}</td><td>{html.escape(r['stage'])}</td>"
            f"<td style='color:{STATUS_COLOR.get(r['status'], '#555')}'>{html.escape(r['status'])}</td>"
            f"<td>{_since(r)}</td>"
            f"<td><code>{html.escape(r['last'])}</code></td></tr>" for r in _rank_rows(run))
        return (f"<div>{head}<table><tr><th>rank</th><th>stage</th><th>status</th><th>for</th>"
                f"<th>last log line</th></tr>{cells}</table></div>")

    def update(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last < self.every:
            return
        self.last = now
        if self.handle is not None:
            from IPython.display import HTML

            self.handle.update(HTML(self._html()))
        elif self.text:
            if self.run.early_verdict is not None and "culprit" not in self.seen:
                self.seen["culprit"] = True
                print(f"[{self.run.elapsed:6.1f}s] {self.run.name}: culprit rank {self.run.early_verdict.culprit}: "
                      f"{self.run.early_verdict.reason}", file=sys.stderr, flush=True)
            for r in _rank_rows(self.run):
                key = (r["stage"], r["status"])
                if self.seen.get(r["rank"]) != key:
                    self.seen[r["rank"]] = key
                    print(f"[{self.run.elapsed:6.1f}s] {self.run.name} rank {r['rank']}: {r['stage']} {r['status']}",
                          file=sys.stderr, flush=True)

    def finish(self, result) -> None:
        if self.handle is not None:
            from IPython.display import HTML

            self.handle.update(HTML(f"<div><b>{html.escape(result.name)}</b>: {html.escape(result.status)} in "
                                    f"{result.wall_s:.1f} s · logs <code>{html.escape(str(result.log_dir))}</code></div>"))
        elif self.text:
            self.update(force=True)
            print(f"[{result.wall_s:6.1f}s] {result.name}: {result.status}; {result.verdict.reason}",
                  file=sys.stderr, flush=True)


def result_html(result) -> str:
    v = result.verdict
    color = "#2ca02c" if result.ok else "#d62728"
    head = (f"<p><b style='color:{color}'>{html.escape(result.name)}: {html.escape(result.status)}</b> "
            f"in {result.wall_s:.1f} s on {result.nproc} ranks. ")
    if not result.ok:
        who = "no single rank" if v.culprit is None else f"<b>rank {v.culprit}</b> ({html.escape(v.kind)})"
        head += f"Culprit: {who}. {html.escape(v.reason)}."
        if result.culprit_named_s is not None:
            head += f" Named {result.culprit_named_s:.1f} s after launch."
        if v.torchrun_blamed is not None and v.torchrun_blamed != v.culprit:
            head += f" (torchrun's 'Root Cause' names rank {v.torchrun_blamed}: a victim.)"
    head += "</p>"
    if result.findings:
        f = result.findings[0]
        head += (f"<p>Classified cause: <b>{html.escape(f.title)}</b> (<code>{f.category}</code>). "
                 f"{html.escape(f.remedies[0])}</p>")
    evidence = "".join(f"<li><code>{html.escape(e[:400])}</code></li>" for e in v.evidence)
    return head + (f"<ul>{evidence}</ul>" if evidence else "") + result.ranks.to_html()


def stage_matrix(result):
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
