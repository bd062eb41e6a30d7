"""run_all on purpose-made notebooks: executed copies, one self-contained report.html, summary.json;
a failing notebook still yields a report that says where; no planted secret reaches any output file."""
import html
import json
import re

import nbformat
import pytest
from conftest import CLI_SECRET, PLANTED, URL_PASSWORD

from nbhelpers.report.build import declared_parameters, failure_of, static_widget
from nbhelpers.report.recording import MIMETYPE, collect, outcome, payloads


def test_declared_parameters(tmp_path):
    from conftest import make_notebook

    nb = make_notebook(tmp_path / "x.ipynb", "print(1)", params="N = 1\nSIZE_MB = 1.0  # comment\n# X = 2")
    assert declared_parameters(nb) == {"N", "SIZE_MB"}


def test_summary_says_what_failed_where(planted_report):
    out, _ = planted_report
    summary = json.loads((out / "summary.json").read_text())
    books = {b["notebook"]: b for b in summary["notebooks"]}
    assert books["01_incident.ipynb"]["status"] == "ok" and books["02_fails.ipynb"]["status"] == "failed"
    assert not summary["ok"] and summary["verdict"] == "1 of 2 notebook(s) failed"
    fail = books["02_fails.ipynb"]["failure"]
    executed = nbformat.read(out / "02_fails.ipynb", as_version=4)
    assert executed.cells[fail["cell"]].source.startswith("import os\nraise RuntimeError")
    assert fail["ename"] == "RuntimeError" and fail["execution_count"] is not None
    first = summary["incidents"][0]
    assert first["notebook"] == "02_fails.ipynb" and first["category"] == "rendezvous_timeout", first
    assert first["candidates"][0] == {"category": "rendezvous_timeout", "confidence": first["candidates"][0]["confidence"],
                                      "by": "rules"} and 0.5 <= first["candidates"][0]["confidence"] <= 0.97
    assert first["link"] == f"#cell-id=02_fails-c{fail['cell']}"
    run = next(i for i in summary["incidents"] if i["kind"] == "run")
    assert run["rank"] == 1 and run["node"] == summary["fingerprint"]["hostname"], run
    assert any("auth failed" in e for e in run["evidence"]), run["evidence"]
    # a RuntimeError of the script's own: the log classifier names nothing, or (when torchrun had to stop the other
    # rank and says so) the rank's own error, never the launcher's report of it
    assert run["category"] == "rank_error", run
    assert [c["category"] for c in run["candidates"]][:1] in ([], ["rank_error"]), run
    records = books["01_incident.ipynb"]["records"]
    assert [r["kind"] for r in records] == ["run", "value"] and records[1]["value"] == 42
    assert records[0]["outcome"] == "failed" and records[0]["culprit_rank"] == 1
    executed = nbformat.read(out / "01_incident.ipynb", as_version=4)  # parameters injected, outputs kept
    assert "N = 3" in "".join(c.source for c in executed.cells)
    assert books["01_incident.ipynb"]["slowest_cells"][0]["seconds"] > 0


def test_report_is_one_self_contained_file_summary_first(planted_report):
    out, _ = planted_report
    assert sorted(p.name for p in out.iterdir()) == ["01_incident.ipynb", "02_fails.ipynb", "report.html", "summary.json"]
    text = (out / "report.html").read_text().replace('"', "'")  # nbconvert rewrites attribute quotes
    assert text.index("What failed") < text.index("id='nb-01_incident'") < text.index("id='nb-02_fails'")
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=['\"]?https?:", text), "report loads something from outside"
    assert text.count("* plotly.js v") == 1 and text.count("class='nbh-plotly'") == 2
    assert re.search(r"<textarea readonly[^>]*>pasted ", text) and re.search(r"<button disabled[^>]*>Diagnose</button>", text)
    fail = json.loads((out / "summary.json").read_text())["notebooks"][1]["failure"]
    assert f"id='cell-id=02_fails-c{fail['cell']}'" in text  # the summary's link has a target
    assert "papermill-error-cell" not in text
    assert "the log's top 2: <code>rendezvous_timeout</code> 0." in text


def test_planted_secrets_reach_no_output_file(planted_report):
    out, runs = planted_report
    secrets = list(PLANTED.values()) + [URL_PASSWORD, CLI_SECRET]
    raw = "\n".join(p.read_text(errors="replace") for p in runs.rglob("*.log"))
    assert all(s in raw for s in secrets), "the run did not print the planted secrets: the test would prove nothing"
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) == 4
    for path in files:
        data = path.read_text(errors="replace")
        for s in secrets:
            for form in {s, html.escape(s), json.dumps(s)[1:-1]}:
                assert form not in data, f"{s!r} leaked into {path.name}"
    assert "&lt;redacted&gt;" in (out / "report.html").read_text()


def test_record_outcomes_and_values():
    assert outcome("ok", None) == "ok" and outcome("failed", None) == "failed"
    assert outcome("failed", "fail") == "reproduced" and outcome("ok", "fail") == "unexpected"
    assert outcome("timeout", "ok") == "unexpected"
    with pytest.raises(ValueError):
        outcome("ok", "maybe")
    assert payloads("busbw", 1.5) == [{"kind": "value", "label": "busbw", "value": 1.5}]
    with pytest.raises(TypeError):
        payloads(object())
    cell = nbformat.v4.new_code_cell("x")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/plain": "r", MIMETYPE: {"records": [{"kind": "value"}]}})]
    assert collect(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("m"), cell])) == [{"kind": "value", "cell": 1}]


def test_static_widget_shows_last_state():
    state = {"box": {"model_name": "VBoxModel", "state": {"children": ["IPY_MODEL_t", "IPY_MODEL_b", "IPY_MODEL_h"]}},
             "t": {"model_name": "TextareaModel", "state": {"value": "a <log>"}},
             "b": {"model_name": "ButtonModel", "state": {"description": "Go"}},
             "h": {"model_name": "HTMLModel", "state": {"value": "<b>answer</b>"}}}
    out = static_widget("box", state)
    assert "a &lt;log&gt;</textarea>" in out and "<button disabled>Go</button>" in out and "<b>answer</b>" in out
    assert "not saved" in static_widget("missing", state)


def test_failure_of_ignores_expected_exceptions():
    ok = nbformat.v4.new_code_cell("raise X", metadata={"tags": ["raises-exception"]})
    ok.outputs = [nbformat.v4.new_output("error", ename="X", evalue="boom", traceback=["\x1b[31mX\x1b[0m: boom"])]
    bad = nbformat.v4.new_code_cell("raise Y")
    bad.outputs = [nbformat.v4.new_output("error", ename="Y", evalue="bang", traceback=["\x1b[31mY\x1b[0m: bang"])]
    f = failure_of(nbformat.v4.new_notebook(cells=[ok, bad]))
    assert f["cell"] == 1 and f["traceback"] == "Y: bang"


def test_a_run_recorded_twice_is_one_record():
    # notebook 01 shows the faulty run in detail, then again as one row of the fault gallery
    run = {"kind": "run", "label": "probe-stall", "log_dir": "/runs/20261123-probe-stall-1", "status": "failed"}
    other = {**run, "label": "probe-exit", "log_dir": "/runs/20261123-probe-exit-2"}
    cells = [nbformat.v4.new_code_cell(outputs=[nbformat.v4.new_output("display_data", {MIMETYPE: {"records": recs}})])
             for recs in ([run], [dict(run, label="probe [stall]"), other])]
    found = collect(nbformat.v4.new_notebook(cells=cells))
    assert [(r["label"], r["cell"]) for r in found] == [("probe-stall", 0), ("probe-exit", 1)]
