"""`python -m nbhelpers attach` on a hung torchrun job the workbook did not start, for real."""
import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from nbhelpers.runtime.attach import attach_commands, merge


def cli(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "nbhelpers", "attach", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def hung_job(tmp_path):
    """A realistic DDP script started with plain torchrun: rank 1's DataLoader waits forever for a missing
    shard, rank 0 waits in the gradient all_reduce (60 s process-group timeout)."""
    from nbhelpers.scenarios.supervise import example

    script = example("train_sharded_files", tmp_path)
    log = open(tmp_path / "torchrun.log", "wb")
    job = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                            "--master-port", "0", "--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:0",
                            str(script), "--pg-timeout", "60"], cwd=tmp_path, stdin=subprocess.DEVNULL,
                           stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield job
    finally:
        stop_job(job)
        log.close()


def stop_job(job: subprocess.Popen) -> None:
    """Kill a torchrun job started for a test, and its ranks (they live in sessions of their own)."""
    tree = psutil.Process(job.pid).children(recursive=True)
    os.killpg(job.pid, signal.SIGKILL)
    for p in tree:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    job.wait()


@pytest.mark.integration
def test_attach_names_the_rank_of_a_hung_job_and_leaves_it_running(hung_job, tmp_path):
    # the job starts, trains 24 steps, then hangs: --wait looks again every second until a rank stands out
    out = cli(str(hung_job.pid), "--json", "--wait", "60", timeout=120)
    v = json.loads(out.stdout) if out.returncode == 1 else None
    assert v is not None, (out.returncode, out.stdout[-2000:], out.stderr[-2000:])
    assert v["job_pid"] == hung_job.pid and v["culprit_rank"] == 1, v
    by_rank = {r["rank"]: r for r in v["ranks"]}
    assert set(by_rank) == {0, 1} and all(psutil.pid_exists(r["pid"]) for r in by_rank.values())
    assert by_rank[1]["where"].endswith("train_sharded_files.py:85") and by_rank[1]["collective"] is None, by_rank[1]
    assert by_rank[0]["collective"].startswith("backward") and by_rank[0]["where"].endswith(":89"), by_rank[0]
    time.sleep(1)
    assert hung_job.poll() is None and all(psutil.Process(r["pid"]).status() != psutil.STATUS_STOPPED
                                           for r in by_rank.values())  # read, not stopped
    # the same job seen as two nodes (one rank each), merged: the same verdict
    parts = [dict(v, ranks=[r]) for r in v["ranks"]]
    files = []
    for i, part in enumerate(parts):
        (tmp_path / f"node{i}.json").write_text(json.dumps(part))
        files.append(str(tmp_path / f"node{i}.json"))
    assert merge(files).culprit_rank == 1  # no world in these parts: one job
    out = cli("--merge", *files)
    assert out.returncode == 1 and "culprit: rank 1" in out.stdout, out.stdout


@pytest.mark.integration
def test_attach_to_a_process_that_is_no_job_says_so_in_one_line():
    out = cli(str(os.getpid()))
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and out.stderr.startswith("error: "), out.stderr


def test_per_node_commands_gather_and_merge():
    cmds = attach_commands(["node-a", "node-b"], workdir="/work/wb")
    assert cmds["node-a"].startswith("ssh node-a ") and "attach --all --json" in cmds["node-a"]
    assert cmds["node-a"].endswith("> attach-node-a.json")
    assert "--nodes 2 --ntasks-per-node 1" in cmds["srun"] and "--overlap" in cmds["srun"]
    assert cmds["merge"].endswith("attach --merge attach-*.json")


# py-spy's dump of a rank still importing torch (printed on this machine, 2026-11-25)
IMPORTING = '''Process 9266: /work/main/.venv/bin/python -c import torch; import time
Python v3.11.7 (/root/.pyenv/versions/3.11.7/bin/python3.11)

Thread 9266 (active+gil): "MainThread"
    <module> (torch/fx/experimental/proxy_tensor.py:71)
    _call_with_frames_removed (<frozen importlib._bootstrap>:241)
    _LoaderBasics.exec_module (<frozen importlib._bootstrap_external>:940)
    _load_unlocked (<frozen importlib._bootstrap>:690)
    _find_and_load_unlocked (<frozen importlib._bootstrap>:1147)
'''


def test_a_rank_still_importing_is_starting_not_a_straggler_to_wait_for():
    from nbhelpers.runtime.attach import Attached, _starting

    from nbhelpers.diagnosis.culprit import RankView
    from nbhelpers.runtime.hangwatch import hang_verdict

    stacks = {0: IMPORTING, 1: ""}
    starting = Attached(1, [], stacks, hang_verdict([RankView(r, stack=s) for r, s in stacks.items()]))
    assert _starting(starting) and not _starting(Attached(1, [], {0: "", 1: ""}, None))
    assert "still starting" in starting.text() and starting.to_dict()["starting"] is True


@pytest.mark.integration
def test_profile_names_the_rank_a_slow_job_waits_for_and_leaves_it_running(tmp_path):
    """A DDP job started with plain torchrun, running but slowly (rank 1's shard needs 8x the preprocessing):
    attach --profile samples it, names rank 1 and its line, and the job goes on; two nodes' outputs merge."""
    from nbhelpers.scenarios.supervise import example

    script = example("train_straggler", tmp_path)
    log = open(tmp_path / "torchrun.log", "wb")
    job = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--rdzv-backend",
                            "c10d", "--rdzv-endpoint", "127.0.0.1:0", str(script), "--cause", "data", "--slow-rank", "1",
                            "--steps", "400"], cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=log,
                           stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out = cli(str(job.pid), "--profile", "12", "--json", timeout=120)
        v = json.loads(out.stdout)
        assert out.returncode == 1 and v["straggler"] and v["straggler"]["rank"] == 1, v.get("straggler") or out
        assert "__getitem__" in v["straggler"]["where"], v["straggler"]
        assert job.poll() is None  # sampled, not stopped
        parts = [dict(v, ranks=[r], samples={str(r["rank"]): v["samples"][str(r["rank"])]}) for r in v["ranks"]]
        files = []
        for i, part in enumerate(parts):
            (tmp_path / f"node{i}.json").write_text(json.dumps(part))
            files.append(str(tmp_path / f"node{i}.json"))
        out = cli("--merge", *files)
        assert out.returncode == 1 and "straggler: rank 1 spends" in out.stdout, out.stdout
    finally:
        stop_job(job)
        log.close()


@pytest.mark.integration
def test_attach_all_gives_each_job_on_the_node_its_own_verdict(hung_job, tmp_path):
    """Two jobs on one machine, both started with plain torchrun: the hung DDP job and a healthy one. --all
    reports two jobs of two ranks each (not one world of four whose ranks 0 and 1 collide), names rank 1 in the
    hung job and nobody in the healthy one; the nodes' outputs merge job by job."""
    from nbhelpers.scenarios.supervise import example

    healthy_dir = tmp_path / "healthy"
    script = example("train_straggler", healthy_dir)
    log = open(tmp_path / "healthy.log", "wb")
    healthy = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                                "--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:0", str(script), "--cause",
                                "none", "--steps", "5000"], cwd=healthy_dir, stdin=subprocess.DEVNULL, stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)
    try:
        assert cli(str(hung_job.pid), "--wait", "60", timeout=120).returncode == 1  # the hang has begun
        # and the healthy job is past its start-up (a rank waiting in DDP's constructor for a peer still building
        # its model looks like a hang for those seconds: noted on issue 31, not what this test is about)
        deadline = time.time() + 120
        while "step 20 " not in (tmp_path / "healthy.log").read_text(errors="replace") and time.time() < deadline:
            time.sleep(0.5)
        out = cli("--all", "--json", timeout=120)
        jobs = {j["job_pid"]: j for j in json.loads(out.stdout)["jobs"]}
        assert {hung_job.pid, healthy.pid} <= set(jobs), out.stdout[-2000:]  # other tests' jobs may run here too
        jobs = {pid: jobs[pid] for pid in (hung_job.pid, healthy.pid)}
        assert [r["rank"] for r in jobs[hung_job.pid]["ranks"]] == [0, 1] == [r["rank"] for r in jobs[healthy.pid]["ranks"]]
        assert jobs[hung_job.pid]["culprit_rank"] == 1 and jobs[healthy.pid]["culprit_rank"] is None, out.stdout
        assert jobs[hung_job.pid]["world"] != jobs[healthy.pid]["world"]
        assert out.returncode == 1  # a culprit named in some job
        files = []
        for node in (0, 1):  # the same two jobs seen from two nodes, one rank of each per node
            part = {"jobs": [dict(j, ranks=[j["ranks"][node]]) for j in jobs.values()]}
            (tmp_path / f"node{node}.json").write_text(json.dumps(part))
            files.append(str(tmp_path / f"node{node}.json"))
        merged = merge(files)
        assert {j.job_pid: j.culprit_rank for j in merged.jobs} == {hung_job.pid: 1, healthy.pid: None}
        assert all(len(j.ranks) == 2 for j in merged.jobs)
    finally:
        stop_job(healthy)
        log.close()


@pytest.mark.integration
def test_attach_to_a_job_run_started_reads_its_ranks_collective_records(tmp_path):
    """The same hung job started by `python -m nbhelpers run` (no hang watch stop: it runs until its timeout): attach
    finds the run's folder in the ranks' environment, asks their rank shims for their collective records while
    they hang, and shows what they say: rank 1 never reached the all_reduce rank 0 waits in."""
    from nbhelpers.scenarios.supervise import example

    script = example("train_sharded_files", tmp_path)
    log = open(tmp_path / "run.log", "wb")
    job = subprocess.Popen([sys.executable, "-m", "nbhelpers", "run", "--nproc", "2", "--timeout", "300",
                            str(script), "--pg-timeout", "120"], cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=log,
                           stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out = cli(str(job.pid), "--json", "--wait", "90", timeout=150)
        v = json.loads(out.stdout) if out.returncode == 1 else None
        assert v is not None, (out.returncode, out.stdout[-2000:], out.stderr[-2000:])
        assert v["culprit_rank"] == 1, v["reason"]
        rec = v["collectives"]
        assert rec is not None and not rec["ok"] and rec["first_disagreement"]["missing"] == [1], rec
        assert "record: " in cli(str(job.pid), "--wait", "30", timeout=90).stdout
    finally:
        os.killpg(job.pid, signal.SIGINT)  # run stops its ranks and cleans up on an interrupt
        try:
            job.wait(60)
        except subprocess.TimeoutExpired:
            stop_job(job)
        log.close()
