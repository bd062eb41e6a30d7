"""Verdicts on realistic training scripts with one fault each: expected vs found, and torchrun's Root Cause.

Each script of examples/faulty (the development set), tests/userscripts_heldout (written separately,
measured, never tuned on until its one miss was read on 2026-11-25), tests/userscripts_heldout2 to 11 (each written separately, measured once on arrival,
at 3/8, 5/8, 4/8, 5/8, 5/8, 4/8, 7/8, 6/8, 7/8 and 6/8, development sets since) runs once through `python -m nbhelpers run --nproc 2 --json`, from a fresh copy of
its folder.  Baseline: torchrun's own "Root Cause" rank, from the same run.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

TITLE = "Users' scripts: expected vs the verdict, and torchrun's Root Cause (same run)"
REPO = Path(__file__).resolve().parent.parent


def _sets() -> dict[str, Path]:
    """The development sets, then every set under tests/ (found by glob: a new set is scored at once), in the order
    they arrived (userscripts_heldout, ..._heldout2, ..., ..._heldout18, then the framework sets)."""
    def arrival(p: Path) -> tuple:
        stem = p.name.rstrip("0123456789")
        return ("frameworks" in p.name, int(p.name[len(stem):] or 1))

    found = sorted(REPO.glob("tests/userscripts_*"), key=arrival)
    return {"dev": REPO / "examples" / "faulty", "frameworks (dev)": REPO / "examples" / "frameworks",
            **{p.name.removeprefix("userscripts_"): p for p in found}}


SETS = _sets()


def run(folder: Path, name: str) -> dict:
    from nbhelpers.scenarios.supervise import example

    work = Path(tempfile.mkdtemp(prefix="nbh-bench-"))
    script = example(name, work, folder)
    out = subprocess.run([sys.executable, "-m", "nbhelpers", "run", "--nproc", "2", "--timeout", "300", "--json",
                          str(script)], capture_output=True, text=True, timeout=400, cwd=work)
    shutil.rmtree(work, ignore_errors=True)
    return json.loads(out.stdout)


def culprit(want: dict, got: dict):
    """The expected culprit rank; for ``culprit_log``, the rank whose log holds that text in this run."""
    if "culprit_log" not in want:
        return want["culprit"]
    logs = Path(got["log_dir"]).glob("rank*.log")
    return next((int(p.stem[4:]) for p in logs if want["culprit_log"] in p.read_text(errors="replace")), None)


def right(want: dict, got: dict) -> bool:
    cats = {want["category"], *want.get("also", [])}
    if want["status"] == "ok" and got["status"] == "failed" and got["category"] in cats:
        return True  # e.g. a script without destroy_process_group: it aborts at exit now and then, and is named so
    return got["status"] == want["status"] and (got["category"] in cats or got["status"] == "ok" == want["status"]) \
        and got["culprit_rank"] == culprit(want, got)


def rows(reps: int) -> list[dict]:
    out = []
    for label, folder in SETS.items():
        expected = folder / "expected.json"
        if not expected.exists():
            continue
        for name, want in json.loads(expected.read_text()).items():
            if name.startswith("_"):
                continue
            if want.get("launch", "torchrun") != "torchrun":  # Lightning starting its own ranks: `run` cannot yet
                out.append({"set": label, "script": name, "expected": f"{want['status']} / {want['category']}",
                            "verdict": "not run: launched by `python` (the framework starts its ranks)",
                            "right": "n/a", "torchrun Root Cause": "", "line": "", "s": 0.0})
                continue
            print(f"  {label}: {name} ...", file=sys.stderr, flush=True)
            got = run(folder, name)
            out.append({"set": label, "script": name,
                        "expected": f"{want['status']} / {want['category']} / {culprit(want, got)}",
                        "verdict": f"{got['status']} / {got['category']} / {got['culprit_rank']} ({got['culprit_kind']})",
                        "right": "yes" if right(want, got) else "NO",
                        "torchrun Root Cause": got["torchrun_blamed"], "line": Path((got.get("culprit_where") or "").split(" in ")[0]).name,
                        "s": round(got["wall_s"], 1)})
    for label in SETS:
        mine = [r for r in out if r["set"] == label]
        if mine:
            scored = [r for r in mine if r["right"] != "n/a"]
            out.append({"set": label, "script": "TOTAL", "expected": "", "verdict": "",
                        "right": f"{sum(r['right'] == 'yes' for r in scored)}/{len(scored)}", "torchrun Root Cause": "",
                        "line": "", "s": round(sum(r["s"] for r in mine), 1)})
    return out
