"""`make run` (python -m nbhelpers run-all): wall time per notebook, and kernel start to the first culprit shown.

Runs every notebook as `make run` does (quick parameters, three at a time, measurements alone on the machine)
into a temporary report folder.  Baseline, same run: the sum of the notebooks' own times, i.e. what the run
would take one notebook after another.  "First culprit": in notebook 01, from the kernel's first cell
starting to the end of the cell that shows the faulty run's culprit (papermill's cell times).
"""
from __future__ import annotations

import json
import shutil
import statistics
import tempfile
import time
from datetime import datetime
from pathlib import Path

TITLE = "make run: wall time per notebook and to the first culprit (baseline: the notebooks one after another)"


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


def once() -> dict:
    from nbhelpers.report.build import run_all

    root = Path(tempfile.mkdtemp(prefix="nbh-bench-run-"))
    t = time.time()
    out = run_all(root)
    wall = time.time() - t
    summary = json.loads((out / "summary.json").read_text())
    per = {Path(b["notebook"]).stem: b["seconds"] for b in summary["notebooks"]}
    res = {"wall": wall, "ok": summary["ok"], "per": per, "culprit": first_culprit_s(out / "01_diagnose.ipynb")}
    if summary["ok"]:
        shutil.rmtree(root, ignore_errors=True)
    else:  # keep what failed to be read
        failed = [Path(b["notebook"]).stem for b in summary["notebooks"] if b.get("status") != "ok"]
        print(f"  a run failed ({', '.join(failed) or 'see summary.json'}): report kept in {out}", flush=True)
    return res


def rows(reps: int) -> list[dict]:
    runs = [once() for _ in range(max(1, min(reps, 3)))]
    med = lambda xs: round(statistics.median(xs), 1)
    out = [{"what": f"notebook {name}", "median s": med([r["per"][name] for r in runs]), "vs one after another": ""}
           for name in runs[0]["per"]]
    serial = med([sum(r["per"].values()) for r in runs])
    wall = med([r["wall"] for r in runs])
    out.append({"what": "one after another (sum of the notebooks, baseline)", "median s": serial,
                "vs one after another": "1.00x"})
    out.append({"what": f"make run wall ({len(runs)} runs, all ok: {all(r['ok'] for r in runs)})", "median s": wall,
                "vs one after another": f"{wall / serial:.2f}x"})
    culprit = [r["culprit"] for r in runs if r["culprit"] is not None]
    out.append({"what": "notebook 01: kernel's first cell to the first culprit shown",
                "median s": med(culprit) if culprit else "n/a", "vs one after another": ""})
    return out
