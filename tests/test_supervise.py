"""`python -m nbhelpers run` on scripts the workbook has never seen, run for real."""
import json
import subprocess
import sys
import textwrap
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


def test_healthy_script_is_ok(tmp_path, runs_dir):
    v = run_cli(tmp_path, runs_dir, "healthy")
    assert v["status"] == "ok" and v["category"] is None and v["culprit_rank"] is None, v
    assert v["hints"] == []  # it destroys its group


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
    # the script never destroys its group: said even though the crash is the story here
    assert any("never destroy_process_group" in h for h in v["hints"]), v["hints"]
