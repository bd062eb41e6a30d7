"""Classifier: top-1 accuracy per category on the shared dev set vs a first-match keyword grep, and
throughput on a large synthetic NCCL log vs just reading the file (both measured in this run).

The dev set is read from ../shared/corpus/ (not copied into the project); without it the accuracy
rows say so and only throughput is measured.
"""
from __future__ import annotations

import collections
import json
import os
import tempfile
import time
from pathlib import Path

from nbhelpers.classify import classify, classify_file

TITLE = "Log classifier: accuracy per category (dev set) and throughput"
DEV = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus" / "real_failure_logs.dev.jsonl"

# the baseline a person would write first: one keyword per category, first match in file order wins
KEYWORDS = [("central directory", "checkpoint_corrupt"), ("EADDRINUSE", "port_in_use"),
            ("Address already in use", "port_in_use"), ("mismatch", "collective_mismatch"),
            ("unhandled cuda error", "nccl_unhandled_cuda_error"), ("unhandled system error", "nccl_system_error"),
            ("internal error", "nccl_internal_or_invalid_usage"), ("invalid usage", "nccl_internal_or_invalid_usage"),
            ("NET/IB", "infiniband"), ("SOCKET_IFNAME", "network_interface"), ("loopback", "network_interface"),
            ("shared memory", "dataloader_shm"), ("out of memory", "oom_in_collective"),
            ("exitcode: -9", "worker_killed"), ("-9", "worker_killed"), ("undefined symbol", "version_mismatch"),
            ("Watchdog", "collective_timeout"), ("Timed out waiting", "collective_timeout"),
            ("store", "rendezvous_timeout"), ("timed out", "rendezvous_timeout"), ("Timeout", "collective_timeout")]


def keyword_grep(text: str) -> str | None:
    best = None
    for kw, cat in KEYWORDS:
        i = text.find(kw)
        if i >= 0 and (best is None or i < best[0]):
            best = (i, cat)
    return best[1] if best else None


def synthetic_log(path: Path, mib: int) -> None:
    lines = ("node1:2134736:2285781 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/IPC\n"
             "node1:2134736:2285781 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>\n"
             "Epoch 3:  45%|████▌     | 4500/10000 [12:00<14:40,  6.25it/s, loss=2.31]\n"
             "/opt/torch/nn/modules/module.py:1234: UserWarning: something is deprecated\n") * 4000
    with path.open("w") as fh:
        while fh.tell() < mib << 20:
            fh.write(lines)
        fh.write("[rank5]:[E321 02:07:08 ProcessGroupNCCL.cpp:607] [Rank 5] Watchdog caught collective operation "
                 "timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600060 milliseconds\n"
                 "failed (exitcode: -9) local_rank: 3 (pid: 2630) of binary: /usr/bin/python\n")


def throughput(reps: int) -> dict:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "big.log"
        synthetic_log(path, 128)
        size = path.stat().st_size / 2**20
        reads, ours = [], []
        for _ in range(max(1, min(reps, 3))):
            t = time.perf_counter()
            with path.open(errors="replace") as fh:
                while fh.read(4 << 20):
                    pass
            reads.append(time.perf_counter() - t)
            t = time.perf_counter()
            found = classify_file(path)
            ours.append(time.perf_counter() - t)
        assert found[0].category == "worker_killed", found
    r, o = min(reads), min(ours)
    return {"row": "throughput, 128 MiB NCCL log (MiB/s)", "classifier": f"{size / o:.0f}",
            "baseline": f"{size / r:.0f} (read only)", "ratio": f"{r / o:.2f}"}


def rows(reps: int) -> list[dict]:
    out = []
    if DEV.exists():
        data = [json.loads(x) for x in DEV.read_text().splitlines() if x.strip()]
        per = collections.defaultdict(lambda: [0, 0, 0])
        for r in data:
            f = classify(r["log"])
            per[r["label"]][0] += bool(f) and f[0].category == r["label"]
            per[r["label"]][1] += keyword_grep(r["log"]) == r["label"]
            per[r["label"]][2] += 1
        for cat, (a, b, n) in sorted(per.items()):
            out.append({"row": cat, "classifier": f"{a}/{n}", "baseline": f"{b}/{n} (keyword grep)",
                        "ratio": f"{a / b:.2f}" if b else "-"})
        a = sum(v[0] for v in per.values())
        b = sum(v[1] for v in per.values())
        n = sum(v[2] for v in per.values())
        out.append({"row": "TOP-1 ACCURACY", "classifier": f"{a / n:.1%} ({a}/{n})",
                    "baseline": f"{b / n:.1%} ({b}/{n})", "ratio": f"{a / b:.2f}"})
    else:
        out.append({"row": f"dev set not found at {DEV}: accuracy skipped", "classifier": "-", "baseline": "-",
                    "ratio": "-"})
    out.append(throughput(reps))
    return out
