"""The per-rank shim, run for real: exit records, signals, stack dump on TERM, no orphans."""
import json
import os
import signal
import subprocess
import sys
import time

import psutil


def shim(tmp_path, code: str, rank: str = "0") -> subprocess.Popen:
    env = dict(os.environ, RANK=rank)
    return subprocess.Popen([sys.executable, "-m", "nbhelpers.runtime.rankshim", "--log-dir", str(tmp_path), "--",
                             "-c", code], env=env, stdin=subprocess.DEVNULL)


def record(tmp_path, rank="0"):
    return json.loads((tmp_path / f"rank{rank}.json").read_text())


def test_exit_code_and_merged_log(tmp_path):
    p = shim(tmp_path, "import sys; print('out'); print('err', file=sys.stderr); sys.exit(7)", rank="2")
    assert p.wait(30) == 7
    rec = record(tmp_path, "2")
    assert rec["returncode"] == 7 and rec["signal"] is None and rec["end"] >= rec["start"]
    assert (tmp_path / "rank2.log").read_text().split() == ["out", "err"]


def test_child_killed_by_signal_is_recorded_and_passed_on(tmp_path):
    p = shim(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert p.wait(30) == -signal.SIGKILL
    assert record(tmp_path)["signal"] == "SIGKILL"


def test_term_dumps_the_stack_then_stops_the_child(tmp_path):
    p = shim(tmp_path, "import time\ndef waiting_here():\n    time.sleep(600)\nwaiting_here()")
    deadline = time.time() + 20
    while not (tmp_path / "rank0.json").exists() and time.time() < deadline:
        time.sleep(0.1)
    child = psutil.Process(record(tmp_path)["pid"])
    time.sleep(0.5)
    p.send_signal(signal.SIGTERM)
    p.wait(30)
    rec = record(tmp_path)
    assert rec["stop_signal"] == "SIGTERM" and rec["signal"] == "SIGTERM"
    assert "waiting_here" in (tmp_path / "rank0.stack.txt").read_text()
    assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE


def test_child_dies_with_a_hard_killed_shim(tmp_path):
    p = shim(tmp_path, "import time; time.sleep(600)")
    deadline = time.time() + 20
    while not (tmp_path / "rank0.json").exists() and time.time() < deadline:
        time.sleep(0.1)
    child = psutil.Process(record(tmp_path)["pid"])
    p.kill()
    p.wait(10)
    gone, alive = psutil.wait_procs([child], timeout=10)
    assert not alive
