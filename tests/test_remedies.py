"""One name per failure, one remedy table, one advice for a run wherever it is shown."""
from test_culprit import RUNS

from nbhelpers.diagnosis.api import Failure, Rule, Verdict
from nbhelpers.diagnosis.categories import CATEGORIES
from nbhelpers.diagnosis.remedies import REMEDIES, advice
from nbhelpers.runtime.launcher import RunResult
from nbhelpers.runtime.runfolder import read_run_dir


def test_every_failure_is_a_category_and_has_remedies_and_so_does_every_rule():
    assert set(CATEGORIES) == {f.value for f in Failure}
    missing = [m for m in [*Failure, *Rule] if m is not Rule.NONE and not REMEDIES.get(m)]
    assert not missing, missing
    assert all(CATEGORIES[f].remedies == REMEDIES[f] for f in Failure)


def test_advice_puts_the_culprit_rule_first_and_never_repeats():
    got = advice(Rule.LATE, Failure.COLLECTIVE_TIMEOUT)
    assert got[0] == REMEDIES[Rule.LATE][0] and got[1:] == list(REMEDIES[Failure.COLLECTIVE_TIMEOUT])
    assert advice(Rule.NONE, None) == [] and advice("late", "collective_timeout") == got
    assert advice(Rule.UNKNOWN, None) == list(REMEDIES[Rule.UNKNOWN])


def test_a_rule_that_found_the_exact_cause_gives_its_remedy_alone():
    """The short-timeout rule's fix is a longer timeout; the collective timeout's general advice says a longer timeout
    rarely cures one: they are never shown together."""
    assert advice(Rule.SHORT_TIMEOUT, Failure.COLLECTIVE_TIMEOUT) == list(REMEDIES[Rule.SHORT_TIMEOUT])
    assert advice(Rule.RANK_ONLY_COLLECTIVE, Failure.COLLECTIVE_MISMATCH) == list(REMEDIES[Rule.RANK_ONLY_COLLECTIVE])
    assert len(advice(Rule.DIFFERENT_COLLECTIVES, Failure.COLLECTIVE_MISMATCH)) > 1


def test_the_verdict_kind_is_a_rule_and_serialises_as_its_name():
    v = Verdict(1, "late", "r")
    assert v.kind is Rule.LATE and v.to_dict()["culprit_kind"] == "late"


def test_cli_report_and_notebook_give_the_same_advice_for_one_recorded_run(tmp_path):
    from nbhelpers.diagnosis.culprit import find_culprit
    from nbhelpers.report.recording import run_payload
    from nbhelpers.scenarios.supervise import verdict_dict, verdict_text

    views, torchrun_log = read_run_dir(RUNS / "stall")
    res = RunResult("stall", "failed", 2, 10.0, RUNS / "stall", [], {v.rank: v.record for v in views}, [],
                    {v.rank: v.log for v in views}, {v.rank: v.stack for v in views}, torchrun_log,
                    find_culprit(views, "failed", torchrun_log=torchrun_log), 0.0)
    assert res.category == "collective_timeout" and res.remedies == advice(Rule.LATE, Failure.COLLECTIVE_TIMEOUT)
    assert verdict_dict(res)["remedies"] == res.remedies                      # the CLI's --json
    assert all(r in verdict_text(res) for r in res.remedies)                  # the CLI's text
    assert run_payload(res, expect="fail")["remedies"] == res.remedies        # the report
    assert all(r.replace("'", "&#x27;") in res._repr_html_() for r in res.remedies)  # the notebook
    # and the same top 2 of the log classifier, with its confidence, in each
    top2 = ", ".join(f"{c['category']} {c['confidence']:.2f}" for c in verdict_dict(res)["candidates"])
    assert top2.startswith("collective_timeout 0.") and run_payload(res)["candidates"] == verdict_dict(res)["candidates"]
    assert f"top 2: {top2})" in verdict_text(res) and f"top 2: {top2}." in res._repr_html_()
