"""The learned second opinion, measured on the test split only (real snippets from 2025 on, tuned on by nothing)."""
import json
from pathlib import Path

import pytest
from conftest import SHARED

from nbhelpers.diagnosis import model
from nbhelpers.runtime import learned
from nbhelpers.runtime.learned import classify, second_opinion

TEST = Path(__file__).resolve().parent / "data" / "corpus_test.jsonl"


def rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.fixture(scope="module")
def answers():
    """Per test snippet: its label, the rules' answer and the answer with the model behind them."""
    out = []
    for r in rows(TEST):
        found = classify(r["log"])
        rules = [f for f in found if f.by == "rules"]
        out.append((r["label"], rules[0].category if rules else None, found[0].category if found else None))
    return out


def test_the_splits_are_apart_from_each_other_and_from_the_dev_set():
    train, test = rows(model.TRAIN), rows(TEST)
    assert len(train) >= 400 and len(test) >= 150
    assert not {r["id"] for r in train} & {r["id"] for r in test}
    assert all((r["date"] or "") >= "2025" for r in test) and all(r["source"].startswith("http") for r in train + test)
    dev = SHARED / "corpus" / "real_failure_logs.dev.jsonl"
    if dev.exists():
        assert not {r["id"] for r in rows(dev)} & {r["id"] for r in train + test}
    assert set(r["label"] for r in test) == set(r["label"] for r in train)


def test_top1_on_the_test_split_holds_its_floor_and_the_model_adds_to_the_rules(answers):
    failures = [a for a in answers if a[0] != "healthy"]
    rules = sum(label == got for label, got, _ in failures) / len(failures)
    both = sum(label == got for label, _, got in failures) / len(failures)
    # measured on the test split of threads from 2025 on (507 failures): 0.755 rules alone, 0.815 with the model.
    # (297 failures gave 0.811 / 0.862; the batches added since, collected for the weakest categories and the newest
    # threads, were 0.32 to 0.63 / 0.58 to 0.70 when they arrived: tests/data/README.md)
    assert both >= 0.80 and both > rules + 0.03, (rules, both)


def test_the_model_never_speaks_on_healthy_snippets(answers):
    assert all(got_rules == got_both for label, got_rules, got_both in answers if label == "healthy")


def test_no_silence_the_error_lines_and_closest_cases_when_nothing_is_confident():
    # (raised inside a library: an exception raised in the user's own code would be that rank's own error)
    text = ("Traceback (most recent call last):\n  File \"/opt/conda/lib/python3.10/site-packages/somelib/core.py\", "
            "line 3, in run\n"
            "RuntimeError: something strange happened while bootstrapping the communicator: peer list empty\n")
    assert classify(text) == []
    s = second_opinion(text)
    assert s["error_lines"][-1].startswith("RuntimeError: something strange") and len(s["top2"]) == 2
    assert s["closest"] and all(c["source"].startswith("https://") for c in s["closest"]) and s["next"]


def test_the_fitted_model_is_cached_under_its_key(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    learned._model.cache_clear()
    try:
        label, p = learned.predict("NCCL WARN Connect to 10.0.0.2<43211> failed : No route to host", 1)[0]
        assert (tmp_path / "nbhelpers").is_dir() and list((tmp_path / "nbhelpers").glob("model-*.pkl"))
        learned._model.cache_clear()
        assert learned.predict("NCCL WARN Connect to 10.0.0.2<43211> failed : No route to host", 1)[0] == (label, p)
    finally:
        learned._model.cache_clear()
