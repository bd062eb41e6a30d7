"""The 'unmatched' rule on the two orders seen in real runs of the hang after rank 0 loads a checkpoint
(a collective inside rank-0-only code; rank 0 or rank 1 times out first)."""
from nbhelpers.diagnosis.culprit import RankView, find_culprit

SEND = "RuntimeError: [.../unbound_buffer.cc:129] Timed out waiting 3000ms for send operation to complete"
RECV = "RuntimeError: [.../unbound_buffer.cc:78] Timed out waiting 3000ms for recv operation to complete"
CLOSED = "RuntimeError: [.../pair.cc:553] Connection closed by peer [127.0.0.1]:10645. GLHF!"


def ev(stage, status, t, **kw):
    return {"stage": stage, "status": status, "t": t, **kw}


def views(rank0_error, rank0_t, rank1_t, rank0_stack=""):
    r0 = [ev("save", "running", 0.0), ev("save", "ok", 0.1), ev("load", "running", 0.11),
          ev("load", "fail", rank0_t, error=rank0_error)]
    r1 = [ev("save", "running", 0.0), ev("save", "ok", 0.1), ev("load", "running", 0.101), ev("load", "ok", 0.102),
          ev("train_step", "running", 0.103), ev("train_step", "fail", rank1_t, error=RECV)]
    return [RankView(0, r0, {"returncode": 1, "end": rank0_t + 0.5}, "", rank0_stack),
            RankView(1, r1, {"returncode": 1, "end": rank1_t + 0.5}, "")]


def test_rank0_times_out_first():
    v = find_culprit(views(SEND, 3.10, 3.11), "failed")
    assert v.culprit == 0 and v.kind == "unmatched", v
    assert "inside load" in v.reason and "if rank == 0" in v.reason


def test_rank1_times_out_first_and_rank0_then_loses_its_peer():
    v = find_culprit(views(CLOSED, 3.12, 3.10), "failed")
    assert v.culprit == 0 and v.kind == "unmatched", v
    assert "rank 1 then timed out in train_step" in v.reason


def test_a_rank_merely_slow_in_its_own_stage_stays_late():
    """Rank 0 still loading (no collective, no stack in torch.distributed) while rank 1 waits: plain 'late'."""
    vs = views(SEND, 3.12, 3.10)
    vs[0].events = vs[0].events[:3]  # still in load, no error
    vs[0].record = {"returncode": -15, "stop_signal": "SIGTERM", "end": 3.6}
    vs[0].stack = 'Thread 1 (idle): "MainThread"\n    load (torch/serialization.py:1500)\n'
    v = find_culprit(vs, "failed")
    assert v.culprit == 0 and v.kind == "late", v
