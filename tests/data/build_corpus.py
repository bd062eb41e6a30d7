"""Build the classifier's corpus splits from the collected real snippets (kept with their sources).

    python tests/data/build_corpus.py /path/to/collected/*.jsonl            # rebuild both splits
    python tests/data/build_corpus.py --append /path/to/more/*.jsonl       # add to the splits as they are
    python tests/data/build_corpus.py --resplit                            # move threads to the side of CUTOFF

Inputs: JSON lines as collected from public threads (id, source, project, date, label, secondary, log, notes);
the snippets already in tests/data (heldout, fresh) go to the training split, since the rules were tuned on them.
Split by date: threads from CUTOFF on form the test split (wordings of recent releases nothing was tuned on),
older ones the training split; both snippets of a thread always land on the same side.  The shared dev set
is never copied in.  Writes nbhelpers/data/corpus/train.jsonl (the model learns from it at run time) and
tests/data/corpus_test.jsonl (measured by tests/test_model.py and bench/bench_classify.py only).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
FIELDS = ("id", "source", "project", "date", "label", "secondary", "log", "notes")
# 2024 until the stop of 2026-11-25; then 2025: the 2024 threads, measured (never read) by ten earlier changes,
# went to training, and the test split became the threads from 2025 on plus newly collected ones (README.md)
CUTOFF = "2025"


TRAIN = REPO / "nbhelpers" / "data" / "corpus" / "train.jsonl"
TEST = HERE / "corpus_test.jsonl"
DEV = REPO.parent / "shared" / "corpus" / "real_failure_logs.dev.jsonl"


def rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def dev_ids() -> set[str]:
    return {r["id"] for r in rows(DEV)} if DEV.exists() else set()


def first_dates(snippets: list[dict]) -> dict[str, str]:
    """Each thread's earliest date: a thread's side is decided by it, so no thread is on both sides."""
    first: dict[str, str] = {}
    for r in snippets:
        d = r.get("date") or ""
        first[r["id"]] = min(first.get(r["id"], d), d)
    return first


def write(train: list[dict], test: list[dict]) -> None:
    TRAIN.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in train))
    TEST.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in test))


def main(paths: list[str]) -> None:
    dev = dev_ids()
    old = rows(HERE / "real_failure_logs.heldout.jsonl") + rows(HERE / "real_failure_logs.fresh.jsonl")
    new = [r for p in paths for r in rows(Path(p))]
    first_date = first_dates(new)
    seen, train, test = set(), [], []
    tuned = {r["id"] for r in old}
    for r in old:
        train.append({**{k: r.get(k) for k in FIELDS}, "project": r["id"].split("#")[0], "split_from": "tuned"})
        seen.add((r["id"], r["log"]))
    for r in new:
        if r["id"] in dev or (r["id"], r["log"]) in seen or not r.get("log", "").strip():
            continue
        seen.add((r["id"], r["log"]))
        (test if first_date[r["id"]] >= CUTOFF and r["id"] not in tuned else train).append({k: r.get(k) for k in FIELDS})
    write(train, test)
    print(f"train {len(train)} (of which {len(old)} tuned on), test {len(test)}")


def append(paths: list[str]) -> None:
    """Add newly collected snippets to the splits as they stand: a thread already in a split stays on its side,
    a new thread goes to the side of its date; the dev set's threads and repeated snippets are left out."""
    train, test = rows(TRAIN), rows(TEST)
    dev = dev_ids()
    side = {**{r["id"]: train for r in train}, **{r["id"]: test for r in test}}
    seen = {(r["id"], r["log"]) for r in train + test}
    new = [r for p in paths for r in rows(Path(p))]
    first_date = first_dates(new)
    added = {"train": 0, "test": 0}
    for r in new:
        if r["id"] in dev or (r["id"], r["log"]) in seen or not r.get("log", "").strip():
            continue
        seen.add((r["id"], r["log"]))
        dest = side.setdefault(r["id"], test if first_date[r["id"]] >= CUTOFF else train)
        dest.append({k: r.get(k) for k in FIELDS})
        added["test" if dest is test else "train"] += 1
    write(train, test)
    print(f"added {added['train']} to train ({len(train)}), {added['test']} to test ({len(test)})")


def resplit() -> None:
    """Put every thread of the splits as they stand on the side of CUTOFF by its earliest date (the snippets the
    rules were first tuned on stay in training)."""
    everything = rows(TRAIN) + rows(TEST)
    first_date = first_dates(everything)
    in_train = [r.get("split_from") == "tuned" or first_date[r["id"]] < CUTOFF for r in everything]
    write([r for r, t in zip(everything, in_train) if t], [r for r, t in zip(everything, in_train) if not t])
    print(f"train {sum(in_train)}, test {len(everything) - sum(in_train)}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--append"]:
        append(sys.argv[2:])
    elif sys.argv[1:2] == ["--resplit"]:
        resplit()
    else:
        main(sys.argv[1:])
