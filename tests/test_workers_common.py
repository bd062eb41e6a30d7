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
