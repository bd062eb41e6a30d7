"""Launch to all-ranks-ready: the workbook's launcher vs bare torchrun, same 2-rank probe, same run.

"Ready" is the moment the last rank finished init_process_group (its rendezvous event), measured
from just before the launch call; "done" is the whole run back in the caller.  The launcher adds a
port check, a shim process per rank, log files and the verdict.

Third row: rank 1 stalls before the large all_reduce (timeout 5 s).  Bare torchrun returns when the
world is torn down and its "Root Cause" names rank 0 (the victim); the launcher names rank 1 as soon
as rank 0 fails.  Both measured from just before the launch call.
"""
from __future__ import annotations

import statistics
import subprocess
import sys
import time

from nbhelpers.runtime.events import parse_lines
from nbhelpers.runtime.ports import free_port
from nbhelpers.scenarios.probe import probe

TITLE = "Launch to all ranks ready, 2-rank probe (seconds, median)"
ARGS = ["--timeout", "30", "--size-mb", "1"]


def ready_at(events) -> float:
    return max(e["end"] for e in events if e["stage"] == "rendezvous" and e["status"] == "ok")


def bare_torchrun() -> tuple[float, float]:
    t0 = time.time()
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                          "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{free_port()}",
                          "-m", "nbhelpers.workers.probe", *ARGS],
                         capture_output=True, text=True, check=True, env={**__import__("os").environ,
                                                                          "OMP_NUM_THREADS": "1"})
    done = time.time() - t0
    return ready_at(parse_lines(out.stdout.splitlines())) - t0, done


STALL = ["--timeout", "5", "--size-mb", "1", "--fault", "stall", "--fault-rank", "1", "--stall", "30"]


def bare_torchrun_stall() -> tuple[float, str]:
    t0 = time.time()
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                          "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{free_port()}",
                          "-m", "nbhelpers.workers.probe", *STALL],
                         capture_output=True, text=True, env={**__import__("os").environ, "OMP_NUM_THREADS": "1"})
    from nbhelpers.diagnosis.culprit import torchrun_root_cause

    return time.time() - t0, f"rank {torchrun_root_cause(out.stderr + out.stdout)}"


def launcher_stall() -> tuple[float, str]:
    t0 = time.time()
    res = probe(2, timeout=5, size_mb=1, fault="stall", fault_rank=1, stall=30, live=False)
    return res.started - t0 + res.culprit_named_s, f"rank {res.culprit}"


def launcher() -> tuple[float, float]:
    t0 = time.time()
    res = probe(2, timeout=30, size_mb=1, live=False)
    done = time.time() - t0
    assert res.ok, res.verdict
    return ready_at(res.events) - t0, done


def rows(reps: int) -> list[dict]:
    bare, ours = [], []
    for _ in range(reps):  # interleaved, so drift in machine load hits both alike
        bare.append(bare_torchrun())
        ours.append(launcher())
    out = []
    for i, metric in enumerate(["all ranks ready", "run done"]):
        b = statistics.median(x[i] for x in bare)
        o = statistics.median(x[i] for x in ours)
        out.append({"metric": metric, "bare torchrun": f"{b:.2f}", "launcher": f"{o:.2f}",
                    "ratio launcher/bare": f"{o / b:.2f}", "reps": reps})
    bare_s, ours_s = [], []
    for _ in range(reps):
        bare_s.append(bare_torchrun_stall())
        ours_s.append(launcher_stall())
    b, o = statistics.median(x[0] for x in bare_s), statistics.median(x[0] for x in ours_s)
    out.append({"metric": f"stalled rank 1, 5 s timeout: blame named "
                          f"(torchrun: {bare_s[-1][1]}, launcher: {ours_s[-1][1]})",
                "bare torchrun": f"{b:.2f}", "launcher": f"{o:.2f}", "ratio launcher/bare": f"{o / b:.2f}",
                "reps": reps})
    return out
