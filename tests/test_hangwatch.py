"""A hang named while the job still hangs: a realistic script with a 60 s process-group timeout, run for real."""
import json
import subprocess
import sys

import pytest


@pytest.mark.integration
def test_a_hang_is_named_live_with_its_line_long_before_the_timeout(tmp_path, runs_dir):
    from nbhelpers.scenarios.supervise import example

    # rank 1's DataLoader waits forever for a shard nobody wrote; rank 0 waits in DDP's all_reduce; no events
    script = example("train_sharded_files", tmp_path)
    out = subprocess.run([sys.executable, "-m", "nbhelpers", "run", "--nproc", "2", "--timeout", "120", "--json",
                          "--stop-on-hang", str(script), "--pg-timeout", "60"], capture_output=True, text=True,
                         timeout=150)
    v = json.loads(out.stdout)
    assert out.returncode == 1 and v["status"] == "failed" and v["run_status"] == "hang", v
    h = v["hang"]
    assert h["culprit"] == 1 and "train_sharded_files.py:85" in h["where"], h
    assert h["waiting"] == {"0": "backward (DDP's gradient all_reduce) at train_sharded_files.py:89 in train"}, h
    # 2 s of waiting, then a sample or two more (the bench has the number); the run_status above says the hang
    # stopped the run, not the 60 s process-group timeout, whatever the start-up took on this machine
    assert 2.0 <= h["after_divergence_s"] < 60 / 4, h
    # the verdict after the stop, from the stacks the shims dumped, agrees
    assert v["culprit_rank"] == 1 and v["category"] == "collective_timeout", v
    # and so do the ranks' collective records, rank 1's written on request while it waited in its DataLoader
    rec = v["collectives"]
    assert rec["ranks"] == [0, 1] and rec["missing_ranks"] == [1] and rec["culprit_rank"] == 1, rec
    fd = rec["first_disagreement"]
    assert fd["groups"][0]["ranks"] == [0] and fd["groups"][0]["op"] == "all_reduce", fd
    assert fd["last_before"]["1"].startswith(f"#{fd['seq'] - 1} all_reduce"), fd


@pytest.mark.integration
@pytest.mark.parametrize("pause", ["eval", "save", "slowfs"])
def test_rank_0_working_alone_while_the_others_wait_is_a_pause_not_a_hang(pause, runs_dir):
    """Every 4 steps rank 0 works 5 s alone (scores a held-out set on the CPU; writes a checkpoint to disk; writes
    it to a file system that takes 8 MiB/s, asleep in write() nearly all the time) while rank 1 waits at a
    barrier: the job ends ok under --stop-on-hang, and its JSON carries no hang (the waiting rank sleeps, but the
    rank elsewhere is at work: on a CPU, or moving bytes)."""
    from pathlib import Path

    script = Path(__file__).parents[1] / "examples" / "slow" / "train_eval_pause.py"
    out = subprocess.run([sys.executable, "-m", "nbhelpers", "run", "--nproc", "2", "--timeout", "120", "--json",
                          "--stop-on-hang", str(script), "--steps", "8", "--every", "4", "--eval-s", "5",
                          "--pause", pause], capture_output=True, text=True, timeout=150)
    v = json.loads(out.stdout)
    # every step ran and nothing hung (a rank may still abort in shutdown, gloo's race: RunResult.finished)
    assert v["finished"] and v["run_status"] != "hang" and v.get("hang") is None, v


@pytest.mark.integration
def test_a_process_moving_bytes_is_told_from_one_that_sleeps(tmp_path):
    """io_moving reads Linux's rchar + wchar: a writer at a few MiB/s moves, a sleeper does not, and a rank's
    first reading never counts (nothing to compare with)."""
    import time

    from nbhelpers.runtime.hangwatch import io_moving

    writer = subprocess.Popen([sys.executable, "-c", "import time\nf = open(%r, 'wb', buffering=0)\nwhile True:\n"
                               "    f.seek(0); f.write(bytes(1 << 18)); time.sleep(0.01)" % str(tmp_path / "x")])
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        last, pids = {}, {0: writer.pid, 1: sleeper.pid}
        time.sleep(1.0)
        assert io_moving(pids, last, time.time()) == {0: False, 1: False}
        time.sleep(0.5)
        assert io_moving(pids, last, time.time()) == {0: True, 1: False}
    finally:
        writer.kill()
        sleeper.kill()
        writer.wait()
        sleeper.wait()


@pytest.mark.integration
def test_cpu_moving_tells_a_looping_process_from_one_asleep():
    """cpu_moving integrates CPU time between two looks: a process spinning uses most of a core, a sleeper none
    (attach uses it so that a loop caught at one collective line on every look is not called stuck)."""
    import time

    from nbhelpers.runtime.hangwatch import cpu_moving

    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    sleep = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        pids, last = {0: spin.pid, 1: sleep.pid}, {}
        assert cpu_moving(pids, last, time.time()) == {0: False, 1: False}  # a first reading says nothing
        seen = []
        for _ in range(10):  # on a loaded machine the spinner may get little CPU in one window; never the sleeper
            time.sleep(1.5)
            seen.append(cpu_moving(pids, last, time.time()))
            if seen[-1][0]:
                break
        assert seen[-1][0] and not any(s[1] for s in seen), seen
    finally:
        spin.kill()
        sleep.kill()
