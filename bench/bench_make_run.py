"""`make run` (python -m nbhelpers run-all) in units of a bare 2-rank torchrun world, quiet and loaded.

The unit, measured in the same run just before each `make run` (median of 3): a bare `torchrun
--nproc-per-node 2` world whose ranks import torch, init_process_group (gloo), barrier and destroy
(`bench/_bare_world.py`).  A machine 3x slower makes both 3x longer, so the ratio is what the workbook
costs, whatever the machine.  "Loaded" runs both the unit and `make run` with 2 busy loops beside them
(`bench/busy.py`: on 2 cores, half the machine).  Target: at most 25 units.

Also per notebook (seconds), and in notebook 01 the time from the kernel's first cell to the first culprit
shown (papermill's cell times).  The verdicts recorded must be the same quiet and loaded.
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import busy  # noqa: E402

TITLE = "make run in bare 2-rank worlds (unit: a bare torchrun world, same run), quiet and with 2 busy loops"


def bare_world() -> float:
    """Seconds for one bare 2-rank torchrun world (start, import torch, init, barrier, destroy, exit)."""
    from nbhelpers.runtime.ports import free_port

    t = time.time()
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
                    "--rdzv-endpoint", f"127.0.0.1:{free_port()}", str(HERE / "_bare_world.py")],
                   check=True, capture_output=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    return time.time() - t


def _t(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def first_culprit_s(executed: Path) -> float | None:
    import nbformat

    nb = nbformat.read(executed, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code" and c.metadata.get("papermill", {}).get("start_time")]
    shown = next((c for c in code if "faulty = nb.probe" in c.source), None)
    if not code or shown is None or not shown.metadata["papermill"].get("end_time"):
        return None
    return _t(shown.metadata["papermill"]["end_time"]) - _t(code[0].metadata["papermill"]["start_time"])


def verdicts(summary: dict) -> list[tuple]:
    """What the run recorded, without times: (notebook, label, status, category, culprit) per verdict."""
    out = []
    for b in summary["notebooks"]:
        for v in b.get("records", []):
            if v.get("kind") == "run":
                out.append((Path(b["notebook"]).stem, v.get("label"), v.get("status"), v.get("category"),
                            v.get("culprit_rank")))
    return sorted(out, key=str)


def once(n_busy: int) -> dict:
    from nbhelpers.report.build import run_all

    loops = busy.start(n_busy)
    try:
        unit = statistics.median(bare_world() for _ in range(3))
        root = Path(tempfile.mkdtemp(prefix="nbh-bench-run-"))
        t = time.time()
        out = run_all(root)
        wall = time.time() - t
    finally:
        busy.stop(loops)
    summary = json.loads((out / "summary.json").read_text())
    per = {Path(b["notebook"]).stem: b["seconds"] for b in summary["notebooks"]}
    res = {"unit": unit, "wall": wall, "ok": summary["ok"], "per": per, "verdicts": verdicts(summary),
           "culprit": first_culprit_s(out / "01_diagnose.ipynb")}
    if summary["ok"]:
        shutil.rmtree(root, ignore_errors=True)
    else:  # keep what failed to be read
        failed = [Path(b["notebook"]).stem for b in summary["notebooks"] if b.get("status") != "ok"]
        print(f"  a run failed ({', '.join(failed) or 'see summary.json'}): report kept in {out}", flush=True)
    return res


def rows(reps: int) -> list[dict]:
    quiet, loaded = once(0), once(2)
    out = []
    for name in quiet["per"]:
        out.append({"what": f"notebook {name}, s", "quiet": round(quiet["per"][name], 1),
                    "2 busy loops": round(loaded["per"].get(name, float("nan")), 1), "loaded/quiet": ""})
    for label, key in (("bare 2-rank world (the unit), s", "unit"), ("make run wall, s", "wall")):
        q, ld = quiet[key], loaded[key]
        out.append({"what": label, "quiet": round(q, 1), "2 busy loops": round(ld, 1),
                    "loaded/quiet": f"{ld / q:.2f}x"})
    q, ld = quiet["wall"] / quiet["unit"], loaded["wall"] / loaded["unit"]
    out.append({"what": "make run in bare worlds (target <= 25)", "quiet": f"{q:.1f}", "2 busy loops": f"{ld:.1f}",
                "loaded/quiet": f"{ld / q:.2f}x"})
    out.append({"what": "notebook 01: first cell to the first culprit shown, s",
                "quiet": round(quiet["culprit"] or float("nan"), 1),
                "2 busy loops": round(loaded["culprit"] or float("nan"), 1), "loaded/quiet": ""})
    same = quiet["verdicts"] == loaded["verdicts"]
    out.append({"what": f"all notebooks ok / recorded verdicts the same ({len(quiet['verdicts'])})",
                "quiet": str(quiet["ok"]), "2 busy loops": str(loaded["ok"]), "loaded/quiet": f"same: {same}"})
    if not same:
        for a, b in zip(quiet["verdicts"], loaded["verdicts"]):
            if a != b:
                print(f"  verdict differs: quiet {a} vs loaded {b}", file=sys.stderr)
    return out
