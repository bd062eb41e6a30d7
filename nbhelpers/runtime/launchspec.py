"""The one builder of torchrun command lines and of the environment the ranks start with.

The launcher's :class:`~nbhelpers.runtime.launcher.Run` and every command a user copies (one node,
per node, Slurm, ssh: :class:`~nbhelpers.runtime.multinode.Plan`) are made here, so what the notebook
prints is what its own runs execute, less the rank shim that records each rank for the workbook.
c10d rendezvous is the engine: ``--rdzv-backend c10d --rdzv-endpoint HOST:PORT --rdzv-id ID``.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

__all__ = ["LaunchSpec", "python_args", "child_env", "REPO_ROOT", "SHIM"]

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
