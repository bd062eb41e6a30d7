"""A/B runs: the same worker, the same world size, under two or more configs, repeated and interleaved.

    ab = ab_test([preset("basic").config(timeout_s=10), preset("conservative").config(timeout_s=10)],
                 target="allreduce_bench", repeats=2)
    ab.table          # one row per run: pass/fail, time per stage, busbw, compute step, classified error
    ab.summary()      # one row per config (medians)
    ab.chart()        # plotly: time per stage, busbw, outcome
    print(ab.export("conservative"))

Every config is checked before the first launch (``check=False`` runs a refused config anyway, to see
its failure for real).  Runs are interleaved (A B A B ...) so a machine that gets busier halfway does
not favour one config.
"""
from __future__ import annotations

import contextlib
import statistics
import sys
from dataclasses import dataclass, field
from typing import Sequence

from nbhelpers.errors import ConfigError
from nbhelpers.runtime.launchconfig import Config
from nbhelpers.runtime import machine
from nbhelpers.runtime.launcher import RunResult, launch
from nbhelpers.scenarios.api import run_side_by_side

STAGE_ORDER = ["fingerprint", "rendezvous", "device", "compute", "small_allreduce", "barrier", "large_allreduce",
               "allreduce", "allgather_broadcast", "destroy", "done"]


def _median(values):
    values = [v for v in values if v is not None and v == v]
    return statistics.median(values) if values else None


def _exits(res: RunResult) -> str:
    parts = []
    for r in range(res.nproc):
        rec = res.records.get(r, {})
        sig, code = rec.get("signal"), rec.get("returncode")
        parts.append(f"{r}:{sig or code if code is not None else '?'}")
    return " ".join(parts)


def run_row(cfg: Config, rep: int, res: RunResult) -> dict:
    """One table row for one run: outcome, time per stage (slowest rank), bandwidth, compute step."""
    s = res.to_dict()
    first_fail = next((e for e in res.events if e.get("status") == "fail"), None)
    crashed = [rec["end"] - res.started for rec in res.records.values()
               if rec.get("end") and rec.get("signal") not in (None, "SIGTERM") and rec.get("returncode")]
    fails = [x for x in (s["first_failure_s"], min(crashed, default=None)) if x is not None]
    row = {"config": cfg.name, "rep": rep, "status": res.status, "passed": res.ok,
           "wall s": round(res.wall_s, 2), "failed after s": round(min(fails), 2) if fails else None,
           "failed stage": first_fail["stage"] if first_fail else None,
           "failed stage s": (round(first_fail["end"] - first_fail["start"], 2)
                              if first_fail and first_fail.get("start") and first_fail.get("end") else None),
           "category": res.category, "culprit": res.culprit, "exits": _exits(res),
           "first error": "" if res.ok else res.first_error()}
    st = res.stages
    for name in STAGE_ORDER:
        sec = st[st.stage == name]["seconds"]
        if len(sec):
            row[f"{name} s"] = round(float(sec.max()), 4)
    evs = [e for e in res.events if e.get("status") == "ok"]
    bw = _median([e.get("busbw_gbs") for e in evs])
    row["busbw GB/s"] = None if bw is None else round(bw, 3)
    small = _median([e["sizes"][0]["ms"] for e in evs if e.get("sizes")])
    row["small op ms"] = None if small is None else round(small, 3)
    step = _median([e.get("step_ms") for e in evs])
    row["compute ms"] = None if step is None else round(step, 2)
    threads = {e.get("threads") for e in evs if e.get("threads") is not None}
    row["threads"] = threads.pop() if len(threads) == 1 else (sorted(threads) if threads else None)
    return row


@dataclass
class ABResult:
    """Every run of an A/B test, as results and as a table."""

    configs: list[Config]
    target: str
    nproc: int
    runs: list[tuple[Config, int, RunResult]] = field(default_factory=list)

    @property
    def table(self):
        import pandas as pd

        return pd.DataFrame([run_row(c, rep, r) for c, rep, r in self.runs])

    def result(self, config: str, rep: int = 0) -> RunResult:
        return next(r for c, k, r in self.runs if c.name == config and k == rep)

    def summary(self):
        """One row per config: runs passed, medians of wall time, time to failure, bandwidth, compute."""
        import pandas as pd

        t = self.table
        rows = []
        for cfg in self.configs:
            g = t[t.config == cfg.name]
            cats = [c for c in g["category"] if c]
            rows.append({"config": cfg.name, "timeout s": cfg.timeout_s,
                         "passed": f"{int(g['passed'].sum())}/{len(g)}",
                         "wall s": _median(g["wall s"]), "failed after s": _median(g["failed after s"]),
                         "failed stage s": _median(g["failed stage s"]),
                         "busbw GB/s": _median(g["busbw GB/s"]), "small op ms": _median(g["small op ms"]),
                         "compute ms": _median(g["compute ms"]),
                         "threads": g["threads"].iloc[0] if len(g) else None,
                         "category": max(set(cats), key=cats.count) if cats else None,
                         "exits": g["exits"].iloc[0] if len(g) else None,
                         "first error": next((e for e in g["first error"] if e), ""),
                         "env": " ".join(f"{k}={v}" for k, v in sorted(cfg.env.items()))})
        return pd.DataFrame(rows).set_index("config")

    def config(self, name: str) -> Config:
        return next(c for c in self.configs if c.name == name)

    def export(self, name: str, script: str = "train.py", timeout_s: int | None = None) -> str:
        """The chosen config as export lines, a torchrun line for your script, and one for this worker.

        ``timeout_s`` replaces the timeout the A/B ran with (short on CPU) by the one the real job needs.
        """
        cfg = self.config(name)
        if timeout_s is not None:
            cfg = cfg.variant(cfg.name, timeout_s)
        return "\n".join([cfg.shell_snippet(), "", "# one line, your script:",
                          cfg.torchrun_command(script, nproc=self.nproc), "",
                          "# one line, the workbook's worker as measured here:",
                          cfg.worker_command(self.target, self.nproc)])

    def chart(self, title: str | None = None):
        """Left: median seconds per stage (slowest rank), stacked. Right: busbw per run, ✔/✘ per outcome."""
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots

        t = self.table
        labels = {}
        for cfg in self.configs:
            g = t[t.config == cfg.name]
            cat = next((c for c in g["category"] if c), "")
            labels[cfg.name] = f"{cfg.name}<br>{int(g['passed'].sum())}/{len(g)} ok" + (f"<br>{cat}" if cat else "")
        x = [labels[c.name] for c in self.configs]
        fig = make_subplots(rows=1, cols=2, subplot_titles=("median seconds per stage (slowest rank)",
                                                            "busbw GB/s per run"), column_widths=[0.6, 0.4])
        for name in STAGE_ORDER:
            col = f"{name} s"
            if col not in t:
                continue
            ys = [_median(t[t.config == c.name][col]) for c in self.configs]
            if any(y for y in ys):
                fig.add_trace(go.Bar(x=x, y=ys, name=name), row=1, col=1)
        for ok, mark, color in ((True, "circle", "#2ca02c"), (False, "x", "#d62728")):
            g = t[t.passed == ok]
            if len(g):
                fig.add_trace(go.Scatter(x=[labels[c] for c in g["config"]], y=g["busbw GB/s"].fillna(0),
                                         mode="markers", marker_symbol=mark, marker_color=color, marker_size=11,
                                         name="passed" if ok else "failed",
                                         hovertext=[f"rep {r}: {s} {e}" for r, s, e in
                                                    zip(g["rep"], g["status"], g["first error"])]),
                              row=1, col=2)
        fig.update_layout(barmode="stack", height=380, title=title or f"A/B: {self.target} on {self.nproc} ranks",
                          margin=dict(l=10, r=10, t=60, b=30))
        return fig


def ab_test(configs: Sequence[Config], target: str = "allreduce_bench", args: Sequence[str] = (), *, nproc: int = 2,
            repeats: int = 2, check: bool = True, run_timeout: float | None = None,
            interfaces: list[dict] | None = None, quiet: bool = False, measure: bool | None = None) -> ABResult:
    """Run ``target`` once per config per repeat (interleaved); refuse bad configs before any launch.
    ``measure``: the runs have the machine to themselves (:func:`nbhelpers.runtime.machine.exclusive`); by
    default when ``target`` is the speed benchmark.  Pass False for an A/B that compares outcomes, not speed."""
    configs = list(configs)
    if len(configs) < 2:
        raise ValueError("an A/B test needs at least two configs")
    names = [c.name for c in configs]
    if len(set(names)) != len(names):
        raise ValueError(f"config names must differ: {names}")
    if check:
        problems = [f"{c.name}: {p}" for c in configs for p in c.problems(interfaces)]
        if problems:
            raise ConfigError(", ".join(c.name for c in configs if c.problems(interfaces)), problems)
    ab = ABResult(configs, target, nproc)
    total = len(configs) * repeats
    # a speed benchmark has the machine to itself; an A/B of outcomes (pass or fail, which error) runs beside others
    if measure is None:
        measure = target == "allreduce_bench"
    with machine.exclusive() if measure else contextlib.nullcontext():
        _ab_runs(ab, configs, target, args, nproc, repeats, run_timeout, quiet, total, 1 if measure else 2)
    return ab


def _ab_runs(ab, configs, target, args, nproc, repeats, run_timeout, quiet, total, parallel: int) -> None:
    """Each repeat runs every config; one after another when they measure speed, else two worlds side by side
    (their outcomes do not depend on it: every timeout starts once all ranks are ready, workers.common.init)."""
    def one(cfg):
        return launch(target, ["--timeout", str(cfg.timeout_s), *args], nproc=nproc, env=cfg.env, live=False,
                      name=f"ab-{cfg.name}", timeout=run_timeout or max(60.0, 3 * float(cfg.timeout_s) + 30),
                      hang_after=None)  # timings: no stack sampling

    for rep in range(repeats):
        if parallel > 1:
            done = run_side_by_side({cfg.name: (lambda cfg=cfg: one(cfg)) for cfg in configs}, parallel)
        for cfg in configs:
            res = done[cfg.name] if parallel > 1 else one(cfg)
            ab.runs.append((cfg, rep, res))
            if not quiet:
                extra = "" if res.ok else f" ({res.category or res.verdict.kind})"
                print(f"[{len(ab.runs)}/{total}] {cfg.name} rep {rep + 1}: {res.status}{extra} in {res.wall_s:.1f} s",
                      file=sys.stderr, flush=True)
