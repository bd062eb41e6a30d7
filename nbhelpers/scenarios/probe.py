"""Notebook 01's runs: the staged probe, one fault at a time, scaled up 1 -> 2 -> 4 ranks."""
from __future__ import annotations

from nbhelpers.runtime.launcher import RunResult, launch
from nbhelpers.scenarios.api import Gallery, run_side_by_side


START_FAULTS = ("never-join", "wrong-port")
"""Faults that strike before every rank is ready: there the timeout must bound start-up itself (the others wait
in ``init_process_group`` for a rank that never comes).  Every other fault's timeout starts once all are ready."""


def probe_args(*, timeout: float = 30.0, size_mb: float = 16.0, fault: str | None = None, fault_rank: int = 1,
               fault_stage: str = "large_allreduce", stall: float = 30.0, backend: str = "auto") -> list[str]:
    args = ["--timeout", str(timeout), "--size-mb", str(size_mb), "--backend", backend]
    if fault in START_FAULTS:
        args += ["--start-timeout", str(timeout)]
    if fault and fault != "none":
        args += ["--fault", fault, "--fault-rank", str(fault_rank), "--fault-stage", fault_stage, "--stall", str(stall)]
    return args


def probe(nproc: int = 2, *, timeout: float = 30.0, size_mb: float = 16.0, fault: str | None = None,
          fault_rank: int = 1, fault_stage: str = "large_allreduce", stall: float = 30.0, backend: str = "auto",
          run_timeout: float | None = None, env: dict | None = None, live: bool | None = None,
          **kw) -> RunResult:
    """Run the staged probe on ``nproc`` ranks; ``fault`` injects one failure on ``fault_rank``.

    ``timeout`` bounds every collective once all ranks are ready (and init itself for the faults of
    :data:`START_FAULTS`); ``run_timeout`` bounds the run from outside, counted from when every rank is ready
    (default: enough for every stage to time out once).
    """
    args = probe_args(timeout=timeout, size_mb=size_mb, fault=fault, fault_rank=fault_rank,
                      fault_stage=fault_stage, stall=stall, backend=backend)
    name = f"probe-{fault}" if fault and fault != "none" else "probe"
    return launch("probe", args, nproc=nproc, timeout=run_timeout or max(60.0, 3 * timeout + 30), env=env,
                  live=live, name=name, **kw)


def scale_up(sizes=(1, 2, 4), done: dict | None = None, **probe_kw):
    """The 'start small, then grow' advice in one call: probe 1, then 2, then 4 ranks; stop at the first failure.
    ``done``: probes already run with the same settings (ranks -> RunResult, e.g. the notebook's healthy probe),
    shown as they are instead of run again."""
    import pandas as pd

    rows, results = [], {}
    for n in sizes:
        res = (done or {}).get(n) or probe(n, **probe_kw)
        results[n] = res
        st = res.stages
        ready = st[st.stage == "rendezvous"]["end"].max()
        big = [e.get("busbw_gbs") for e in res.events if e.get("stage") == "large_allreduce" and e.get("status") == "ok"]
        rows.append({"ranks": n, "status": res.status, "wall s": round(res.wall_s, 2),
                     "all ranks ready s": None if ready != ready else round(ready, 2),
                     "busbw GB/s (large)": round(min(big), 3) if big and n > 1 else None,
                     "culprit": res.culprit, "reason": "" if res.ok else res.verdict.reason})
        if not res.ok:
            break
    table = pd.DataFrame(rows).set_index("ranks")
    return Gallery(table, results)


def fault_gallery(faults=("stall", "never-join", "exit", "wrong-port"), nproc: int = 2, fault_rank: int = 1,
                  timeout: float = 5.0, size_mb: float = 4.0, parallel: int = 2, done: dict | None = None, **kw):
    """Run the probe once per fault, ``parallel`` worlds at a time (their time is spent waiting on timeouts);
    one row each: who failed first, whom torchrun blames, the culprit.  ``done``: runs already made (fault ->
    RunResult, e.g. the one a notebook showed in detail), shown as they are instead of run again."""
    import pandas as pd

    kw.setdefault("live", False if parallel > 1 else None)
    done = {f: r for f, r in (done or {}).items() if f in faults}
    ran = run_side_by_side({f: (lambda f=f: probe(nproc, timeout=timeout, size_mb=size_mb, fault=f,
                                                  fault_rank=fault_rank, **kw)) for f in faults if f not in done},
                           parallel)
    results = {f: done[f] if f in done else ran[f] for f in faults}
    rows = []
    for fault, res in results.items():
        s = res.to_dict()
        rows.append({"fault": fault, "status": res.status, "failed after s": s["first_failure_s"],
                     "culprit named after s": s["culprit_named_s"],
                     "first to raise": s["first_to_raise"], "torchrun blames": s["torchrun_blamed"],
                     "culprit": s["culprit_rank"], "rule": s["culprit_kind"], "first error": res.first_error()[:120]})
    table = pd.DataFrame(rows).set_index("fault")
    return Gallery(table, results)
