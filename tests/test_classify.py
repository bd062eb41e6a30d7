"""The classifier on real text: users' pasted logs (shared corpus) and messages our own runs produce."""
import json
import socket
import subprocess
import sys
import textwrap

import pytest

from conftest import SHARED
from nbhelpers import classify as C
from nbhelpers.categories import CATEGORIES

DEV = SHARED / "corpus" / "real_failure_logs.dev.jsonl"
needs_dev = pytest.mark.skipif(not DEV.exists(), reason=f"shared corpus not found at {DEV}")


def dev_rows():
    return [json.loads(line) for line in DEV.read_text().splitlines() if line.strip()]


@needs_dev
def test_top1_accuracy_on_the_dev_set_and_every_category_recognised():
    rows = dev_rows()
    hits = {r["id"]: (C.classify(r["log"]) or [None])[0] for r in rows}
    correct = [r for r in rows if hits[r["id"]] and hits[r["id"]].category == r["label"]]
    assert len(correct) / len(rows) >= 0.9, [(r["id"], r["label"], hits[r["id"]]) for r in rows if r not in correct]
    assert {r["label"] for r in correct} == set(CATEGORIES)


@needs_dev
def test_findings_carry_evidence_explanation_and_remedies_naming_a_notebook():
    for r in dev_rows():
        f = C.classify(r["log"])[0]
        assert f.evidence and all(e.line >= 1 and e.text for e in f.evidence)
        lines = r["log"].splitlines()
        assert all(e.text[:60] in lines[e.line - 1] for e in f.evidence if not e.text.startswith(("two NCCL", "ranks are")))
        assert f.explanation and f.remedies and any("notebook 0" in x for x in f.remedies)
        assert 0 < f.confidence < 1


@needs_dev
def test_the_cause_outranks_its_consequences():
    by_id = {r["id"]: r for r in dev_rows()}
    # NCCL wraps a peer's CUDA OOM as an internal error; the OOM is the cause
    assert C.classify(by_id["NVIDIA/nccl#962"]["log"])[0].category == "oom_in_collective"
    # a watchdog timeout on one rank after another rank was SIGKILLed is the kill
    text = by_id["hiyouga/LlamaFactory#7396"]["log"] + "\n" + by_id["lmzpai/roboMamba#10"]["log"]
    found = [f.category for f in C.classify(text)]
    assert found[0] == "worker_killed" and "collective_timeout" in found


@needs_dev
def test_streaming_keeps_line_numbers_across_chunk_boundaries(monkeypatch):
    row = next(r for r in dev_rows() if r["id"] == "CompVis/stable-diffusion#93")
    filler = "Epoch 1: 10%|█         | 10/100 [00:01<00:09, 9.5it/s]\n" * 997
    text = filler + row["log"] + "\n" + filler
    whole = C.classify(text)[0]
    monkeypatch.setattr(C, "CHUNK", 4096)
    pieces = (text[i:i + 777] for i in range(0, len(text), 777))
    streamed = C.classify_stream(pieces)[0]
    assert whole.category == streamed.category == "checkpoint_corrupt"
    assert [e.line for e in whole.evidence] == [e.line for e in streamed.evidence]
    line = text.splitlines()[whole.evidence[0].line - 1]
    assert "PytorchStreamReader" in line or "zipfile" in line


def test_no_finding_on_healthy_text():
    healthy = textwrap.dedent("""\
        *****************************************
        Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded
        *****************************************
        [vm:0] torch 2.13.0+cpu, backend gloo, world 2
        Epoch 0: 100%|██████████| 50/50 [00:10<00:00, 4.9it/s, loss=0.31]
        """)
    assert C.classify(healthy) == []


def test_a_real_port_in_use_message_is_port_in_use():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        res = subprocess.run([sys.executable, "-c", "from datetime import timedelta\nfrom torch.distributed import TCPStore\n"
                              f"TCPStore('127.0.0.1', {port}, 1, True, timeout=timedelta(seconds=5))"],
                             capture_output=True, text=True, timeout=60)
    assert res.returncode != 0
    found = C.classify(res.stderr)
    assert found and found[0].category == "port_in_use", res.stderr[-800:]
    assert any(str(port) in e.text for e in found[0].evidence)


def test_every_rule_names_a_known_category_and_a_lowercase_needle():
    assert all(r.category in CATEGORIES and r.needle == r.needle.lower() for r in C.RULES)
    assert {r.category for r in C.RULES} == set(CATEGORIES)
