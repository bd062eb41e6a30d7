"""`python -m nbhelpers run` on scripts the workbook has never seen, run for real."""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PRELUDE = textwrap.dedent("""\
    import datetime, time, torch, torch.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=TIMEOUT))
    rank = dist.get_rank()
""")
SCRIPTS = {
    # a healthy script destroys its group: without it a rank may abort at exit (see the no-destroy test below)
    "healthy": "t = torch.ones(4); dist.all_reduce(t); assert t[0] == dist.get_world_size()\n"
               "dist.destroy_process_group()\n",
    "no-destroy": "t = torch.ones(4); dist.all_reduce(t); print(f'rank {rank} done', flush=True)\n",
    "stuck": "if rank == 1:\n    time.sleep(120)  # stuck in data loading\nt = torch.ones(4); dist.all_reduce(t)\n",
    "crash": "if rank == 1:\n    raise ValueError('bad batch on rank 1')\nt = torch.ones(4); dist.all_reduce(t)\n",
}


def run_cli(tmp_path, runs_dir, kind: str, nproc: int = 2) -> dict:
    script = tmp_path / f"{kind}.py"
    # scripts that should pass get a roomy init timeout: on a loaded machine rank 1 may start seconds after rank 0
    script.write_text(PRELUDE.replace("TIMEOUT", "4" if kind in ("stuck", "crash") else "60") + SCRIPTS[kind])
    out = subprocess.run([sys.executable, "-m", "nbhelpers", "run", "--json", "--nproc", str(nproc), "--timeout", "90",
                          str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    verdict = json.loads(out.stdout)
    assert out.returncode == (0 if verdict["status"] == "ok" else 1)
    assert Path(verdict["log_dir"]).is_dir() and str(runs_dir) in verdict["log_dir"]
    return verdict


def test_healthy_script_is_ok(tmp_path, runs_dir):
    v = run_cli(tmp_path, runs_dir, "healthy")
    assert v["status"] == "ok" and v["category"] is None and v["culprit_rank"] is None, v


def test_a_rank_aborting_at_exit_without_destroy_process_group_is_named_as_such(tmp_path, runs_dir):
    """Real runs, not a pasted log: with no destroy_process_group, about one rank exit in five (torch 2.13, gloo)
    dies of SIGABRT in interpreter shutdown after the script's last line; 4 ranks, up to 6 runs, to see it."""
    for attempt in range(6):
        v = run_cli(tmp_path, runs_dir, "no-destroy", nproc=4)
        if v["status"] == "failed":
            break
    else:
        pytest.skip("no rank aborted at exit in 6 runs of 4 ranks (each exit aborts about 1 time in 5)")
    aborted = [int(r) for r, rc in v["exit_codes"].items() if rc == -6]
    assert aborted and v["culprit_kind"] == "exit_abort" and v["culprit_rank"] in aborted, v
    assert v["category"] == "exit_without_destroy", v
    assert "destroy_process_group" in v["reason"] and "destroy_process_group" in " ".join(v["remedies"])
    logs = Path(v["log_dir"])
    for r in aborted:  # the abort came after the script's last line
        assert f"rank {r} done" in (logs / f"rank{r}.log").read_text(), r


def test_a_rank_stuck_outside_the_collective_is_the_culprit(tmp_path, runs_dir):
    v = run_cli(tmp_path, runs_dir, "stuck")
    assert v["status"] == "failed" and v["category"] == "collective_timeout"
    assert v["culprit_rank"] == 1 and v["torchrun_blamed"] == 0
    assert any("stuck.py" in e for e in v["evidence"])  # where rank 1 was, from its stack dump


def test_a_rank_raising_its_own_error_is_the_culprit(tmp_path, runs_dir):
    v = run_cli(tmp_path, runs_dir, "crash")
    assert v["status"] == "failed" and v["culprit_rank"] == 1
    assert v["exit_codes"]["1"] == 1
    assert "bad batch on rank 1" in " ".join(v["evidence"]) or "ValueError" in v["reason"] + " ".join(v["evidence"])
