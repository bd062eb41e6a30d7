"""The one builder of torchrun command lines and of the environment the ranks start with.

The launcher's :class:`~nbhelpers.runtime.launcher.Run` and every command a user copies (one node,
per node, Slurm, ssh: :class:`~nbhelpers.runtime.multinode.Plan`) are made here, so what the notebook
prints is what its own runs execute, less the rank shim that records each rank for the workbook.
c10d rendezvous is the engine: ``--rdzv-backend c10d --rdzv-endpoint HOST:PORT --rdzv-id ID``.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

__all__ = ["LaunchSpec", "UserLaunch", "python_args", "child_env", "is_launch_command", "user_launch", "REPO_ROOT",
           "SHIM"]

REPO_ROOT = Path(__file__).resolve().parents[2]   # the folder that holds the nbhelpers package
SHIM = str(Path(__file__).resolve().parent / "rankshim.py")   # run as a script: it imports nothing of the workbook


def python_args(target: str, args: Sequence[str]) -> list[str]:
    """``probe`` -> ``-m nbhelpers.workers.probe``; ``pkg.mod`` -> ``-m pkg.mod``; ``x.py`` -> ``x.py``."""
    if target.endswith(".py") or os.sep in target:
        return [str(Path(target).resolve()), *args]
    module = target if "." in target else f"nbhelpers.workers.{target}"
    return ["-m", module, *args]


def child_env(extra: dict | None = None, base: dict | None = None) -> dict:
    """The environment every process the workbook starts gets: ``base`` (default: this process's) with
    ``extra`` on top, nbhelpers importable (PYTHONPATH), output unbuffered, Python's faulthandler on, one
    OpenMP thread unless set."""
    env = dict(os.environ if base is None else base)
    env.update({k: str(v) for k, v in (extra or {}).items()})
    env.setdefault("OMP_NUM_THREADS", "1")
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("PYTHONFAULTHANDLER", "1")  # a rank killed by SIGSEGV/SIGABRT prints its Python stack
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")])))
    return env


@dataclass
class LaunchSpec:
    """One node's torchrun: the world it joins (``nnodes``, ``endpoint``, ``rdzv_id``, ``rdzv_conf``) and
    what its ``nproc_per_node`` ranks run (``target`` with ``args``: a worker name, a module or a script)."""
    target: str
    args: Sequence[str] = ()
    nproc_per_node: int = 1
    nnodes: int = 1
    endpoint: str = "127.0.0.1:29500"
    rdzv_id: str = "nbh"
    rdzv_conf: dict = field(default_factory=dict)
    node_rank: int | str | None = None     # printed for people; c10d ignores it (the rendezvous assigns node ranks)
    local_addr: str | None = None          # the address this node announces
    monitor_interval: float | None = None  # how often torchrun checks its ranks (its default: 0.1 s in 2.13)

    @property
    def workbook_program(self) -> bool:
        """Whether the ranks run one of the workbook's own programs (``nbhelpers.*``), not the user's."""
        first = python_args(self.target, ())
        return first[0] == "-m" and first[1].startswith("nbhelpers.")

    def torchrun_args(self, shim_log_dir: str | os.PathLike | None = None) -> list[str]:
        """torchrun's arguments; with ``shim_log_dir`` each rank runs under the workbook's rank shim."""
        conf = ",".join(f"{k}={v}" for k, v in self.rdzv_conf.items())
        shim = [SHIM, "--log-dir", str(shim_log_dir), "--"] if shim_log_dir is not None else []
        return ["--nnodes", str(self.nnodes), *(["--node-rank", str(self.node_rank)] if self.node_rank is not None else []),
                "--nproc-per-node", str(self.nproc_per_node), "--rdzv-backend", "c10d",
                "--rdzv-endpoint", self.endpoint, "--rdzv-id", self.rdzv_id, *(["--rdzv-conf", conf] if conf else []),
                "--max-restarts", "0",
                *(["--monitor-interval", str(self.monitor_interval)] if self.monitor_interval is not None else []),
                *(["--local-addr", self.local_addr] if self.local_addr else []),
                *shim, *python_args(self.target, self.args)]

    def argv(self, python: str = sys.executable, shim_log_dir: str | os.PathLike | None = None) -> list[str]:
        return [python, "-m", "torch.distributed.run", *self.torchrun_args(shim_log_dir)]


@dataclass(frozen=True)
class UserLaunch:
    """The user's own launch command, as they run it, with the rank shim put in front of the program each rank
    runs (``argv``); how many ranks it starts on this node; the program (``[script, *args]`` or ``["-m", module,
    *args]``)."""
    argv: list[str]
    nproc: int
    program: list[str]


LAUNCHERS = {"torch.distributed.run": "torchrun", "accelerate.commands.launch": "accelerate",
             "deepspeed.launcher.runner": "deepspeed"}


def _launcher(argv: Sequence[str]) -> tuple[str | None, int]:
    """Which launcher ``argv`` starts (torchrun, accelerate) and where its own arguments begin."""
    name = Path(argv[0]).name if argv else ""
    if name == "torchrun":
        return "torchrun", 1
    if name == "accelerate" and len(argv) > 1 and argv[1] == "launch":
        return "accelerate", 2
    if name == "deepspeed":
        return "deepspeed", 1
    if name.startswith("python") and len(argv) > 2 and argv[1] == "-m" and argv[2] in LAUNCHERS:
        return LAUNCHERS[argv[2]], 3
    return None, 0


def is_launch_command(argv: Sequence[str]) -> bool:
    return _launcher(argv)[0] is not None


def _nproc(value, kind: str) -> int:
    """torchrun's ``--nproc-per-node`` (a number, or auto / gpu / cpu) as a number of ranks."""
    if str(value).isdigit():
        return int(value)
    if value == "cpu":
        return os.cpu_count() or 1
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if value == "gpu" or (value == "auto" and gpus):
        return gpus
    return os.cpu_count() or 1


def user_launch(argv: Sequence[str], shim_log_dir: str | os.PathLike) -> UserLaunch:
    """``torchrun [opts] train.py args`` (or ``python -m torch.distributed.run``, ``accelerate launch``, ``deepspeed``)
    with ``rankshim.py --log-dir DIR --`` put before ``train.py``: the launcher runs as the user runs it, with its own
    options and defaults, and each rank it starts runs the shim, which runs the program in the same process.  The
    launcher's own argument parser finds the program (torch's ``get_args_parser``, accelerate's
    ``launch_command_parser``).  Refused with a :class:`~nbhelpers.errors.WorkbookError`: a command of another
    launcher, ``--no-python``, and several nodes (run the workbook on each node: notebook 05, ``attach``)."""
    from nbhelpers.errors import WorkbookError

    kind, at = _launcher(argv)
    if kind is None:
        raise WorkbookError(f"not a launch command the workbook knows: {' '.join(argv[:3])} ...",
                            "give `torchrun ...`, `python -m torch.distributed.run ...`, `accelerate launch ...` or "
                            "`deepspeed ...`, or a script: `run --nproc N train.py ARGS`")
    rest = list(argv[at:])
    if kind == "torchrun":
        from torch.distributed.run import get_args_parser

        a = get_args_parser().parse_args(rest)
        nodes = str(a.nnodes).split(":")[-1]
        nproc, several = _nproc(a.nproc_per_node, kind), nodes.isdigit() and int(nodes) > 1
    elif kind == "deepspeed":
        try:  # DeepSpeed's logger writes to the stdout it sees at import: keep `run --json`'s stdout JSON only
            with contextlib.redirect_stdout(sys.stderr):
                from deepspeed.launcher.runner import parse_args
        except ImportError:
            raise WorkbookError("`deepspeed` needs DeepSpeed installed in this environment",
                                "install it (pip install -e '.[deepspeed]'), or run its torchrun line") from None
        a = parse_args(rest)
        if a.num_gpus is None or a.num_gpus < 1:
            raise WorkbookError("`deepspeed` without --num_gpus: the workbook cannot tell how many ranks it starts",
                                "add --num_gpus N (on CPU too: it is the number of processes)")
        a.training_script, a.training_script_args = a.user_script, a.user_args
        nproc, several = int(a.num_gpus), a.num_nodes > 1 or bool(a.include or a.exclude)
    else:
        try:
            from accelerate.commands.launch import launch_command_parser
        except ImportError:
            raise WorkbookError("`accelerate launch` needs accelerate installed in this environment",
                                "install it (pip install -e '.[frameworks]'), or run its torchrun line") from None
        a = launch_command_parser().parse_args(rest)
        if a.num_processes is None:
            raise WorkbookError("`accelerate launch` without --num_processes: the workbook cannot tell how many ranks "
                                "it starts", "add --num_processes N (and --multi_gpu for several processes)")
        nproc, several = int(a.num_processes), (a.num_machines or 1) > 1
    if getattr(a, "no_python", False):
        raise WorkbookError("--no-python: each rank runs a program that is not Python, which the workbook cannot "
                            "record", "drop --no-python, or diagnose its logs afterwards with `doctor`")
    if several:
        raise WorkbookError("a launch command for several nodes",
                            "run the workbook on each node (notebook 05), or `attach --all` on each node while it runs")
    pos = len(rest) - len(a.training_script_args) - 1
    assert rest[pos] == a.training_script, (rest, pos)
    opts = [x for x in rest[:pos] if x not in ("-m", "--module")] if a.module else rest[:pos]
    program = (["-m"] if a.module else []) + [a.training_script, *a.training_script_args]  # as given: argv[0] too
    shim = [SHIM, "--log-dir", str(shim_log_dir), "--"]
    head = list(argv[:at])
    beside = Path(sys.executable).parent / head[0]
    if "/" not in head[0] and shutil.which(head[0]) is None and beside.exists():
        head[0] = str(beside)  # `torchrun` of the environment the workbook runs in, when the shell has not put it on PATH
    return UserLaunch([*head, *opts, *shim, *program], nproc, program)
