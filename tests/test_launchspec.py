"""One builder for every torchrun command: what a user copies is what the workbook's own runs execute."""
import os
import shlex
import sys

import pytest

from nbhelpers.runtime.launcher import Run
from nbhelpers.runtime.launchspec import (
    REPO_ROOT,
    SHIM,
    LaunchSpec,
    child_env,
    python_args,
)
from nbhelpers.runtime.multinode import Plan


def without_workbook_parts(argv: list[str]) -> list[str]:
    """A Run's argv less what only the workbook adds: the rank shim and torchrun's monitor interval."""
    out = list(argv)
    at = out.index(SHIM)   # run as a script: python -u rankshim.py --log-dir DIR -- <the rank's program>
    del out[at:out.index("--", at) + 1]
    at = out.index("--monitor-interval")
    del out[at:at + 2]
    return out


def test_the_command_a_node_runs_is_the_one_printed_for_it():
    plan = Plan(nnodes=2, nproc_per_node=2, master_addr="10.0.0.1", port=29511, args=["--timeout", "5"])
    for node in (0, 1):
        run = plan.run(node, local_addr=f"10.0.0.{node + 1}", prefix=["ip", "netns", "exec", "ns"])
        printed = shlex.split(plan.command(node, f"10.0.0.{node + 1}"))
        assert printed[:2] == ["LOGLEVEL=INFO", "python"]
        at = printed.index("--node-rank")  # c10d ignores it; people read it
        assert printed[at + 1] == str(node)
        expected = [sys.executable, *printed[2:at], *printed[at + 2:]]
        assert without_workbook_parts(run.command) == ["ip", "netns", "exec", "ns", *expected]


def test_the_printed_line_starts_torchrun_with_c10d_and_the_plan_values():
    plan = Plan(nnodes=2, master_addr="10.0.0.1", port=29511, join_timeout=30)
    line = shlex.split(plan.commands()[1])
    assert line[:2] == ["LOGLEVEL=INFO", "python"] and line[2:4] == ["-m", "torch.distributed.run"]
    assert line[line.index("--rdzv-backend") + 1] == "c10d" and line[line.index("--rdzv-endpoint") + 1] == "10.0.0.1:29511"
    assert line[line.index("--rdzv-conf") + 1] == "join_timeout=30,read_timeout=10,is_host=0"
    assert "$SLURM_NODEID" in plan.slurm_script() and "is_host" not in plan.slurm_script()


def test_a_one_node_run_uses_the_same_builder():
    run = Run("probe", ["--timeout", "3"], nproc=2, port=29512, log_dir="/tmp/x")
    spec = LaunchSpec("probe", ["--timeout", "3"], 2, 1, "127.0.0.1:29512", run.rdzv_id)
    assert without_workbook_parts(run.command) == spec.argv(sys.executable)
    assert run.command[-4:] == ["-m", "nbhelpers.workers.probe", "--timeout", "3"]


def test_targets_and_the_child_environment():
    assert python_args("probe", ["-x"]) == ["-m", "nbhelpers.workers.probe", "-x"]
    assert python_args("pkg.mod", []) == ["-m", "pkg.mod"]
    assert python_args("train.py", ["--lr", "1"])[0] == os.path.abspath("train.py")
    env = child_env({"OMP_NUM_THREADS": 4, "A": "b"}, base={"PYTHONPATH": "/user/lib"})
    assert env["PYTHONPATH"].split(os.pathsep) == [str(REPO_ROOT), "/user/lib"]
    assert env["OMP_NUM_THREADS"] == "4" and env["A"] == "b" and env["PYTHONUNBUFFERED"] == "1"
    assert child_env(base={})["OMP_NUM_THREADS"] == "1"


def test_the_users_own_launch_line_gets_the_shim_before_its_program_and_nothing_else_changes():
    from nbhelpers.runtime.launchspec import user_launch

    ul = user_launch(["torchrun", "--nproc-per-node", "3", "--standalone", "train.py", "--lr", "0.1"], "/tmp/L")
    at = ul.argv.index(SHIM)
    assert ul.argv[1:at] == ["--nproc-per-node", "3", "--standalone"] and ul.nproc == 3
    assert ul.argv[at:] == [SHIM, "--log-dir", "/tmp/L", "--", "train.py", "--lr", "0.1"]
    # a module: torchrun's -m goes to the shim, which runs it as python -m would
    ul = user_launch(["python", "-m", "torch.distributed.run", "--nproc_per_node=2", "-m", "pkg.train", "-x"], "/L")
    assert ul.argv[:4] == ["python", "-m", "torch.distributed.run", "--nproc_per_node=2"]
    assert ul.argv[4:] == [SHIM, "--log-dir", "/L", "--", "-m", "pkg.train", "-x"] and ul.program[0] == "-m"


def test_deepspeeds_launch_line_gets_the_shim_as_its_script():
    # the DeepSpeed launcher starts `python -u SCRIPT --local_rank=N ARGS` per rank: the shim is its script, and puts
    # --local_rank=N back where DeepSpeed puts it for the program (rankshim.parse)
    from nbhelpers.runtime.launchspec import user_launch
    from nbhelpers.runtime.rankshim import parse

    pytest.importorskip("deepspeed", reason="DeepSpeed is not installed here (pip install -e '.[deepspeed]')")
    ul = user_launch(["deepspeed", "--num_gpus", "2", "--master_port", "29511", "train.py", "--lr", "0.1"], "/L")
    at = ul.argv.index(SHIM)
    assert ul.argv[1:at] == ["--num_gpus", "2", "--master_port", "29511"] and ul.nproc == 2
    assert ul.argv[at:] == [SHIM, "--log-dir", "/L", "--", "train.py", "--lr", "0.1"]
    assert parse(["--local_rank=1", *ul.argv[at + 1:]]) == ("/L", ["train.py", "--local_rank=1", "--lr", "0.1"], True)


def test_the_shim_puts_a_launchers_local_rank_after_the_program():
    from nbhelpers.runtime.rankshim import parse

    assert parse(["--log-dir", "D", "--", "train.py", "-x"]) == ("D", ["train.py", "-x"], True)
    assert parse(["--local_rank=1", "--log-dir", "D", "--no-record", "--", "-m", "pkg.train", "-x"]) == \
        ("D", ["-m", "pkg.train", "--local_rank=1", "-x"], False)
    assert parse(["--local_rank=0", "train.py"]) is None


def test_launch_lines_the_workbook_cannot_record_are_refused_with_what_to_do():
    from nbhelpers.errors import WorkbookError
    from nbhelpers.runtime.launchspec import is_launch_command, user_launch

    assert not is_launch_command(["python", "train.py"]) and is_launch_command(["/opt/bin/torchrun", "x.py"])
    for argv, said in ((["torchrun", "--nproc-per-node", "2", "--no-python", "./a.out"], "--no-python"),
                       (["torchrun", "--nnodes", "2", "--nproc-per-node", "2", "train.py"], "several nodes"),
                       (["mpirun", "-np", "2", "python", "train.py"], "not a launch command")):
        with pytest.raises(WorkbookError) as err:
            user_launch(argv, "/tmp/L")
        assert said in str(err.value) and err.value.todo, err.value
