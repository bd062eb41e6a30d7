import os
import sys
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"


def workbook_processes(marker: str) -> list[psutil.Process]:
    """Live processes of workbook runs under ``marker`` (a test's private runs dir), ranks included."""
    from nbhelpers.procs import find_runs

    return find_runs(marker)


@pytest.fixture
def runs_dir(tmp_path, monkeypatch):
    """Each test gets its own runs dir; afterwards no process may still mention it."""
    d = tmp_path / "runs"
    monkeypatch.setenv("NBH_RUNS_DIR", str(d))
    yield d
    left = workbook_processes(str(d))
    for p in left:
        p.kill()
    assert not left, f"processes left behind: {[p.cmdline() for p in left if p.is_running()]}"


@pytest.fixture
def python():
    return sys.executable


def has_gpus(n: int = 1) -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available() and torch.cuda.device_count() >= n


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0
