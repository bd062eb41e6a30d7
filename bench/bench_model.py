"""The classifier on the test split (real snippets from threads of 2025 on, tuned on by nothing): per category, the rules
alone vs the rules with the learned model behind them, and the time per snippet of each (same run).

Beside them, for scale, a blind reading recorded once (``tests/data/corpus_test.blind.jsonl``, 2026-11-25): three
readers (helpers told the 14 categories, given only each snippet's text in a shuffled order, never its thread, its
label or this classifier) named the failure each snippet shows.  How often that matches the thread's conclusion is
about how far the text itself goes: the threads' labels come from what the users found out later."""
from __future__ import annotations

import collections
import json
import time
from pathlib import Path

TITLE = "Classifier on the test split: rules alone vs rules + model (top-1 per category; time per snippet)"
TEST = Path(__file__).resolve().parent.parent / "tests" / "data" / "corpus_test.jsonl"
BLIND = TEST.with_suffix(".blind.jsonl")


def blind_labels() -> dict[tuple[str, str], str]:
    """(thread id, sha1 of the snippet) -> what the blind reading named; empty without the file."""
    if not BLIND.exists():
        return {}
    return {(d["id"], d["log_sha1"]): d["blind"] for d in map(json.loads, BLIND.read_text().splitlines())}


def rows(reps: int) -> list[dict]:
    import hashlib

    from nbhelpers.runtime.learned import classify, predict

    data = [json.loads(x) for x in TEST.read_text().splitlines() if x.strip()]
    predict("warm up: load or train the model once")
    blind = blind_labels()
    n, rules_ok, both_ok, blind_ok = collections.Counter(), collections.Counter(), collections.Counter(), collections.Counter()
    t_rules = t_both = 0.0
    for r in data:
        t0 = time.perf_counter()
        found = classify(r["log"])
        t_both += time.perf_counter() - t0
        t0 = time.perf_counter()
        st_rules = classify(r["log"], model=False)
        t_rules += time.perf_counter() - t0
        n[r["label"]] += 1
        rules_ok[r["label"]] += (st_rules[0].category if st_rules else "healthy") == r["label"]
        both_ok[r["label"]] += (found[0].category if found else "healthy") == r["label"]
        blind_ok[r["label"]] += blind.get((r["id"], hashlib.sha1(r["log"].encode()).hexdigest()[:12])) == r["label"]
    out = [{"category": c, "snippets": n[c], "rules": f"{rules_ok[c]}/{n[c]}", "rules + model": f"{both_ok[c]}/{n[c]}",
            "blind reading (once)": f"{blind_ok[c]}/{n[c]}"} for c in sorted(n)]
    fails = [c for c in n if c != "healthy"]
    tot = sum(n[c] for c in fails)
    out.append({"category": "ALL failures (top-1)", "snippets": tot,
                "rules": f"{sum(rules_ok[c] for c in fails) / tot:.3f}",
                "rules + model": f"{sum(both_ok[c] for c in fails) / tot:.3f}",
                "blind reading (once)": f"{sum(blind_ok[c] for c in fails) / tot:.3f}"})
    out.append({"category": "ms per snippet", "snippets": len(data), "rules": f"{t_rules / len(data) * 1e3:.2f}",
                "rules + model": f"{t_both / len(data) * 1e3:.2f}", "blind reading (once)": "-"})
    return out

