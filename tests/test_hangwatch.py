"""A hang named while the job still hangs: a realistic script with a 60 s process-group timeout, run for real."""
import json
import subprocess
import sys


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
