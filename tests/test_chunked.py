"""Chunked all_reduce: the plan, the refusal of non-contiguous tensors, and real worlds."""
import pytest
import torch

from nbhelpers.chunked import ChunkTimeout, PeakRSS, chunk_plan, chunked_all_reduce
from nbhelpers.scenarios.chunking import compare_chunking, missing_rank


def test_chunk_plan_covers_every_element_once():
    plan = chunk_plan(10, 4, 12)  # 3 elements per chunk
    assert plan == [(0, 3), (3, 6), (6, 9), (9, 10)]
    assert chunk_plan(10, 4, None) == [(0, 10)] and chunk_plan(10, 4, 0) == [(0, 10)]
    assert chunk_plan(0, 4, 8) == []


def test_non_contiguous_tensor_is_refused_not_silently_copied():
    t = torch.ones(4, 6).t()  # flatten() of this is a copy: a flatten()-based version's result would land in it
    with pytest.raises(ValueError, match="contiguous"):
        chunked_all_reduce(t, 8)


def test_peak_rss_sees_an_allocation():
    with PeakRSS() as mem:
        x = torch.ones(32 << 20, dtype=torch.uint8)  # 32 MiB, touched
        x.add_(1)
        del x
    assert mem.extra_bytes > 16 << 20


@pytest.mark.integration
def test_chunked_matches_whole_and_is_measured(runs_dir):
    table = compare_chunking(4, (1,), reps=2, live=False)
    assert list(table.index) == ["whole", "chunked 1 MiB"]
    assert (table["check"] == "ok").all()
    assert table.loc["chunked 1 MiB", "calls"] == 4 and table.loc["whole", "calls"] == 1
    assert (table["median ms"] > 0).all() and table.loc["whole", "time / whole"] == 1.0


@pytest.mark.integration
def test_a_missing_rank_hangs_the_first_chunk_until_its_bound(runs_dir):
    res = missing_rank(4, 1, chunk_timeout=2, stall=60, live=False)
    assert res.status == "failed" and res.culprit == 1, res.verdict
    fail = res.stages.query("rank == 0 and stage == 'chunked 1 MiB'").iloc[0]
    assert fail["status"] == "fail" and "chunk 1/4" in fail["error"]
    assert issubclass(ChunkTimeout, RuntimeError)  # a victim-kind error: the culprit logic looks past it
    assert 1.8 < fail["seconds"] < 10  # bounded by the chunk timeout, not the 60 s the rank stays away


@pytest.mark.skipif(not __import__("conftest").has_gpus(2), reason="needs 2 GPUs for an NCCL world")
def test_chunked_on_nccl(runs_dir):
    table = compare_chunking(16, (4,), reps=2, live=False)  # the worker picks nccl when each rank has a GPU
    assert (table["check"] == "ok").all()
