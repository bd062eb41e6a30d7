"""The rank shim, run for real: it runs inside the rank, so the rank is the process its launcher started.

Exit records for Python's own exits, tracebacks as plain Python prints them, a stack dump on TERM, the rank
gone with its launcher, and nothing of the rank changed: parent, session, argv, ``__main__``, ``sys.path[0]``,
environment, signal dispositions, modules.
"""
import json
import os
import pickle
import signal
import subprocess
import sys
import time

import psutil
import pytest

from nbhelpers.runtime.launchspec import SHIM

pytestmark = pytest.mark.integration  # its tests start real processes

FACTS = r"""
import json, os, signal, sys
print(json.dumps({"ppid": os.getppid(), "sid": os.getsid(0), "pgid": os.getpgid(0), "argv": sys.argv,
                  "name": __name__, "file": globals().get("__file__"), "path0": sys.path[0], "cwd": os.getcwd(),
                  "env": sorted(os.environ), "write_through": sys.stdout.write_through,
                  "signals": {s: str(signal.getsignal(getattr(signal, s))) for s in ("SIGINT", "SIGHUP", "SIGUSR1", "SIGPIPE")},
                  "workbook": sorted(m for m in sys.modules if m.startswith("nbhelpers")),
                  "main": sys.modules["__main__"].__dict__.get("__file__")}))
"""


def shim(tmp_path, target: list[str], rank: str = "0", **kw) -> subprocess.Popen:
    env = dict(os.environ, RANK=rank)
    return subprocess.Popen([sys.executable, "-u", SHIM, "--log-dir", str(tmp_path / "logs"), "--", *target],
                            env=env, stdin=subprocess.DEVNULL, **kw)


def record(tmp_path, rank="0"):
    return json.loads((tmp_path / "logs" / f"rank{rank}.json").read_text())


def wait_for_record(tmp_path, rank="0"):
    deadline = time.time() + 20
    while not (tmp_path / "logs" / f"rank{rank}.json").exists() and time.time() < deadline:
        time.sleep(0.05)
    return record(tmp_path, rank)


def test_exit_code_and_merged_log(tmp_path):
    p = shim(tmp_path, ["-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(7)"], rank="2")
    assert p.wait(30) == 7
    rec = record(tmp_path, "2")
    assert rec["python_exit"] == 7 and rec["python_end"] >= rec["start"] and rec["pid"] == p.pid
    assert (tmp_path / "logs" / "rank2.log").read_text().split() == ["out", "err"]


def test_an_uncaught_exception_prints_as_python_prints_it_and_exits_1(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("def step():\n    raise ValueError('bad batch')\n\nstep()\n")
    plain = subprocess.run([sys.executable, "-u", str(script)], capture_output=True, text=True)
    p = shim(tmp_path, [str(script)])
    assert p.wait(30) == plain.returncode == 1
    assert record(tmp_path)["python_exit"] == 1
    assert (tmp_path / "logs" / "rank0.log").read_text() == plain.stderr  # no frame of the shim's, none of runpy's


def test_a_rank_killed_by_a_signal_leaves_its_record_open_and_the_kernel_keeps_the_status(tmp_path):
    """A SIGKILLed rank cannot write its end: the record stays open, and until its parent reaps it the kernel
    keeps the status procs.exit_status reads (the launcher's way to complete the record)."""
    from nbhelpers.runtime.procs import RUNNING, exit_status

    p = shim(tmp_path, ["-c", "import os, signal, time; time.sleep(0.3); os.kill(os.getpid(), signal.SIGKILL)"])
    assert exit_status(p.pid) is RUNNING
    os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)  # ended, not reaped
    assert exit_status(p.pid) == -signal.SIGKILL
    assert p.wait(5) == -signal.SIGKILL
    assert "python_end" not in record(tmp_path)


def test_term_dumps_every_threads_stack_then_ends_the_rank(tmp_path):
    from nbhelpers.diagnosis.tracebacks import faulthandler_as_spy, stack_frames

    p = shim(tmp_path, ["-c", "import time\ndef waiting_here():\n    time.sleep(600)\nwaiting_here()"])
    wait_for_record(tmp_path)
    time.sleep(1.0)
    p.send_signal(signal.SIGTERM)
    assert p.wait(30) == -signal.SIGTERM
    dump = (tmp_path / "logs" / "rank0.term.txt").read_text()
    where = stack_frames(faulthandler_as_spy(dump))
    assert where.frames[-1].func == "waiting_here" and where.frames[-1].file == "<string>", dump


def test_a_handler_of_the_programs_own_replaces_the_dump(tmp_path):
    code = ("import signal, sys, time\nsignal.signal(signal.SIGTERM, lambda *a: sys.exit(3))\n"
            "print('ready', flush=True)\ntime.sleep(600)")
    p = shim(tmp_path, ["-c", code])
    log = tmp_path / "logs" / "rank0.log"
    deadline = time.time() + 20
    while (not log.exists() or "ready" not in log.read_text()) and time.time() < deadline:
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    assert p.wait(30) == 3 and record(tmp_path)["python_exit"] == 3
    assert (tmp_path / "logs" / "rank0.term.txt").read_text() == ""


def test_the_rank_dies_with_a_hard_killed_launcher(tmp_path):
    middle = subprocess.Popen([sys.executable, "-c", "import subprocess, sys\n"
                               f"p = subprocess.Popen([sys.executable, '-u', {SHIM!r}, '--log-dir', "
                               f"{str(tmp_path / 'logs')!r}, '--', '-c', 'import time; time.sleep(600)'])\np.wait()"])
    rank = psutil.Process(wait_for_record(tmp_path)["pid"])
    middle.kill()
    middle.wait(10)
    gone, alive = psutil.wait_procs([rank], timeout=10)
    assert not alive


def test_the_rank_is_the_process_its_launcher_started_and_sees_what_plain_python_sees(tmp_path):
    """Run directly and under the shim, a program reports the same facts of itself, but for its parent (the
    shim's launcher here is this test, as the plain one's)."""
    script = tmp_path / "facts.py"
    script.write_text(FACTS)
    plain = json.loads(subprocess.run([sys.executable, "-u", str(script), "--lr", "0.1"], capture_output=True,
                                      text=True, env=dict(os.environ, RANK="0"), stdin=subprocess.DEVNULL).stdout)
    p = shim(tmp_path, [str(script), "--lr", "0.1"])
    assert p.wait(30) == 0
    shimmed = json.loads((tmp_path / "logs" / "rank0.log").read_text())
    assert shimmed["ppid"] == os.getpid() and shimmed["workbook"] == []
    for key in ("ppid", "sid", "pgid"):
        plain.pop(key), shimmed.pop(key)
    assert shimmed == plain


COLLECTIVES = r"""
import sys, time, torch, torch.distributed as dist
dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=0, world_size=1)
for _ in range(3):
    dist.all_reduce(torch.ones(4))
dist.barrier()
print("ready", flush=True)
time.sleep(float(sys.argv[2]))
"""


def entries(tmp_path, rank="0"):
    return pickle.loads((tmp_path / "logs" / "fr" / f"rank{rank}.pkl").read_bytes())["entries"]


def test_the_collective_record_is_written_on_request_while_the_program_waits_and_at_its_end(tmp_path):
    p = shim(tmp_path, ["-c", COLLECTIVES, str(tmp_path / "store"), "60"])
    deadline = time.time() + 60
    log = tmp_path / "logs" / "rank0.log"
    while not (log.exists() and "ready" in log.read_text()) and time.time() < deadline:
        time.sleep(0.1)
    assert not (tmp_path / "logs" / "fr" / "rank0.pkl").exists()  # nothing is written until asked
    (tmp_path / "logs" / "fr" / "request").touch()
    while not (tmp_path / "logs" / "fr" / "rank0.pkl").exists() and time.time() < deadline:
        time.sleep(0.05)
    got = entries(tmp_path)
    assert [(e["collective_seq_id"], e["profiling_name"]) for e in got] == [
        (1, "gloo:all_reduce"), (2, "gloo:all_reduce"), (3, "gloo:all_reduce"), (4, "gloo:barrier")], got
    assert got[0]["input_sizes"] == [[4]] and not got[0].get("frames"), got[0]
    p.terminate()
    p.wait(timeout=30)
    (tmp_path / "logs" / "fr" / "rank0.pkl").unlink()
    p = shim(tmp_path, ["-c", COLLECTIVES, str(tmp_path / "store2"), "0"])  # ends by itself: written at the end
    assert p.wait(timeout=60) == 0 and len(entries(tmp_path)) == 4


def test_a_program_without_collectives_leaves_no_record(tmp_path):
    p = shim(tmp_path, ["-c", "import torch.distributed; print('no collective')"])
    assert p.wait(timeout=60) == 0 and record(tmp_path)["python_exit"] == 0
    assert not (tmp_path / "logs" / "fr" / "rank0.pkl").exists()


SIZES = r"""
import sys, torch, torch.distributed as dist
rank = int(sys.argv[2])
dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=rank, world_size=2)
for _ in range(3):
    dist.all_reduce(torch.ones(4))
dist.all_reduce(torch.ones(4 if rank == 0 else 6))  # gloo aborts the rank that receives more than it expects
"""


@pytest.mark.parametrize("env_faulthandler", ["", "1"])  # the launcher's workers start with PYTHONFAULTHANDLER=1
def test_a_rank_that_gloo_aborts_still_leaves_its_record_and_dies_as_it_would(tmp_path, monkeypatch,
                                                                             env_faulthandler):
    monkeypatch.setenv("PYTHONFAULTHANDLER", env_faulthandler)
    store = str(tmp_path / "store")
    ranks = [shim(tmp_path, ["-c", SIZES, store, str(r)], rank=str(r)) for r in (0, 1)]
    codes = [p.wait(timeout=120) for p in ranks]
    aborted = codes.index(-signal.SIGABRT)  # the same death as without the shim
    log = (tmp_path / "logs" / f"rank{aborted}.log").read_text()
    assert "op.preamble.length <= op.nbytes" in log and log.count("Fatal Python error: Aborted") == 1, log
    assert "_abort" not in log  # faulthandler's dump is the program's, read before the record is written
    sizes = {r: [e["input_sizes"] for e in entries(tmp_path, str(r))] for r in (0, 1)}
    assert sizes == {0: [[[4]]] * 4, 1: [[[4]]] * 3 + [[[6]]]}, sizes
