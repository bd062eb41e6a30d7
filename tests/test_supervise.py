"""`python -m nbhelpers run` on scripts the workbook has never seen, run for real."""
import pytest
import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

PRELUDE = textwrap.dedent("""\
    import datetime, time, torch, torch.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=TIMEOUT))
    rank = dist.get_rank()
""")
SCRIPTS = {
    # a healthy script destroys its group: without it a rank may abort at exit (tests/test_exit_abort.py)
    "healthy": "t = torch.ones(4); dist.all_reduce(t); assert t[0] == dist.get_world_size()\n"
               "dist.destroy_process_group()\n",
    "stuck": "if rank == 1:\n    time.sleep(120)  # stuck in data loading\nt = torch.ones(4); dist.all_reduce(t)\n",
    "crash": "if rank == 1:\n    raise ValueError('bad batch on rank 1')\nt = torch.ones(4); dist.all_reduce(t)\n",
}


def run_cli(tmp_path, runs_dir, kind: str) -> dict:
    script = tmp_path / f"{kind}.py"
    # scripts that should pass get a roomy init timeout: on a loaded machine rank 1 may start seconds after rank 0
    script.write_text(PRELUDE.replace("TIMEOUT", "4" if kind in ("stuck", "crash") else "60") + SCRIPTS[kind])
    out = subprocess.run([sys.executable, "-m", "nbhelpers", "run", "--json", "--nproc", "2", "--timeout", "90",
                          str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    verdict = json.loads(out.stdout)
    assert out.returncode == (0 if verdict["status"] == "ok" else 1)
    assert Path(verdict["log_dir"]).is_dir() and str(runs_dir) in verdict["log_dir"]
    return verdict


@pytest.mark.integration
def test_healthy_script_is_ok(tmp_path, runs_dir):
    v = run_cli(tmp_path, runs_dir, "healthy")
    assert v["status"] == "ok" and v["category"] is None and v["culprit_rank"] is None, v
    assert v["hints"] == []  # it destroys its group
    assert v["hang"] is None, v  # the stack sampling saw no hang in a healthy run


@pytest.mark.integration
def test_a_rank_stuck_outside_the_collective_is_the_culprit(tmp_path, runs_dir):
    v = run_cli(tmp_path, runs_dir, "stuck")
    assert v["status"] == "failed" and v["category"] == "collective_timeout"
    assert v["culprit_rank"] == 1 and v["torchrun_blamed"] == 0
    assert any("stuck.py" in e for e in v["evidence"])  # where rank 1 was, from its stack dump


@pytest.mark.integration
def test_a_rank_raising_its_own_error_is_the_culprit(tmp_path, runs_dir):
    v = run_cli(tmp_path, runs_dir, "crash")
    assert v["status"] == "failed" and v["culprit_rank"] == 1 and v["category"] == "rank_error", v
    assert v["exit_codes"]["1"] == 1
    assert "ValueError: bad batch on rank 1" in v["reason"] and "crash.py:" in v["culprit_where"], v
    # the script never destroys its group: said even though the crash is the story here
    assert any("never destroy_process_group" in h for h in v["hints"]), v["hints"]


# ---- users' own scripts (examples/faulty), supervised for real through the CLI
def run_example(script, *extra, timeout=150):
    out = subprocess.run([sys.executable, "-m", "nbhelpers", "run", "--nproc", "2", "--timeout", "120", "--json",
                          *extra, str(script)], capture_output=True, text=True, timeout=timeout)
    return out, json.loads(out.stdout)


@pytest.mark.integration
def test_a_collective_inside_a_rank_branch_is_named_with_its_line(tmp_path, runs_dir):
    from nbhelpers.scenarios.supervise import example

    # stopped once the hang shows (rank 0 in the broadcast, rank 1 in DDP's all_reduce), not at the 10 s timeout:
    # the verdict from the stacks taken at the stop is the one the timeout would give (bench_user_scripts has that)
    out, v = run_example(example("train_finetune", tmp_path), "--stop-on-hang")
    assert out.returncode == 1 and v["status"] == "failed" and v["run_status"] == "hang", v
    assert v["hang"]["culprit"] == 0, v["hang"]
    assert (v["culprit_rank"], v["category"], v["culprit_kind"]) == (0, "collective_mismatch", "rank_only_collective"), v
    assert "train_finetune.py" in v["culprit_where"] and " in _load_pretrained" in v["culprit_where"], v
    assert "if self.global_rank == 0" in v["reason"], v
    assert v["remedies"][0].startswith("Call it on every rank"), v


@pytest.mark.integration
def test_sigterm_to_the_supervisor_prints_the_verdict_so_far_and_ends_the_job(tmp_path, runs_dir):
    script = tmp_path / "train.py"
    script.write_text(STRAGGLER)
    p = subprocess.Popen([sys.executable, "-m", "nbhelpers", "run", "--nproc", "2", "--timeout", "120", "--json",
                          str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list(runs_dir.glob("*/rank1.log")):
        time.sleep(0.2)
    time.sleep(6)  # both ranks are in the script: rank 0 waits in all_reduce, rank 1 sleeps
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    assert out.strip(), (p.returncode, err[-3000:])  # once -11: a SIGTERM during torch's import (signals_deferred)
    v = json.loads(out)
    assert p.returncode == 128 + signal.SIGTERM, (p.returncode, err[-2000:])
    assert v["status"] == "failed" and v["run_status"] == "interrupted", v
    assert v["culprit_rank"] == 1 and "slow_io" in v["reason"], v   # where the straggler was, from its stack dump


STRAGGLER = """
import os, time
from datetime import timedelta
import torch, torch.distributed as dist

def slow_io():
    time.sleep(300)

dist.init_process_group("gloo", timeout=timedelta(seconds=100))
if dist.get_rank() == 1:
    slow_io()
dist.all_reduce(torch.ones(4))
dist.destroy_process_group()
"""
