"""Notebook 03's calls for the real causes of collective timeouts: run a scenario, name the rank, chart it.

    res = desync_scenario("skip")                # 3 ranks, rank 1 skips a collective
    res.culprit                                   # 1
    nb.sequence_chart(res)                        # rank x collective sequence: where each rank stopped
    gallery()                                     # every scenario, one row each

Scenarios are run by :mod:`nbhelpers.workers.desync` (each in its own torchrun world: gloo aborts
the whole process on a size mismatch, so none of this may run in the kernel).
"""
from __future__ import annotations


from nbhelpers.runtime.launcher import RunResult, launch
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
