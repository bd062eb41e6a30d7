"""Slow or stuck: real timeout lines from public issues (sources in tests/data/watchdog_lines.json)."""
import json
from pathlib import Path

import pytest

from nbhelpers.diagnosis.watchdog import parse_watchdog, slow_or_stuck, timeout_ms
from nbhelpers.views.tables import watchdog_table

CASES = json.loads((Path(__file__).parent / "data" / "watchdog_lines.json").read_text())


@pytest.mark.parametrize("case", CASES, ids=[c["source"][:60] for c in CASES])
def test_every_real_wording_parses(case):
    lines = parse_watchdog(case["text"])
    assert lines, case["source"]
    got = lines[0].to_dict()
    assert {k: got.get(k) for k in case["expect"]} == case["expect"]


def test_the_600s_eval_allreduce_timeout_is_stuck_with_the_arithmetic_shown():
    v = slow_or_stuck(CASES[0]["text"], world=8, busbw_gbs=10.0)
    assert v.verdict == "stuck"
    assert v.expected_s == pytest.approx(0.327, abs=0.001) and v.margin > 1000
    text = str(v)
    assert "467,019,003 elements x 4 B" in text and "1.75" in text and "600 s" in text
    assert any("dtype" in n for n in v.notes)  # the line gives none: the assumption is said


def test_a_slow_wire_is_called_slow():
    # the same 1.74 GiB at 0.005 GB/s (a crippled link) takes ~650 s: the timeout can be the wire's fault
    v = slow_or_stuck(CASES[0]["text"], world=8, busbw_gbs=0.005)
    assert v.verdict == "slow" and v.margin < 1
    mid = slow_or_stuck(CASES[0]["text"], world=8, busbw_gbs=0.2)
    assert mid.verdict == "suspicious"


def test_dtype_changes_the_size():
    f32 = slow_or_stuck(CASES[0]["text"], world=8, busbw_gbs=10.0)
    bf16 = slow_or_stuck(CASES[0]["text"], world=8, busbw_gbs=10.0, dtype="bfloat16")
    assert bf16.expected_s == pytest.approx(f32.expected_s / 2)


def test_wording_without_sizes_says_what_size_would_be_needed():
    v = slow_or_stuck(CASES[4]["text"], world=8, busbw_gbs=10.0)
    assert v.verdict == "stuck" and "GiB" in v.arithmetic[0]


def test_ranks_at_different_seqnums_point_at_a_desync():
    v = slow_or_stuck(CASES[5]["text"], world=8, busbw_gbs=10.0)
    assert any("different SeqNums" in n for n in v.notes)
    assert any("noticed late" in n for n in v.notes)  # ran for 25625 s against 1800 s


def test_gloo_line_names_no_peer_and_says_so():
    v = slow_or_stuck(CASES[-1]["text"], world=2, busbw_gbs=1.0)
    assert v.line.kind == "gloo" and any("monitored_barrier" in n for n in v.notes)


def test_watchdog_follow_up_line_is_read():
    df = watchdog_table(CASES[1]["text"])
    assert df.attrs["at_work"] == [(1580, 1582, 1579)]
    v = slow_or_stuck(CASES[1]["text"], world=8, busbw_gbs=10.0)
    assert any("last enqueued 1582" in n for n in v.notes)


def test_nothing_to_parse_and_bad_inputs():
    assert slow_or_stuck("all good here", world=2, busbw_gbs=1).verdict == "unknown"
    with pytest.raises(ValueError):
        slow_or_stuck(CASES[0]["text"], world=1, busbw_gbs=1)
    with pytest.raises(ValueError):
        slow_or_stuck(CASES[0]["text"], world=2, busbw_gbs=0)


def test_timeout_ms_reads_gloo_store_and_nccl_wordings():
    for case in CASES:  # real watchdog and gloo lines, each with the timeout it gives
        if case["expect"].get("timeout_ms"):
            assert timeout_ms(case["text"]) == case["expect"]["timeout_ms"], case["source"]
    store = (Path(__file__).parent / "data" / "runs" / "user-wrong-world" / "rank1.log").read_text()
    assert timeout_ms(store) == 10000  # DistStoreError: wait timeout after 10000ms, keys: ...
    assert timeout_ms("RuntimeError: Connection closed by peer") is None
