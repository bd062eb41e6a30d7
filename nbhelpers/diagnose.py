"""Notebook 01's calls: set up the notebook, run the staged probe, scale it up 1 -> 2 -> 4."""
from __future__ import annotations

import sys

from .launcher import RunResult, launch


def setup_notebook(quiet: bool = False) -> dict:
    """Plotly output that survives HTML export, and a warning (not a failure) without a GPU."""
    import plotly.io as pio
    import torch

    pio.renderers.default = "plotly_mimetype+notebook"
    info = {"torch": torch.__version__, "gpus": torch.cuda.device_count() if torch.cuda.is_available() else 0}
    info["backend"] = "nccl" if info["gpus"] else "gloo"
    if not quiet:
        if info["gpus"]:
            print(f"torch {info['torch']}: {info['gpus']} GPU(s); ranks will use NCCL.")
        else:
            print(f"torch {info['torch']}: no GPU here. Every run uses the gloo backend on the CPU: real processes, "
                  "sockets and timeouts, but NCCL-specific behaviour (NCCL_DEBUG logs, transports) is not shown.",
                  file=sys.stderr)
    return info


def probe_args(*, timeout: float = 30.0, size_mb: float = 16.0, fault: str | None = None, fault_rank: int = 1,
               fault_stage: str = "large_allreduce", stall: float = 30.0, backend: str = "auto") -> list[str]:
    args = ["--timeout", str(timeout), "--size-mb", str(size_mb), "--backend", backend]
    if fault and fault != "none":
        args += ["--fault", fault, "--fault-rank", str(fault_rank), "--fault-stage", fault_stage, "--stall", str(stall)]
    return args


def probe(nproc: int = 2, *, timeout: float = 30.0, size_mb: float = 16.0, fault: str | None = None,
          fault_rank: int = 1, fault_stage: str = "large_allreduce", stall: float = 30.0, backend: str = "auto",
          run_timeout: float | None = None, env: dict | None = None, live: bool | None = None,
          **kw) -> RunResult:
    """Run the staged probe on ``nproc`` ranks; ``fault`` injects one failure on ``fault_rank``.

    ``timeout`` bounds init and every collective (init_process_group's timeout); ``run_timeout``
    bounds the whole run from outside (default: enough for every stage to time out once).
    """
    args = probe_args(timeout=timeout, size_mb=size_mb, fault=fault, fault_rank=fault_rank,
                      fault_stage=fault_stage, stall=stall, backend=backend)
    name = f"probe-{fault}" if fault and fault != "none" else "probe"
    return launch("probe", args, nproc=nproc, timeout=run_timeout or max(60.0, 3 * timeout + 30), env=env,
                  live=live, name=name, **kw)


def scale_up(sizes=(1, 2, 4), **probe_kw):
    """Seed 000's advice done in one call: probe 1, then 2, then 4 ranks; stop at the first failure."""
    import pandas as pd

    rows, results = [], {}
    for n in sizes:
        res = probe(n, **probe_kw)
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
    table.attrs["results"] = results
    return table


REMEDIES = {
    "late": "Find out why that rank is late: its stack dump shows where it was. Data loading, a rank-0-only "
            "step (checkpointing, evaluation, logging) or an `if rank == ...` branch are the usual places. A longer "
            "timeout only makes the hang last longer.",
    "named": "That rank never reached init_process_group (or reached it elsewhere): check it started, that every "
             "rank got the same MASTER_ADDR/MASTER_PORT, and what it was doing (its stack dump).",
    "crashed": "Read that rank's own log: its error, exit code or signal is the cause. SIGKILL usually means the "
               "OOM killer (check `dmesg`); SIGABRT/SIGSEGV a C++ failure. The other ranks' errors are consequences.",
    "unreachable": "That rank cannot reach the rendezvous store or a peer: check MASTER_ADDR/MASTER_PORT on every "
                   "rank, the firewall, and the interface (GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME); notebook 05.",
    "unmatched": "That rank calls a collective the others never call, typically inside `if rank == 0:` (loading or "
                 "saving a checkpoint, logging, evaluation). Every rank must call every collective in the same order: "
                 "move it out of the branch. A longer timeout only makes the hang last longer (notebook 04).",
    "desync": "That rank left the common sequence of collectives: it skipped one, called one the others did not "
              "(an `if rank == 0:` around code that communicates), or sent another shape. Make every rank make the "
              "same calls in the same order; when a rank must skip, agree on it first with a small all_reduce of "
              "an error flag (notebook 03). TORCH_DISTRIBUTED_DEBUG=DETAIL reports mismatches at once.",
    "mismatch": "The ranks called a collective with different sizes (or different collectives). Rerun with "
                "TORCH_DISTRIBUTED_DEBUG=DETAIL: every rank then raises an error that names the shapes and ranks "
                "instead of one rank aborting (notebooks 02 and 03).",
    "exit_abort": "Nothing hung and no step failed: the rank aborted while Python shut down because the script never "
                  "called dist.destroy_process_group(). Wait on async collectives (`work.wait()`), then call "
                  "dist.destroy_process_group() at the end of every rank, in a `finally:`. A longer timeout or a "
                  "restart does not fix it; a restart may only pass by chance.",
    "error": "That rank raised an error of its own; fix it and the rest follows.",
    "unknown": "No rank stands out: all were waiting in the same stage. Compare the stack dumps, then suspect the "
               "network (notebook 05) or a collective mismatch (notebook 03).",
}


def remedy(result: RunResult) -> str:
    """What to do about this run's verdict, in one paragraph."""
    return "" if result.ok else REMEDIES.get(result.verdict.kind, REMEDIES["unknown"])


def fault_gallery(faults=("stall", "never-join", "exit", "wrong-port"), nproc: int = 2, fault_rank: int = 1,
                  timeout: float = 5.0, size_mb: float = 4.0, **kw):
    """Run the probe once per fault; one row each: who failed first, whom torchrun blames, the culprit."""
    import pandas as pd

    rows, results = [], {}
    for fault in faults:
        res = probe(nproc, timeout=timeout, size_mb=size_mb, fault=fault, fault_rank=fault_rank, **kw)
        results[fault] = res
        s = res.summary()
        first_err = next((e.get("error") for e in res.events if e.get("status") == "fail"), None)
        rows.append({"fault": fault, "status": res.status, "failed after s": s["first_failure_s"],
                     "culprit named after s": s["culprit_named_s"],
                     "first to raise": s["first_to_raise"], "torchrun blames": s["torchrun_blamed"],
                     "culprit": s["culprit_rank"], "rule": s["kind"],
                     "first error": (first_err or "").splitlines()[-1][:120] if first_err else ""})
    table = pd.DataFrame(rows).set_index("fault")
    table.attrs["results"] = results
    return table
