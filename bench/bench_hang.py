"""Hangs: how soon the culprit is named, on a realistic DDP script that hangs, and how the verdict scales.

The script is examples/faulty/train_sharded_files.py: rank 1's DataLoader waits forever for a feature
shard nobody wrote, rank 0 waits in DDP's gradient all_reduce; the script emits no events.  Its
process-group timeout is 30 s.  Baseline: bare torchrun on the same script (it fails at the timeout and
names a victim).  Then the verdict over 1024 ranks' stacks (real py-spy dumps, one rank made odd), and what
attaching costs a healthy job (steps per second with and without ``attach`` every 0.5 s).

Then what must never be called a hang, under ``--stop-on-hang``: rank 0 alone for 5 s and 30 s while its peer
waits at a barrier (evaluating on the CPU; writing a checkpoint to disk; writing it to a file system that takes
8 MiB/s, asleep in write()), and every healthy job of the development sets (``expected.json`` says ``ok``).
"""
from __future__ import annotations

import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

TITLE = "Hangs: time to the culprit, live hang watch vs process-group timeout vs bare torchrun (same script, same run)"
REPO = Path(__file__).resolve().parent.parent
PG_TIMEOUT = 30
DUMPS = REPO / "tests" / "data" / "runs"


def _copy(name: str) -> Path:
    from nbhelpers.scenarios.supervise import example

    return example(name, Path(tempfile.mkdtemp(prefix="nbh-bench-")))


def bare_torchrun() -> dict:
    script = _copy("train_sharded_files")
    t = time.time()
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--rdzv-backend",
                          "c10d", "--rdzv-endpoint", "127.0.0.1:0", str(script), "--pg-timeout", str(PG_TIMEOUT)],
                         capture_output=True, text=True, timeout=300, cwd=script.parent)
    wall = time.time() - t
    shutil.rmtree(script.parent, ignore_errors=True)
    root = re.search(r"Root Cause.*?rank\s*:\s*(\d+)", out.stdout + out.stderr, re.DOTALL)
    return {"how": "bare torchrun (baseline)", "culprit": f"{root[1]} (torchrun's Root Cause)" if root else "none",
            "named at s": round(wall, 1), "after divergence s": "", "wall s": round(wall, 1)}


def workbook(extra: list[str], how: str) -> dict:
    script = _copy("train_sharded_files")
    out = subprocess.run([sys.executable, "-m", "nbhelpers", "run", "--nproc", "2", "--timeout", "200", "--json", *extra,
                          str(script), "--pg-timeout", str(PG_TIMEOUT)], capture_output=True, text=True, timeout=300,
                         cwd=script.parent)
    shutil.rmtree(script.parent, ignore_errors=True)
    v = json.loads(out.stdout)
    h = v.get("hang") or {}
    return {"how": how, "culprit": f"{v['culprit_rank']} at {Path(str(v.get('culprit_where'))).name}",
            "named at s": v["culprit_named_s"], "after divergence s": h.get("after_divergence_s", ""),
            "wall s": round(v["wall_s"], 1)}


def scale(n: int = 1024) -> dict:
    from nbhelpers.diagnosis.culprit import RankView, find_culprit

    waiting = (DUMPS / "desync-skip-3" / "rank1.stack.txt").read_text()
    odd = (DUMPS / "stall" / "rank1.stack.txt").read_text()
    views = [RankView(r, stack=odd if r == n - 7 else waiting) for r in range(n)]
    t = time.perf_counter()
    v = find_culprit(views, "hang")
    took = time.perf_counter() - t
    return {"how": f"verdict over {n} ranks' stacks (1 odd)", "culprit": f"{v.culprit} (odd: {n - 7})",
            "named at s": round(took, 3), "after divergence s": "", "wall s": round(took, 3)}


def steps_per_s(attach_every: float | None, epochs: int = 6) -> float:
    """A healthy DDP job's training rate, with ``attach`` reading its stacks every ``attach_every`` s (or not)."""
    from nbhelpers.runtime.attach import attach

    script = _copy("train_ddp")
    t0 = time.time()
    job = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--rdzv-backend",
                            "c10d", "--rdzv-endpoint", "127.0.0.1:0", str(script), str(epochs), "100",
                            "--batch_size", "8"], cwd=script.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
    stop, reads = threading.Event(), []

    def reader():
        while not stop.wait(attach_every):
            try:
                reads.append(attach(job.pid).culprit_rank)
            except Exception:  # not up yet, or already gone
                pass

    th = threading.Thread(target=reader, daemon=True)
    if attach_every:
        th.start()
    text = job.communicate(timeout=600)[0]
    stop.set()
    wall = time.time() - t0
    shutil.rmtree(script.parent, ignore_errors=True)
    steps = sum(int(m) for m in re.findall(r"\[RANK0\] Epoch \d+ \| Batchsize: \d+ \| Steps: (\d+)", text))
    assert job.returncode == 0 and steps, text[-2000:]
    return steps / wall


def pause(kind: str, seconds: float) -> dict:
    """``examples/slow/train_eval_pause.py``: 2 pauses of rank 0 alone, supervised with --stop-on-hang."""
    script = _copy("train_eval_pause")
    out = subprocess.run([sys.executable, "-m", "nbhelpers", "run", "--nproc", "2", "--timeout", "300", "--json",
                          "--stop-on-hang", str(script), "--steps", "8", "--every", "4", "--eval-s", str(seconds),
                          "--pause", kind], capture_output=True, text=True, timeout=400, cwd=script.parent)
    shutil.rmtree(script.parent, ignore_errors=True)
    v = json.loads(out.stdout)
    return {"how": f"rank 0 alone 2 x {seconds:g} s ({kind}), --stop-on-hang",
            "culprit": f"{v['run_status']}" + (f", hang named: rank {v['hang']['culprit']}" if v.get("hang") else
                                               ", no hang"),
            "named at s": "", "after divergence s": "", "wall s": round(v["wall_s"], 1), "vs bare torchrun": ""}


def healthy_dev_scripts() -> dict:
    """Every healthy job of the development sets under --stop-on-hang: how many were called hung or stopped."""
    sets = sorted(REPO.glob("tests/userscripts_heldout*/expected.json")) + [REPO / "examples/faulty/expected.json"]
    jobs = [(f.parent, n) for f in sets for n, w in json.loads(f.read_text()).items()
            if not n.startswith("_") and w["status"] == "ok"]
    hung, slow, wall = [], [], 0.0
    from nbhelpers.scenarios.supervise import example

    for folder, name in jobs:
        script = example(name, Path(tempfile.mkdtemp(prefix="nbh-bench-")), folder)
        out = subprocess.run([sys.executable, "-m", "nbhelpers", "run", "--nproc", "2", "--timeout", "240", "--json",
                              "--stop-on-hang", str(script)], capture_output=True, text=True, timeout=300,
                             cwd=script.parent)
        shutil.rmtree(script.parent, ignore_errors=True)
        v = json.loads(out.stdout)
        wall += v["wall_s"]
        if v["run_status"] != "ok" or v.get("hang"):
            hung.append(name)
        if v.get("straggler"):
            slow.append(name)
    return {"how": f"healthy development scripts ({len(jobs)}), --stop-on-hang",
            "culprit": f"{len(hung)} called hung{': ' + ', '.join(hung) if hung else ''}; "
                       f"{len(slow)} named a straggler{': ' + ', '.join(slow) if slow else ''}",
            "named at s": "", "after divergence s": "", "wall s": round(wall, 1), "vs bare torchrun": ""}


def rows(reps: int) -> list[dict]:
    out = []
    print("  bare torchrun ...", file=sys.stderr, flush=True)
    base = bare_torchrun()
    out.append(base)
    print("  workbook, no hang watch ...", file=sys.stderr, flush=True)
    out.append(workbook(["--hang-after", "0"], "workbook run, hang watch off (verdict at the timeout)"))
    print("  workbook, hang watch ...", file=sys.stderr, flush=True)
    out.append(workbook(["--stop-on-hang"], "workbook run, hang watch (default 2 s), --stop-on-hang"))
    for r in out:
        r["vs bare torchrun"] = f"{r['named at s'] / base['named at s']:.2f}x" if r["named at s"] else ""
    out.append({**scale(), "vs bare torchrun": ""})
    n = max(1, min(reps, 3))
    print(f"  healthy DDP job, steps/s with and without attach ({n} reps) ...", file=sys.stderr, flush=True)
    plain = statistics.median(steps_per_s(None) for _ in range(n))
    out.append({"how": "healthy DDP job: steps/s without attach", "culprit": "", "named at s": "",
                "after divergence s": "", "wall s": round(plain, 1), "vs bare torchrun": "1.00x (baseline)"})
    for every in (2.0, 0.5):
        read = statistics.median(steps_per_s(every) for _ in range(n))
        out.append({"how": f"healthy DDP job: steps/s with attach every {every} s", "culprit": "", "named at s": "",
                    "after divergence s": "", "wall s": round(read, 1), "vs bare torchrun": f"{read / plain:.2f}x"})
    for seconds in (5, 30):
        for kind in ("eval", "save", "slowfs"):
            print(f"  rank 0 alone {seconds} s ({kind}) ...", file=sys.stderr, flush=True)
            out.append(pause(kind, seconds))
    print("  healthy development scripts ...", file=sys.stderr, flush=True)
    out.append(healthy_dev_scripts())
    return out
