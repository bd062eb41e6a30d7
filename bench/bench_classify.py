"""Classifier: top-1 accuracy per category on the shared dev set and on the two held-out sets of real
snippets (tests/data/: `heldout` was used to improve the rules, `fresh` was measured once before any change
it could inspire), vs a first-match keyword grep; and throughput on a large synthetic NCCL log vs just
reading the file (both measured in this run).

The dev set is read from ../shared/corpus/ (not copied into the project); without it its column says so.
"""
from __future__ import annotations

import collections
import json
import sys
import tempfile
import time
from pathlib import Path

from nbhelpers.runtime.learned import classify, classify_file

TITLE = "Log classifier: accuracy per category (dev set, held-out sets) and throughput"
ROOT = Path(__file__).resolve().parent.parent
DEV = ROOT.parent / "shared" / "corpus" / "real_failure_logs.dev.jsonl"
SETS = {"dev": DEV, "heldout": ROOT / "tests" / "data" / "real_failure_logs.heldout.jsonl",
        "fresh": ROOT / "tests" / "data" / "real_failure_logs.fresh.jsonl"}

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


def coll_log(path: Path, mib: int) -> None:
    """NCCL_DEBUG_SUBSYS=COLL output of four processes, every line a collective; the last opCount disagrees."""
    line = ("node1:{pid}:{pid} [{dev}] NCCL INFO {op}: opCount {n:x} sendbuff 0x7f5dd32b2100 recvbuff 0x7f5dd32b2100 "
            "count {count} datatype 7 op 0 root 0 comm 0x55bef0201370 [nranks=4] stream 0x55bef0208bd0\n")
    n = 0
    with path.open("w") as fh:
        while fh.tell() < mib << 20:
            fh.write("".join(line.format(pid=4500 + r, dev=r, op="AllReduce", n=n + i, count=9984512)
                             for i in range(1000) for r in range(4)))
            n += 1000
        fh.write("".join(line.format(pid=4500 + r, dev=r, op="AllGather" if r == 2 else "AllReduce", n=n,
                                     count=15360 if r == 2 else 9984512) for r in range(4)))


def throughput(reps: int, kind: str = "info") -> dict:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "big.log"
        (synthetic_log if kind == "info" else coll_log)(path, 128)
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
        assert found[0].category == ("worker_killed" if kind == "info" else "collective_mismatch"), found
    r, o = min(reads), min(ours)
    what = "NCCL log" if kind == "info" else "NCCL COLL log, every line a collective"
    return {"row": f"throughput, 128 MiB {what} (MiB/s)", **{k: "-" for k in SETS}, "classifier": f"{size / o:.0f}",
            "baseline": f"{size / r:.0f} (read only)", "ratio": f"{r / o:.2f}"}


def load(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def accuracy_rows() -> list[dict]:
    """Per category: classifier top-1 on each set, then on all sets together vs the keyword grep."""
    data = {name: load(path) for name, path in SETS.items() if path.exists()}
    per = collections.defaultdict(lambda: collections.defaultdict(lambda: [0, 0]))  # cat -> set -> [hits, n]
    grep = collections.defaultdict(int)
    for name, rows_ in data.items():
        for r in rows_:
            f = classify(r["log"])
            cell = per[r["label"]][name]
            cell[0] += bool(f) and f[0].category == r["label"]
            cell[1] += 1
            grep[r["label"]] += keyword_grep(r["log"]) == r["label"]

    def frac(cell) -> str:
        return f"{cell[0]}/{cell[1]}" if cell[1] else "-"

    out = []
    for cat in sorted(per) + ["TOP-1 ACCURACY"]:
        cells = per[cat] if cat in per else {
            name: [sum(per[c][name][0] for c in per), sum(per[c][name][1] for c in per)] for name in SETS}
        a = sum(v[0] for v in cells.values())
        n = sum(v[1] for v in cells.values())
        b = sum(grep.values()) if cat not in per else grep[cat]
        row = {"row": cat}
        for name, path in SETS.items():
            row[name] = frac(cells.get(name, [0, 0])) if path.exists() else "absent"
            if cat not in per and cells.get(name, [0, 0])[1]:
                row[name] += f" ({cells[name][0] / cells[name][1]:.1%})"
        row.update({"classifier": f"{a}/{n}" + (f" ({a / n:.1%})" if cat not in per else ""),
                    "baseline": f"{b}/{n}" + (f" ({b / n:.1%})" if cat not in per else "") + " (keyword grep)",
                    "ratio": f"{a / b:.2f}" if b else "-"})
        out.append(row)
    return out


def rows(reps: int) -> list[dict]:
    out = accuracy_rows()
    if not DEV.exists():
        print(f"dev set not found at {DEV}: its column says 'absent'", file=sys.stderr)
    out.append(throughput(reps))
    out.append(throughput(reps, "coll"))
    return out
