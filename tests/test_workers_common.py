"""Backend choice and the NCCL path; the GPU tests skip cleanly on machines without GPUs."""
import pytest
from conftest import has_gpus

from nbhelpers.scenarios.probe import probe
from nbhelpers.workers.common import pick_backend


def test_backend_is_gloo_without_gpus_and_nccl_with_them(monkeypatch):
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert pick_backend("auto") == ("nccl" if has_gpus(2) else "gloo")
    assert pick_backend("gloo") == "gloo"


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpus(2), reason="needs 2 CUDA GPUs (one per rank) for the nccl backend")
def test_probe_on_gpus_uses_nccl_and_logs_nccl_debug(runs_dir):
    res = probe(2, timeout=30, size_mb=64, env={"NCCL_DEBUG": "INFO"}, live=False)
    assert res.ok, res.verdict
    assert {e.get("backend") for e in res.events if e["stage"] == "rendezvous"} == {"nccl"}
    assert "NCCL INFO" in res.log(0, tail=None)


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpus(2), reason="needs 2 CUDA GPUs (one per rank) for the nccl backend")
def test_stalled_rank_on_nccl_is_the_culprit(runs_dir):
    res = probe(2, timeout=10, size_mb=16, fault="stall", stall=60, live=False)
    assert res.culprit == 1, res.verdict


@pytest.mark.integration
def test_a_short_timeout_starts_once_every_rank_is_ready(runs_dir):
    """Rank 1 starts 4 s late; the 1 s timeout still strikes where the fault is (rank 1 skipping a collective),
    not in init_process_group (where it struck, as DistStoreError: wait timeout, before start-up had its own)."""
    from pathlib import Path

    from nbhelpers.runtime.launcher import launch

    script = Path(__file__).parent / "data" / "scripts" / "late_start.py"
    res = launch(str(script), ["4", "1"], nproc=2, timeout=60, live=False)
    log0 = res.log(0, tail=None)
    assert "first all_reduce passed" in log0 and "DistStoreError" not in log0, log0[-2000:]
    assert "Timed out waiting 1000ms" in log0, log0[-2000:]
    ended = [ln for ln in log0.splitlines() if "second all_reduce ended after" in ln]
    assert ended and float(ended[0].split("after ")[1].split(" s")[0]) < 4, ended  # its own 1 s, not rank 1's lateness
    assert res.culprit == 1, res.verdict
