"""The real causes of collective timeouts: culprit rule 0 on traced sequences, and real worlds."""
import pytest

from nbhelpers.diagnosis.culprit import RankView, desync, find_culprit
from nbhelpers.scenarios.desync import desync_scenario, guilty_rank
from nbhelpers.views.incidents import sequence_table
from nbhelpers.scenarios.timeouts import timeouts


def traced(rank, calls, t0=0.0):
    """Events as the desync worker writes them: one 'running' (and 'ok' but for the last) per collective."""
    evs = []
    for i, (call, op, shape) in enumerate(calls, 1):
        evs.append({"rank": rank, "stage": f"#{i} {call}", "status": "running", "t": t0 + i, "seq": i, "call": call,
                    "op": op, "shape": shape})
        if i < len(calls):
            evs.append({"rank": rank, "stage": f"#{i} {call}", "status": "ok", "t": t0 + i + 0.5})
    return evs


G, L, E = ("grads", "all_reduce", [1024]), ("loss", "all_reduce", [1]), ("ema", "broadcast", [16])
TIMEOUT_ERR = "RuntimeError: Timed out waiting 3000ms for recv operation to complete"


def fail(evs, err=TIMEOUT_ERR):
    last = evs[-1]
    return evs + [{**last, "status": "fail", "t": last["t"] + 3, "error": err}]


def test_the_rank_that_skipped_is_the_odd_one_out_even_if_it_raised_last():
    views = [RankView(0, fail(traced(0, [G, L, G, L]))), RankView(1, fail(traced(1, [G, L, G, G]), "x timed out")),
             RankView(2, fail(traced(2, [G, L, G, L])))]
    v = find_culprit(views, "failed")
    assert v.culprit == 1 and v.kind == "desync" and "#4" in v.reason


def test_an_extra_call_on_rank_zero_is_named():
    views = [RankView(0, fail(traced(0, [G, L, E]))), RankView(1, fail(traced(1, [G, L, G]))),
             RankView(2, fail(traced(2, [G, L, G])))]
    assert find_culprit(views, "failed").culprit == 0


def test_a_shape_difference_is_named_and_two_ranks_give_no_majority():
    g_small = ("grads", "all_reduce", [1000])
    views = [RankView(0, traced(0, [G, G])), RankView(1, traced(1, [G, g_small])), RankView(2, traced(2, [G, G]))]
    split = desync(views)
    assert (split["odd"], split["seq"]) == (1, 2)
    two = desync(views[:2])
    assert two["seq"] == 2 and two["odd"] is None  # with two ranks a skip and an extra call look alike
    v = find_culprit(views[:2], "failed")
    assert v.culprit is None and v.kind == "desync" and "no majority" in v.reason


def test_two_ranks_a_rank_that_failed_on_its_own_before_leaving_is_named():
    r0 = fail(traced(0, [G, L, ("eval metrics", "all_reduce", [4])]))
    r1 = traced(1, [G, L])
    r1.append({"rank": 1, "stage": "eval", "status": "fail", "t": 2.7, "error": "EvalFailed: rank 1: bad batch"})
    r1 += traced(1, [G, L, G])[-1:]
    r1[-1]["t"] = 2.8
    v = find_culprit([RankView(0, r0), RankView(1, r1)], "failed")
    assert v.culprit == 1 and v.kind == "desync" and "on its own" in v.reason


def test_a_rank_that_is_merely_behind_is_no_desync():
    views = [RankView(0, traced(0, [G, L, G])), RankView(1, traced(1, [G, L])), RankView(2, traced(2, [G, L, G]))]
    assert desync(views) is None  # only collectives every rank reached are compared
    assert find_culprit(views, "timeout", stop_time=10).kind != "desync"


@pytest.mark.integration
@pytest.mark.parametrize("name", ["skip", "rank0-only"])
def test_desync_scenarios_name_the_guilty_rank(runs_dir, name):
    res = desync_scenario(name, nproc=3, timeout=2, live=False)
    assert res.status == "failed"
    assert res.culprit == guilty_rank(name) and res.verdict.kind == "desync", res.verdict
    seq = sequence_table(res)
    assert list(seq.index) == [0, 1, 2] and seq.shape[1] >= 4


@pytest.mark.integration
def test_timeouts_measured(runs_dir):
    t = timeouts(pg_timeout=2.5, wait_timeout=0.8, monitored_timeout=1.0, alarm=0.5, live=False)
    took = t["control back after s"]
    assert 0.7 < took["work.wait(timeout=)"] < 2.0  # its own bound, shorter than the group's
    assert t.loc["monitored_barrier(timeout=)", "names the late rank"]
    assert took["signal.alarm around the call"] >= 2.3  # the alarm could only fire when the collective returned
    assert t.loc["signal.alarm around the call", "raised"] == "AlarmFired"  # and it hid the real error
    assert not t.loc["pg timeout (init/new_group timeout=)", "names the late rank"]
