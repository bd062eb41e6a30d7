"""workers.exit_abort for real: a job whose every step ran fails because rank 0 never destroyed its group."""
import pytest

from nbhelpers.runtime.launcher import launch


@pytest.mark.integration
def test_a_rank_that_ends_without_destroy_aborts_in_shutdown_and_is_named_for_it(runs_dir):
    res = launch("exit_abort", nproc=2, timeout=90, live=False)
    assert res.status == "failed", res.verdict
    rec = res.records[0]
    assert rec["signal"] == "SIGABRT" and rec["returncode"] == -6, rec
    assert "terminate called without an active exception" in res.logs[0]
    assert any(e.get("rank") == 0 and e["stage"] == "done" for e in res.events)  # its script had ended
    assert res.verdict.kind == "exit_without_destroy" and res.culprit == 0, res.verdict
    assert "destroy_process_group" in res.verdict.reason and "nothing hung" in res.verdict.reason
    top = res.findings[0]
    assert top.category == "exit_without_destroy", res.findings
    assert any("destroy_process_group" in r for r in top.remedies)


@pytest.mark.integration
def test_waiting_on_the_work_and_destroying_the_group_ends_cleanly(runs_dir):
    res = launch("exit_abort", ["--destroy"], nproc=2, timeout=90, live=False)
    assert res.ok, res.verdict
    assert {r: rec["returncode"] for r, rec in res.records.items()} == {0: 0, 1: 0}
    assert "terminate called" not in res.logs[0] + res.logs[1]
