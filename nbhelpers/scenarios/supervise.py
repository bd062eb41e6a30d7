"""Run a user's own script under the workbook's launcher and say what went wrong, if anything.

    python -m nbhelpers run --nproc 2 --timeout 120 train.py --lr 0.1
    python -m nbhelpers run --json --nproc 2 train.py          # one JSON object

The script runs through torchrun like any other (RANK, WORLD_SIZE, MASTER_ADDR... in its env),
each rank under the rank shim (own log, exit record, stack dump when stopped); afterwards the
verdict names the culprit rank and the classifier the category, with the evidence lines.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Sequence

from nbhelpers.diagnosis.classify import top2_text
from nbhelpers.runtime.launcher import RunResult, launch, runs_dir
from nbhelpers.runtime.launchspec import REPO_ROOT, child_env

EXAMPLES = REPO_ROOT / "examples" / "faulty"
SLOW_EXAMPLES = REPO_ROOT / "examples" / "slow"  # jobs that run, but slower than they should (notebook 03)


def supervise(script: str, args: Sequence[str] = (), *, nproc: int = 2, timeout: float = 600.0,
              env: dict | None = None, live: bool | None = None, **kw) -> RunResult:
    """Run ``script`` on ``nproc`` ranks; the result carries verdict, findings and logs."""
    path = Path(script)
    if not path.is_file():
        from nbhelpers.errors import WorkbookError

        raise WorkbookError(f"no such script: {script}", "give the path of a Python file, e.g. train.py")
    return launch(str(path), list(args), nproc=nproc, timeout=timeout, env=env, live=live, name=path.stem, **kw)


def example(name: str, dest: str | os.PathLike | None = None, folder: str | os.PathLike | None = None) -> Path:
    """A copy of one of the realistic training scripts (``examples/faulty/<name>.py``, see its FAULTS.md, or
    ``examples/slow/<name>.py``, jobs that run but slowly), ready to run: ``folder`` (default: whichever of the two
    has it) is copied to ``dest`` (default: a new folder under the runs dir, so its checkpoints never land in the
    checkout), and ``setup/<name>.sh`` is run there when it exists, with this Python first on PATH."""
    folders = [Path(folder)] if folder else [EXAMPLES, SLOW_EXAMPLES]
    folder = next((f for f in folders if (f / f"{name}.py").is_file()), folders[0])
    if not (folder / f"{name}.py").is_file():
        from nbhelpers.errors import WorkbookError

        known = ", ".join(sorted(p.stem for f in folders for p in f.glob("*.py")))
        raise WorkbookError(f"no example script {name!r}", f"pick one of: {known}")
    dest = Path(dest) if dest else runs_dir() / f"examples-{uuid.uuid4().hex[:6]}"
    if not (dest / f"{name}.py").exists():
        shutil.copytree(folder, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns("checkpoints", "__pycache__"))
    setup = dest / "setup" / f"{name}.sh"
    if setup.exists():
        path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
        subprocess.run(["bash", str(setup)], check=True, cwd=dest, env=child_env({"PYTHON": sys.executable, "PATH": path}),
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    return dest / f"{name}.py"


def script_hints(script: str) -> list[str]:
    """What the script's text alone says is risky (read, never run): a pass today may fail tomorrow."""
    text = Path(script).read_text(errors="replace")
    hints = []
    if "init_process_group" in text and "destroy_process_group" not in text:
        hints.append(f"{Path(script).name} calls init_process_group but never destroy_process_group: a rank can "
                     "abort (SIGABRT, exit -6) in Python's shutdown after its last step, at random, and fail the "
                     "job (exit_without_destroy); end every rank with dist.destroy_process_group() in a `finally:`")
    return hints


def verdict_dict(res: RunResult, script: str | None = None) -> dict:
    """The run's :meth:`~nbhelpers.runtime.launcher.RunResult.to_dict` plus what the script's text says is risky."""
    return {**res.to_dict(), "hints": script_hints(script) if script else []}


def verdict_text(res: RunResult, script: str | None = None) -> str:
    d = verdict_dict(res, script)
    hints = [f"hint: {h}" for h in d["hints"]]
    if res.ok:
        took = f" in {res.wall_s:.1f} s" if res.wall_s > 0 else ""
        slow = [f"slow, not stuck: {d['straggler']['text']}"] if d.get("straggler") else []
        return "\n".join([f"OK: {res.name} finished on {res.nproc} ranks{took}. Logs: {res.log_dir}"]
                         + slow + hints)
    top2 = top2_text(d["candidates"])
    after = f" after {res.wall_s:.1f} s" if res.wall_s > 0 else ""  # (0: read back from logs, no clock)
    lines = [f"FAILED ({res.status}): {res.name} on {res.nproc} ranks{after}",
             f"category: {d['category'] or 'unrecognised'}" + (f"  (the logs' top 2: {top2})" if top2 else ""),
             f"culprit:  {'unknown' if res.culprit is None else f'rank {res.culprit}'} ({res.verdict.kind}): "
             f"{res.verdict.reason}"]
    if d.get("hang"):
        h = d["hang"]
        lines.append(f"hang:     named live {h['after_divergence_s']:.1f} s after the ranks diverged: "
                     + ("no single rank" if h["culprit"] is None else f"rank {h['culprit']} at {h['where']}"))
    if d.get("straggler"):
        lines.append(f"slow:     {d['straggler']['text']}")
    rec = d.get("collectives")
    if rec and not rec["ok"]:
        lines.append(f"record:   {rec['verdict'].splitlines()[0]}")
        if rec["no_dump"]:
            lines.append("          no record from " + "; ".join(
                f"rank {r} ({why}{': it died before it could write one' if why == 'no dump file' else ''})"
                for r, why in rec["no_dump"].items()))
    elif rec is None:
        lines.append("record:   none: no rank wrote its collective record (no collective ran, or the job was not "
                     "started by `python -m nbhelpers run`, whose rank shim writes each rank's Flight Recorder entries)")
    if note := res.verdict.torchrun_note():
        lines.append(f"          ({note})")
    lines.append("evidence:")
    lines += [f"  {e}" for e in (d["evidence_lines"] + d["evidence"])[:6]]
    if d["remedies"]:
        lines.append("what to do:")
        lines += [f"  {i}. {r}" for i, r in enumerate(d["remedies"], 1)]
    lines += hints
    lines.append(f"logs: {res.log_dir}")
    return "\n".join(lines)


def printed_rate(res, unit: str = "steps/s", rank: int = 0) -> float | None:
    """The last rate a rank's own log printed, such as ``12.5 steps/s`` (a training script's progress line): the
    speed the job saw, for comparing two runs of it."""
    import re

    found = re.findall(rf"(\d+(?:\.\d+)?)\s*{re.escape(unit)}", res.log(rank, tail=None))
    return float(found[-1]) if found else None

