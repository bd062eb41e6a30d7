"""Every healthy job of the development scripts, supervised with ``--stop-on-hang`` as the README recommends:
none may be stopped or carry a hang, and none may name a straggler (their ranks do the same work).

The scripts are those whose ``expected.json`` says ``ok``: hand-written DDP loops, Trainer-like and
Lightning-like loops with evaluation, EMA, checkpoints and callbacks, each run for real on 2 ranks.  ``make
test`` runs six of them, one for each kind of pause or process a healthy job has (rank 0 writing checkpoints
asynchronously, rank 0 evaluating, ranks started by ``mp.spawn``, a Trainer-like loop, DataLoader worker
processes, a SIGTERM handler of the script's own); ``NBH_TEST_ALL=1`` runs all 29 (``make bench``'s
``bench_hang`` does too, and says how many were called hung).
"""
import json
import subprocess
import sys
from pathlib import Path

import os

import pytest

REPO = Path(__file__).resolve().parents[1]
SETS = sorted(REPO.glob("tests/userscripts_heldout*/expected.json")) + [REPO / "examples" / "faulty" / "expected.json"]
HEALTHY = [(f.parent, name) for f in SETS for name, want in json.loads(f.read_text()).items()
           if not name.startswith("_") and want["status"] == "ok"]
KINDS = {"async_ckpt_trainer", "tagger_ema_eval", "lit_spawn_ema", "hf_trainer_loop", "ctrl_workers",
         "preempt_safe_trainer"}
RUN = HEALTHY if os.environ.get("NBH_TEST_ALL") else [(f, n) for f, n in HEALTHY if n in KINDS]


def test_the_development_sets_hold_healthy_jobs():
    assert len(HEALTHY) >= 25 and KINDS <= {n for _f, n in HEALTHY}, HEALTHY


@pytest.mark.integration
@pytest.mark.parametrize("folder,name", RUN, ids=[f"{f.name}/{n}" for f, n in RUN])
def test_a_healthy_job_is_never_called_hung_nor_stopped(folder, name, tmp_path, runs_dir):
    from nbhelpers.scenarios.supervise import example

    script = example(name, tmp_path, folder)
    out = subprocess.run([sys.executable, "-m", "nbhelpers", "run", "--nproc", "2", "--timeout", "240", "--json",
                          "--stop-on-hang", str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    v = json.loads(out.stdout)
    # every step ran, and nothing hung: a rank that then aborts in interpreter shutdown (gloo, torch 2.13, now and then
    # under plain torchrun too) fails the run, but was never called hung nor stopped
    assert v["finished"] and v["run_status"] != "hang" and v.get("hang") is None, (v["run_status"], v.get("hang"))
    assert v.get("straggler") is None, v["straggler"]
