"""`python -m nbhelpers doctor` on files and stdin, plain and --json."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SHARED

pytestmark = pytest.mark.integration  # its tests start real processes

DEV = SHARED / "corpus" / "real_failure_logs.dev.jsonl"


@pytest.mark.skipif(not DEV.exists(), reason=f"shared corpus not found at {DEV}")
def test_doctor_reads_files_and_stdin(tmp_path):
    rows = [json.loads(x) for x in DEV.read_text().splitlines() if x.strip()]
    row = next(r for r in rows if r["label"] == "port_in_use")
    log = tmp_path / "pasted.log"
    log.write_text(row["log"])
    out = subprocess.run([sys.executable, "-m", "nbhelpers", "doctor", str(log)], capture_output=True, text=True)
    assert out.returncode == 1 and "port_in_use" in out.stdout and "line " in out.stdout
    out = subprocess.run([sys.executable, "-m", "nbhelpers", "doctor", "--json", "-"], input=row["log"],
                         capture_output=True, text=True)
    first = json.loads(out.stdout.splitlines()[0])
    assert first["category"] == "port_in_use" and first["evidence"][0]["line"] >= 1 and first["remedies"]


def test_doctor_on_a_healthy_log_finds_nothing(tmp_path):
    log = tmp_path / "ok.log"
    log.write_text("[vm:0] probe passed\n[vm:1] probe passed\n")
    out = subprocess.run([sys.executable, "-m", "nbhelpers", "doctor", str(log)], capture_output=True, text=True)
    assert out.returncode == 0 and "no known failure found" in out.stdout and "worth a look" not in out.stdout


def test_doctor_shows_set_up_lines_worth_a_look_when_it_finds_no_failure():
    # NCCL start-up lines of a hung two-node job (pytorch/pytorch#50575, training split): no error, but NCCL uses a
    # docker veth with a link-local address
    log = ("hikBigDataTestGpu2:1449:1449 [0] NCCL INFO NET/Socket : Using [0]eno4:10.3.68.117<0> "
           "[1]vethe94aab9:fe80::a86b:69ff:fe67:e3fe%vethe94aab9<0>\n"
           "hikBigDataTestGpu2:1449:1449 [0] NCCL INFO Using network Socket\nNCCL version 2.7.8+cuda10.2\n")
    out = subprocess.run([sys.executable, "-m", "nbhelpers", "doctor", "-"], input=log, capture_output=True, text=True)
    assert out.returncode == 0 and "no known failure found" in out.stdout
    assert "worth a look, not a failure by itself: Wrong network interface" in out.stdout and "vethe94aab9" in out.stdout
    assert "NCCL_SOCKET_IFNAME" in out.stdout


def cli(*args, input=None):
    return subprocess.run([sys.executable, "-m", "nbhelpers", *args], capture_output=True, text=True, input=input,
                          timeout=120)


@pytest.mark.parametrize("args, says", [
    (["run", "--nproc", "0", "train.py"], "--nproc: must be above 0, not 0"),
    (["run", "--nproc", "two", "train.py"], "--nproc: must be a number, not 'two'"),
    (["run", "--nproc", "2", "--timeout", "-5", "train.py"], "--timeout: must be above 0, not -5"),
    (["run", "--nproc", "2", "--timeout", "0", "train.py"], "--timeout: must be above 0, not 0"),
    (["run", "--nproc", "2", "missing.py"], "script missing.py: no such file"),
    (["run", "--nproc", "2", "."], "script .: is a directory"),
    (["doctor", "missing.log"], "log missing.log: no such file"),
    (["doctor", ".", "train.py"], "log .: is a directory"),  # a folder is read alone, as one job's logs
    (["doctor", "."], "neither a workbook run folder (rank<N>.log) nor a torchrun --log-dir folder"),
    (["doctor", "train.py", "--launcher-log", "train.py"], "--launcher-log goes with a folder"),
    (["run-all", "missing.ipynb"], "notebook missing.ipynb: no such file"),
    (["bogus"], "invalid choice: 'bogus'"),
])
def test_bad_input_gets_one_line_and_exit_2_before_anything_starts(tmp_path, monkeypatch, args, says):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("print('never runs')\n")
    out = cli(*args)
    assert out.returncode == 2, out
    assert out.stdout == "" and len(out.stderr.strip().splitlines()) == 1 and says in out.stderr, out.stderr
    assert not (tmp_path / "runs").exists()  # refused before anything started


def test_empty_and_binary_files_are_refused_and_a_latin1_log_is_read(tmp_path):
    (tmp_path / "empty.log").write_text("")
    (tmp_path / "core.bin").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))
    for name, says in (("empty.log", "the file is empty"), ("core.bin", "binary data, not text")):
        out = cli("doctor", str(tmp_path / name))
        assert out.returncode == 2 and says in out.stderr and len(out.stderr.splitlines()) == 1, out.stderr
    out = cli("run", str(tmp_path / "core.bin"))
    assert out.returncode == 2 and "binary data" in out.stderr
    latin1 = tmp_path / "latin1.log"  # a log saved by a tool in another encoding: read, not refused
    latin1.write_bytes("Fehler für Rang 1\n".encode("latin-1") + b"RuntimeError: [../third_party/gloo/gloo/transport/"
                       b"tcp/device.cc:84] ifa != nullptr. Unable to find address for: eth9\n")
    out = cli("doctor", str(latin1))
    assert out.returncode == 1 and "network_interface" in out.stdout, out


def test_more_ranks_than_cpus_is_a_warning_not_a_refusal(tmp_path, runs_dir):
    import os

    script = tmp_path / "hello.py"
    script.write_text("import os\nprint('rank', os.environ['RANK'])\n")
    n = (os.cpu_count() or 1) + 1
    out = cli("run", "--nproc", str(n), "--timeout", "90", "--json", str(script))
    assert f"warning: {n} ranks on" in out.stderr
    assert out.returncode == 0 and json.loads(out.stdout)["status"] == "ok", out


def test_doctor_on_a_torchrun_log_dir_names_the_culprit_rank_and_the_line(tmp_path):
    # the user's own job, run by plain torchrun with --log-dir (no workbook launcher): rank 1's shard holds a label
    # the collate function rejects (examples/faulty/train_label_check.py); torchrun's console output is kept too
    from nbhelpers.scenarios.supervise import example

    script = example("train_label_check", tmp_path / "job")
    with open(tmp_path / "console.txt", "w") as console:
        done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                               "--log-dir", str(tmp_path / "logs"), "--redirects", "3", str(script)],
                              cwd=script.parent, stdout=console, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              timeout=180)
    assert done.returncode != 0
    cmd = [sys.executable, "-m", "nbhelpers", "doctor", str(tmp_path / "logs"), "--json"]
    with_codes = subprocess.run(cmd + ["--launcher-log", str(tmp_path / "console.txt")], capture_output=True, text=True)
    logs_only = subprocess.run(cmd, capture_output=True, text=True)
    for out in (with_codes, logs_only):
        got = json.loads(out.stdout)
        assert out.returncode == 1 and got["culprit_rank"] == 1 and got["category"] == "rank_error", got
        assert "train_label_check.py" in got["culprit_where"] and "ValueError" in got["reason"], got
    # read from torchrun's failure report, whatever it says: 1 most often; -15 when torchrun's SIGTERM reached rank 1
    # before its own exit (a loaded machine); -6 once in CI, when rank 1's exit aborted in C++ (a gloo thread still
    # at work while the interpreter shut down)
    code = json.loads(with_codes.stdout)["exit_codes"]["1"]
    report = re.search(r"rank\s*:\s*1 \(local_rank: 1\)\s*\n\s*exitcode\s*:\s*(-?\d+)",
                       (tmp_path / "console.txt").read_text())
    assert report and code == int(report.group(1)), (code, report)
    plain = subprocess.run(cmd[:-1], capture_output=True, text=True)
    assert "culprit:  rank 1" in plain.stdout and "--launcher-log" in plain.stderr
    assert "record:   none: no rank wrote its collective record" in plain.stdout  # plain torchrun: no rank shim


def test_doctor_on_a_folder_that_holds_no_ranks_logs_says_what_it_wants(tmp_path):
    out = subprocess.run([sys.executable, "-m", "nbhelpers", "doctor", str(tmp_path)], capture_output=True, text=True)
    assert out.returncode == 2 and "torchrun --log-dir" in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_version_and_the_exit_statuses_are_stated_once_for_every_command():
    import subprocess
    import sys

    from nbhelpers.errors import BadInput, WorkbookError

    out = subprocess.run([sys.executable, "-m", "nbhelpers", "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("nbhelpers "), out
    helped = subprocess.run([sys.executable, "-m", "nbhelpers", "--help"], capture_output=True, text=True, timeout=60)
    assert "exit status: 0 nothing wrong found; 1 a failure found" in " ".join(helped.stdout.split())
    assert issubclass(BadInput, WorkbookError)  # every user-facing error under the one root


LAUNCHED = """
import os, sys
import psutil
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
print(f"rank {rank} parent {psutil.Process(os.getppid()).name()} argv {sys.argv}", flush=True)
if rank == 1:
    raise ValueError("shard 7 has no labels")
dist.barrier()
dist.destroy_process_group()
"""


@pytest.mark.parametrize("launcher", ["torchrun", "accelerate", "deepspeed"])
def test_run_supervises_the_users_own_launch_line(launcher, tmp_path):
    """`run torchrun ...` / `run accelerate launch ...` / `run deepspeed ...`: the user's launcher starts the ranks as
    it always does (their parent is that launcher, argv is the script's), and the verdict names rank 1 and its line."""
    import json
    import subprocess
    import sys

    if launcher != "torchrun":
        extra = "deepspeed" if launcher == "deepspeed" else "frameworks"
        pytest.importorskip(launcher, reason=f"{launcher} is not installed here (pip install -e '.[{extra}]')")
    (tmp_path / "train.py").write_text(LAUNCHED)
    line = {"torchrun": ["torchrun", "--nproc-per-node", "2", "--standalone"],
            "accelerate": ["accelerate", "launch", "--num_processes", "2", "--multi_gpu"],
            "deepspeed": ["deepspeed", "--num_gpus", "2"]}[launcher]
    out = subprocess.run([sys.executable, "-m", "nbhelpers", "run", "--json", *line, "train.py", "--lr", "3"],
                         capture_output=True, text=True, timeout=240, cwd=tmp_path)
    v = json.loads(out.stdout)
    assert out.returncode == 1 and v["culprit_rank"] == 1 and v["category"] == "rank_error", v
    assert v["culprit_where"].startswith("train.py:10"), v["culprit_where"]
    logs = {r: (Path(v["log_dir"]) / f"rank{r}.log").read_text() for r in (0, 1)}
    # DeepSpeed's launcher gives the script --local_rank=N first, as it does without the workbook
    argv = {r: ["train.py", *([f"--local_rank={r}"] if launcher == "deepspeed" else []), "--lr", "3"] for r in (0, 1)}
    assert all(f"argv {argv[r]}" in logs[r] for r in (0, 1)), logs
    parents = {t.split("parent ")[1].split()[0] for t in logs.values()}
    # the launcher itself, as without the workbook (DeepSpeed's is `python -m deepspeed.launcher.launch`)
    assert parents <= {"pt_elastic", "torchrun", "accelerate", "python", "python3"}, parents
