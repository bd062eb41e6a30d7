"""The bandwidth sweep: a real small sweep, and the table from events."""
import pytest

from nbhelpers.scenarios.sweep import peak_busbw, sweep, sweep_table
from nbhelpers.views.incidents import sweep_chart
from nbhelpers.workers.sweep import parse_sizes


def test_sizes_argument():
    assert parse_sizes("4K:64K:4") == [4096, 16384, 65536]
    assert parse_sizes("1M,16M") == [1 << 20, 16 << 20]


def test_table_uses_the_slowest_rank_and_nccl_tests_formulas():
    evs = [{"rank": 0, "status": "ok", "op": "all_reduce", "bytes": 1 << 20, "times": [0.001, 0.001], "check": "ok"},
           {"rank": 1, "status": "ok", "op": "all_reduce", "bytes": 1 << 20, "times": [0.002, 0.002], "check": "ok"}]
    row = sweep_table(evs, 2).iloc[0]
    assert row["slowest rank"] == 1 and row["time ms"] == 2.0
    assert row["algbw GB/s"] == pytest.approx((1 << 20) / 0.002 / 1e9, abs=1e-3)
    assert row["busbw GB/s"] == row["algbw GB/s"]  # 2(n-1)/n = 1 for two ranks
    assert sweep_table(evs[:1], 2).iloc[0]["check"] == "MISSING"  # a rank that did not report


@pytest.mark.integration
@pytest.mark.parametrize("op", ["all_gather"])  # all_reduce runs in notebook 03 and the bench
def test_real_sweep_checks_every_size(runs_dir, op):
    t = sweep("64K:1M:4", op=op, iters=3, live=False)
    assert list(t["bytes"]) == [65536, 262144, 1 << 20]
    assert (t["check"] == "ok").all() and (t["ranks reporting"] == 2).all()
    assert (t["busbw GB/s"] > 0).all() and peak_busbw(t) > 0
    assert len(sweep_chart(t).data) == 3


@pytest.mark.skipif(not __import__("conftest").has_gpus(2), reason="needs 2 GPUs for an NCCL world")
def test_nccl_sweep_on_gpus(runs_dir):
    t = sweep("1M:16M:4", backend="nccl", iters=5, live=False)
    assert (t["check"] == "ok").all() and t.runs["sweep"].ok
    assert t.runs["sweep"].events[0].get("backend") == "nccl"
