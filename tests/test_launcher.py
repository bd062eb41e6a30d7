"""The launcher with real torchrun worlds: verdicts, timeouts, interrupts, and nothing left behind."""
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import psutil
import pytest
from conftest import workbook_processes

from nbhelpers import PortInUseError, Run
from nbhelpers.scenarios.probe import probe
from nbhelpers.workers.probe import STAGES

pytestmark = pytest.mark.integration  # its tests start real processes


def test_healthy_probe_passes_every_stage(runs_dir):
    res = probe(2, timeout=10, size_mb=4, live=False)
    assert res.ok and res.culprit is None, res.verdict
    st = res.stages
    assert set(st["rank"]) == {0, 1}
    assert set(st["stage"]) == set(STAGES) | {"done"}
    assert (st["status"] == "ok").all()
    assert all(res.records[r]["returncode"] == 0 for r in (0, 1))
    assert "[" in res.log(0) and "probe passed" in res.log(1)
    assert (res.log_dir / "rank0.log").exists() and (res.log_dir / "torchrun.log").exists()
    assert "RunResult probe ok" in repr(res)
    assert res.findings == [] and res.category is None


def test_a_crashing_rank_is_the_culprit_with_its_exit_code(runs_dir):
    res = probe(2, timeout=5, size_mb=1, fault="exit", live=False)
    assert res.status == "failed"
    assert res.culprit == 1 and res.verdict.kind == "crashed"
    assert res.records[1]["returncode"] == 3
    assert "exited with code 3" in res.verdict.reason
    assert "connection" in res.verdict.victims[0]
    assert res.category == "worker_killed"


def test_a_stalled_rank_is_named_although_torchrun_blames_the_other(runs_dir):
    res = probe(2, timeout=3, size_mb=1, fault="stall", stall=60, live=False)
    assert res.culprit == 1 and res.verdict.kind == "late", res.verdict
    assert res.verdict.torchrun_blamed == 0
    assert "Timed out waiting" in res.verdict.evidence[0]
    assert "timed out waiting for rank 1" in res.verdict.victims[0]
    assert "inject" in res.stack(1)  # the py-spy dump shows where rank 1 was: in the injected sleep
    assert res.category == "collective_timeout"
    top2 = res.to_dict()["candidates"]  # the log classifier's two likeliest, as the CLI and the report show them
    assert top2[0]["category"] == "collective_timeout" and top2[0]["by"] == "rules" and 0 < top2[0]["confidence"] <= 0.97
    assert len(top2) <= 2 and all(c["confidence"] <= top2[0]["confidence"] for c in top2)


@pytest.mark.parametrize("fault", ["never-join", "wrong-port"])
def test_a_rank_that_cannot_join_is_the_culprit(runs_dir, fault):
    res = probe(2, timeout=3, size_mb=1, fault=fault, stall=60, live=False)
    assert res.culprit == 1, res.verdict
    assert res.stages.query("rank == 0 and stage == 'rendezvous'")["status"].item() == "fail"
    assert res.category == "rendezvous_timeout"


def test_fault_on_rank_zero_names_rank_zero(runs_dir):
    res = probe(2, timeout=3, size_mb=1, fault="stall", fault_rank=0, stall=60, live=False)
    assert res.culprit == 0, res.verdict


def test_whole_run_timeout_stops_every_rank_and_keeps_their_stacks(runs_dir):
    # a collective timeout far beyond the run timeout: only the launcher can end this run.  The run
    # timeout is set once rank 0 waits in the collective, so a slow start on a loaded machine cannot
    # end the run before the stall.
    run = Run("probe", ["--timeout", "120", "--size-mb", "1", "--fault", "stall", "--stall", "300"], nproc=2,
              timeout=120).start()
    waiting = lambda: any(e["stage"] == "large_allreduce" for e in run.tails[0].events)  # noqa: E731
    while run.poll() and not waiting() and run.elapsed < 90:
        time.sleep(0.1)
    assert waiting(), run.tails[0].text
    run.timeout = run.elapsed + 2
    res = run.wait(live=False)
    assert res.status == "timeout"
    assert res.culprit == 1 and res.verdict.kind == "outside_collective"
    assert "all_reduce" in res.stack(0) and "inject" in res.stack(1)
    pids = [res.records[r]["pid"] for r in (0, 1)]
    assert not [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]


def test_kernel_interrupt_stops_the_world(runs_dir):
    run = Run("probe", ["--timeout", "120", "--fault", "stall", "--stall", "300"], nproc=2, timeout=300)
    threading.Timer(6.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    old = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a kernel, even if this session ignores it
    try:
        with pytest.raises(KeyboardInterrupt):
            run.wait(live=False)
    finally:
        signal.signal(signal.SIGINT, old)
    assert run.result.status == "interrupted"
    assert not workbook_processes(str(runs_dir))


def test_port_in_use_is_refused_before_launch(runs_dir):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(PortInUseError) as err:
            Run("probe", nproc=2, port=port).start()
    assert str(port) in str(err.value)
    assert not runs_dir.exists() or not any(runs_dir.iterdir())


KERNEL = textwrap.dedent("""
    import sys, time
    from nbhelpers import Run
    run = Run("probe", ["--timeout", "120", "--fault", "stall", "--stall", "300"], nproc=2, timeout=300).start()
    while len(list(run.log_dir.glob("rank*.json"))) < 2:  # both ranks have started
        time.sleep(0.1)
    print("started", flush=True)
    sys.stdin.readline()   # the test counts the world's processes, then: a newline (a clean exit, atexit) or SIGKILL
""")


@pytest.mark.parametrize("how", ["exit", "sigkill"])
def test_ranks_do_not_outlive_their_kernel(runs_dir, how):
    kernel = subprocess.Popen([sys.executable, "-c", KERNEL], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    assert kernel.stdout.readline().strip() == "started"
    deadline = time.time() + 15  # a rank just exec'ing may not show its environment for a moment
    while len(workbook_processes(str(runs_dir))) < 3 and time.time() < deadline:
        time.sleep(0.2)
    assert len(workbook_processes(str(runs_dir))) >= 3  # torchrun and its 2 ranks (the shim runs inside each)
    if how == "sigkill":
        kernel.kill()
    else:
        kernel.stdin.write("\n")
        kernel.stdin.flush()
    kernel.wait(30)
    deadline = time.time() + 40
    while workbook_processes(str(runs_dir)) and time.time() < deadline:
        time.sleep(0.2)
    assert not workbook_processes(str(runs_dir))


def test_the_culprit_is_named_before_torchrun_finishes_tearing_down(runs_dir):
    res = probe(2, timeout=5, size_mb=1, fault="stall", stall=60, live=False, hang_after=None)
    assert res.culprit == 1 and res.hang is None
    first_failure = res.to_dict()["first_failure_s"]
    assert first_failure <= res.culprit_named_s < res.wall_s


def test_the_hang_watch_names_the_culprit_before_any_rank_fails(runs_dir):
    # rank 1 stalls before the large all_reduce; rank 0 waits in it until its 8 s timeout
    res = probe(2, timeout=8, size_mb=1, fault="stall", stall=60, live=False)
    assert res.culprit == 1 and res.hang and res.hang["culprit"] == 1, res.hang
    assert res.hang["waiting"]["0"].startswith("all_reduce at probe.py:"), res.hang
    assert res.culprit_named_s < res.to_dict()["first_failure_s"] < res.wall_s


def test_an_abort_on_a_size_mismatch_names_no_rank(runs_dir):
    # rank 1 sends the wrong size; gloo SIGABRTs whichever rank received more than it expected (here rank 0):
    # the verdict must not blame the aborted rank, and shows every rank's shapes (the aborted rank's collective
    # record too, written as it died)
    res = probe(2, timeout=10, size_mb=1, fault="mismatch", fault_rank=1, live=False)
    aborted = [r for r, rec in res.records.items() if rec.get("signal") == "SIGABRT"]
    assert aborted, res.records
    assert res.culprit is None and res.verdict.kind == "mismatch", res.verdict
    assert "rank 0 ran all_reduce [262144] float32; rank 1 ran all_reduce [524288] float32" in res.verdict.reason, \
        res.verdict.reason
    assert res.collectives["missing_ranks"] == [] and res.verdict.evidence
    assert res.category == "collective_mismatch"


def test_a_picked_port_taken_before_launch_is_picked_again(monkeypatch, tmp_path):
    """Two worlds started side by side: the free port one picked can be bound by the other before its
    torchrun starts; a port the launcher picked itself is picked again, a port the user gave is refused."""
    import socket

    from nbhelpers.errors import PortInUseError
    from nbhelpers.runtime import launcher

    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    taken = squatter.getsockname()[1]
    picks = iter([taken, taken])
    real = launcher.free_port
    monkeypatch.setattr(launcher, "free_port", lambda host: next(picks, None) or real(host))
    run = launcher.Run("probe", nproc=1, log_dir=tmp_path / "a")
    monkeypatch.setattr(launcher.subprocess, "Popen", lambda *a, **k: (_ for _ in ()).throw(OSError("not started")))
    with pytest.raises(launcher.LaunchError):
        run.start()
    assert run.port not in (taken, None)
    with pytest.raises(PortInUseError):
        launcher.Run("probe", nproc=1, port=taken, log_dir=tmp_path / "b").start()
    squatter.close()


FACTS = r"""
import json, os, signal, sys
import psutil
parent = psutil.Process(os.getppid())
print(json.dumps({"rank": int(os.environ["RANK"]), "parent_is_torchrun": "torch.distributed.run" in parent.cmdline(),
                  "session_leader": os.getsid(0) == os.getpid(), "argv": sys.argv[1:], "name": __name__,
                  "path0": sys.path[0], "cwd": os.getcwd(), "env": sorted(os.environ),
                  "stdin": os.path.realpath("/proc/self/fd/0"), "write_through": sys.stdout.write_through,
                  "signals": {s: str(signal.getsignal(getattr(signal, s))) for s in ("SIGINT", "SIGTERM", "SIGHUP")},
                  "workbook": sorted(m for m in sys.modules if m.startswith("nbhelpers"))}), flush=True)
"""


def json_objects(text: str) -> list[dict]:
    """Every JSON object in ``text``, wherever it starts (printed lines of processes sharing one pipe interleave)."""
    decoder, at, found = json.JSONDecoder(), 0, []
    while (at := text.find("{", at)) != -1:
        try:
            obj, at = decoder.raw_decode(text, at)
        except ValueError:
            at += 1
            continue
        found.append(obj)
    return found


def test_a_supervised_rank_is_what_plain_torchrun_starts(tmp_path, runs_dir):
    """The same script under plain torchrun and under the workbook: each rank's parent is torchrun's agent, it
    leads its own session, and it sees the same argv, path, environment (one name more: NBH_RUN_DIR, which
    finds a run's strays), stdin, signal handlers and modules."""
    script = tmp_path / "facts.py"
    script.write_text(FACTS)
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--rdzv-backend",
                          "c10d", "--rdzv-endpoint", "127.0.0.1:0", str(script), "--lr", "0.1"], capture_output=True,
                         text=True, stdin=subprocess.DEVNULL, timeout=120, cwd=tmp_path)
    # both ranks print to torchrun's one stdout: their lines can interleave ('{rank 0...}{rank 1...}' then two newlines)
    plain = {f["rank"]: f for f in json_objects(out.stdout)}
    res = Run(str(script), ["--lr", "0.1"], nproc=2, timeout=60).wait(live=False)
    assert res.status == "ok", res.logs
    run = {r: json.loads(next(ln for ln in log.splitlines() if ln.startswith("{"))) for r, log in res.logs.items()}
    assert sorted(plain) == sorted(run) == [0, 1], out.stdout + out.stderr
    for r in (0, 1):
        assert run[r]["parent_is_torchrun"] and run[r]["session_leader"] and run[r]["workbook"] == []
        assert set(run[r].pop("env")) - set(plain[r].pop("env")) == {"NBH_RUN_DIR"}
        run[r].pop("cwd"), plain[r].pop("cwd")  # the launcher's and this test's
        assert run[r] == plain[r]


def test_a_job_keyed_on_its_launchers_pid_runs_as_under_plain_torchrun(tmp_path, runs_dir):
    """Ranks that share a folder named after os.getppid(): under plain torchrun they agree on it and the job
    ends ok; so it must under the workbook (a process of the workbook's between torchrun and each rank split the
    folder, and rank 1 failed with FileNotFoundError)."""
    from pathlib import Path

    script = Path(__file__).parent / "data" / "scripts" / "scratch_by_launcher.py"
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--rdzv-backend",
                          "c10d", "--rdzv-endpoint", "127.0.0.1:0", str(script)], capture_output=True, text=True,
                         stdin=subprocess.DEVNULL, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    res = Run(str(script), nproc=2, timeout=60).wait(live=False)
    assert res.finished, res.logs
    folders = {log.split(" from ")[-1].strip() for log in res.logs.values()}
    assert len(folders) == 1, res.logs


OWN_SIGTERM = r"""
import os, signal, time
import torch.distributed as dist

def stop(signum, frame):  # as Lightning's signal connector does: its own handler, then the default death
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)

signal.signal(signal.SIGTERM, stop)  # replaces the rank shim's faulthandler dump: no stack is left
dist.init_process_group("gloo")
dist.barrier()
if dist.get_rank() == 0:
    raise ValueError("bad batch on rank 0")
while True:
    time.sleep(0.1)
"""


def test_a_rank_torchrun_stopped_is_not_a_crash_when_its_own_sigterm_handler_left_no_dump(tmp_path, runs_dir):
    script = tmp_path / "own_sigterm.py"
    script.write_text(OWN_SIGTERM)
    res = Run(str(script), nproc=2, timeout=60).wait(live=False)
    one = res.records[1]
    assert one["signal"] == "SIGTERM" and not (res.log_dir / "rank1.term.txt").read_text(), one
    assert one["stop_signal"] == "SIGTERM", one  # from torchrun's "Sending process N closing signal SIGTERM"
    assert res.culprit == 0 and res.verdict.kind.value == "crashed", res.verdict
