"""NCCL's own log, for real, on GPUs: the all_reduce benchmark under NCCL_DEBUG=INFO, parsed by
:mod:`nbhelpers.diagnosis.nccllog` (its rows; :mod:`nbhelpers.views.tables` shows them), and the transports NCCL
picks under each setting.  Without GPUs
these raise a WorkbookError that says so (notebook 02 shows the parser on saved real lines instead)."""
from __future__ import annotations

from collections import Counter

from nbhelpers.diagnosis.nccllog import log_rows
from nbhelpers.errors import WorkbookError
from nbhelpers.runtime.devices import gpu_count
from nbhelpers.runtime.launcher import launch

__all__ = ["nccl_debug_run", "nccl_transport_ab"]


def nccl_debug_run(nproc: int | None = None, subsys: str = "INIT,NET", extra_env: dict | None = None,
                   sizes_kb: str = "1024", timeout: float = 60.0):
    """Run the all_reduce benchmark on NCCL with NCCL_DEBUG=INFO; return (RunResult, its NCCL lines' rows): the
    tables of :mod:`nbhelpers.views.tables` take the rows as they are.

    Needs one GPU per rank (``nproc`` defaults to the GPUs present, at most 2); raises WorkbookError
    without GPUs.
    """
    gpus = gpu_count()
    if gpus == 0:
        raise WorkbookError("no GPU here: NCCL cannot run, so there is no NCCL_DEBUG log to read.",
                            "parse a saved log instead: parse_nccl(open('rank0.log').read()), or sample_log().")
    nproc = nproc or min(gpus, 2)
    env = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": subsys, **(extra_env or {})}
    res = launch("allreduce_bench", ["--backend", "nccl", "--timeout", "30", "--sizes-kb", sizes_kb, "--matmul", "0"],
                 nproc=nproc, env=env, live=False, name="nccl-debug", timeout=timeout, hang_after=None)
    return res, log_rows(res.logs)


def nccl_transport_ab(settings=({}, {"NCCL_P2P_DISABLE": "1"}, {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}),
                      nproc: int | None = None):
    """On GPUs: the NCCL_DEBUG table under each setting; one row each with the transports NCCL chose.

    Needs two GPUs or more on this node for channels to appear (one rank has no peer).
    """
    import statistics

    import pandas as pd

    rows = []
    for extra in settings:
        res, lines = nccl_debug_run(nproc, extra_env=extra)
        channels = Counter((r["transport"], r["detail"]) for r in lines if r["kind"] == "channel")
        bw = [e["busbw_gbs"] for e in res.events if e.get("stage") == "allreduce" and e.get("status") == "ok"]
        rows.append({"setting": " ".join(f"{k}={v}" for k, v in extra.items()) or "(defaults)",
                     "status": res.status,
                     "transports": ", ".join(f"{t}/{d} x{n}" for (t, d), n in sorted(channels.items())) or None,
                     "network": ", ".join(dict.fromkeys(r["value"] for r in lines if r["kind"] == "network")) or None,
                     "busbw GB/s": round(statistics.median(bw), 3) if bw else None})
    return pd.DataFrame(rows).set_index("setting")
