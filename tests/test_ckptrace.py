"""The checkpoint race and the rank-0-only collective (a hang after rank 0 loads a checkpoint), reproduced by
real torchrun worlds."""
import pytest

from nbhelpers.views import incidents
from nbhelpers.runtime.learned import classify
from nbhelpers.scenarios import ckptrace, torncauses


@pytest.mark.integration
def test_racy_fails_and_every_fix_holds_in_the_same_run(runs_dir):
    res = ckptrace.race(size_mb=30, trials=3)
    assert res.ok, res.verdict
    table = incidents.variant_table(res)
    assert table.loc["racy", "failures"] >= 2, table  # torn reads in (nearly) every trial
    fixes = table.drop(index="racy")
    assert (fixes["failures"] == 0).all(), table
    assert set(fixes.index) == set(ckptrace.VARIANTS) - {"racy"}
    errors = incidents.error_table(res)
    assert not errors.empty and (errors["variants"] == "racy").all(), errors
    assert (errors["classified as"] == "checkpoint_corrupt").all(), errors
    fig = incidents.race_timeline(res, trial=0)
    names = {t.name for t in fig.data}
    assert {"write (rank 0)", "read failed", "read ok"} <= names
    assert not any((res.log_dir / "ckpt-race").glob("*")), "checkpoint files left behind"
    row = torncauses.race_cause(res)
    assert row["verdict"] == "being written" and row["category"] == "checkpoint_corrupt", row


@pytest.mark.integration
def test_rank0_only_collective_names_rank0(runs_dir):
    res = ckptrace.rank0_collective(timeout=3)
    assert res.status == "failed"
    assert res.culprit == 0 and res.verdict.kind == "unmatched", res.verdict
    assert res.category == "collective_mismatch", res.findings  # a collective only rank 0 calls
    assert any("Timed out waiting 3000ms" in (e.get("error") or "") for e in res.events)


def test_the_classifier_knows_the_torn_read_messages():
    for text in ["Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n    raise EOFError\nEOFError",
                 "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory",
                 "RuntimeError: PytorchStreamReader failed reading zip archive: not a ZIP archive",
                 "[rank1]: OSError: [Errno 22] Invalid argument\n  super().__init__(torch._C.PyTorchFileReader(name))"]:
        assert classify(text)[0].category == "checkpoint_corrupt", text


def test_a_peer_lost_after_a_timeout_is_not_a_killed_rank():
    """The rank-0-only-collective hang when rank 1 times out first: rank 0 then loses its peer; the cause is the
    timeout."""
    from nbhelpers.diagnosis.classify import classify_logs

    closed = ("[rank0]: RuntimeError: [gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:10645. "
              "This is typically caused by a remote worker crashing. Check the logs of the remote worker.")
    timeout = "[rank1]: RuntimeError: [unbound_buffer.cc:78] Timed out waiting 3000ms for recv operation to complete"
    assert classify_logs({0: closed, 1: timeout})[0].category == "collective_timeout"
    assert classify_logs({0: closed, 1: "exiting with code 3"})[0].category == "worker_killed"
