"""The main job and the incident report.

``python -m nbhelpers run-all`` (``make run``) executes every ``notebooks/[0-9]*.ipynb`` headless with
parameters fit for this machine and writes ``reports/<UTC timestamp>/``:

- each executed notebook (``.ipynb``, secrets redacted),
- ``report.html``: ONE self-contained file.  A summary first (what failed, on which rank and node,
  the classified cause, the remedy, evidence lines, links to the cell), then every notebook.  Plotly
  figures are drawn from their JSON with plotly.js inlined once; widgets are shown as a static
  equivalent of their last state; no script or stylesheet is loaded from the network,
- ``summary.json``: fingerprint, per-notebook status and failure location, recorded verdicts
  (``nb.record``), timings.

A notebook that fails still yields its executed copy up to the failing cell, and the report says
where it stopped and why.  Every string that reaches these files goes through :mod:`.redact`.
"""
from __future__ import annotations

import copy
import html
import json
import re
import sys
import time
from pathlib import Path

from nbhelpers.diagnosis.redact import REDACTED, redact_text
from nbhelpers.report.recording import MIMETYPE as RECORD_MIME
from nbhelpers.report.recording import collect as collect_records
from nbhelpers.runtime.launchspec import REPO_ROOT

NOTEBOOKS = REPO_ROOT / "notebooks"
CELL_TIMEOUT_S = 600
PLOTLY_MIME = "application/vnd.plotly.v1+json"
WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE_MIME = "application/vnd.jupyter.widget-state+json"
PLOTLY_BANNER = "* plotly.js v"
PLOTLY_SLOT = "/*nbhelpers:plotly.js*/"
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


# ---------------------------------------------------------------------------------------------- running
def reports_dir() -> Path:
    """Where reports go: $NBH_REPORTS_DIR, else ``reports/`` beside the package in a checkout, else ./reports."""
    import os

    if os.environ.get("NBH_REPORTS_DIR"):
        return Path(os.environ["NBH_REPORTS_DIR"])
    repo = REPO_ROOT
    return (repo / "reports") if (repo / "pyproject.toml").exists() else Path.cwd() / "reports"


def quick_parameters(gpus: int) -> dict:
    """Parameters fit for this machine (names a notebook lacks are ignored).

    On the CPU: none, since every notebook's own defaults are the small CPU set that the tests run under
    nbval (a shared name like TIMEOUT means different things in different notebooks).  With GPUs: more
    ranks and bigger tensors.
    """
    if gpus >= 2:
        return {"NPROC": min(gpus, 8), "SIZE_MB": 256.0, "SCALE": tuple(n for n in (1, 2, 4, 8) if n <= gpus)}
    return {}


def declared_parameters(path: Path) -> set[str]:
    import nbformat

    nb = nbformat.read(path, as_version=4)
    names = set()
    for cell in nb.cells:
        if "parameters" in cell.metadata.get("tags", []):
            names |= {ln.split("=")[0].strip() for ln in cell.source.splitlines() if "=" in ln and not ln.startswith("#")}
    return names


def _progress(tag: str, total: int):
    """nbclient hook: one line per code cell when stderr is not a terminal (CI logs), else nothing."""
    seen = [0]

    def hook(cell=None, **_):
        if cell is not None and cell.cell_type == "code":
            seen[0] += 1
            print(f"{tag} code cell {seen[0]}/{total}", file=sys.stderr, flush=True)
    return hook


def execute(nb_path: Path, executed: Path, params: dict, tag: str = "") -> dict:
    """Run one notebook with papermill; the entry says ok/failed, seconds, and papermill's error."""
    import nbformat
    import papermill as pm

    tty = sys.stderr.isatty()
    given = {k: v for k, v in params.items() if k in declared_parameters(nb_path)}
    code_cells = sum(c.cell_type == "code" for c in nbformat.read(nb_path, as_version=4).cells) + bool(given)
    hooks = {} if tty else {"on_cell_start": _progress(tag, code_cells)}
    entry = {"notebook": nb_path.name, "status": "ok", "error": None}
    t0 = time.time()
    try:
        pm.execute_notebook(str(nb_path), str(executed), cwd=str(nb_path.parent), kernel_name="python3",
                            parameters=given,
                            execution_timeout=CELL_TIMEOUT_S, progress_bar=tty, log_output=False, **hooks)
    except Exception as exc:  # papermill saves the notebook up to the failing cell first
        entry.update(status="failed", error=f"{type(exc).__name__}: {exc}"[-2000:])
    entry["seconds"] = round(time.time() - t0, 1)
    return entry


def _execute_one(nb_path: Path, out: Path, params: dict, tag: str) -> dict:
    print(f"{tag} running ...", file=sys.stderr, flush=True)
    entry = execute(nb_path, out / nb_path.name, params, tag)
    print(f"{tag} {entry['status']} in {entry['seconds']} s" + (f" ({entry['error'][:200]})" if entry["error"] else ""),
          file=sys.stderr, flush=True)
    return entry


def execute_all(books: list[Path], out: Path, params: dict, parallel: int = 3) -> list[tuple[Path, dict]]:
    """Execute every notebook, each in its own process and kernel, ``parallel`` at a time (three on 2 cores: at
    four, one run in four failed a self-check, a verdict that depends on timing under overload).  Their worlds share
    the machine except while one measures (a sweep, a speed A/B test): that one has it to itself
    (:mod:`nbhelpers.runtime.machine`).  Entries come back in the given order."""
    import multiprocessing
    import os
    import tempfile
    from concurrent.futures import ProcessPoolExecutor

    from nbhelpers.runtime import machine

    tags = {b: f"[{i}/{len(books)}] {b.stem}:" for i, b in enumerate(books, 1)}
    if parallel <= 1 or len(books) == 1:
        return [(b, _execute_one(b, out, params, tags[b])) for b in books]
    before = os.environ.get(machine.ENV)
    lock = Path(tempfile.gettempdir()) / f"nbh-machine-{os.getpid()}.lock"
    os.environ[machine.ENV] = before or str(lock)  # the kernels and their worlds inherit it
    try:
        with ProcessPoolExecutor(parallel, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = {b: pool.submit(_execute_one, b, out, params, tags[b]) for b in books}
            return [(b, futures[b].result()) for b in books]
    finally:
        if before is None:
            os.environ.pop(machine.ENV, None)
            for p in (lock, lock.with_name(lock.name + ".gate")):
                p.unlink(missing_ok=True)


def run_all(out_root: Path | None = None, notebooks: list[Path] | None = None, parameters: dict | None = None,
            parallel: int = 3) -> Path:
    """Execute the notebooks headless; write executed copies, report.html and summary.json. Returns the folder.
    The notebooks run ``parallel`` at a time (see :func:`execute_all`)."""
    import nbformat

    from nbhelpers.runtime.devices import gpu_count

    books = sorted(NOTEBOOKS.glob("[0-9]*.ipynb")) if notebooks is None else list(notebooks)
    if not books:
        from nbhelpers.errors import WorkbookError

        raise WorkbookError(f"no notebooks to run in {NOTEBOOKS}", "name them: python -m nbhelpers run-all path/to/nb.ipynb")
    gpus = gpu_count()
    params = {**quick_parameters(gpus), **(parameters or {})}
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    t_start = time.time()
    out = Path(out_root or reports_dir()) / stamp
    out.mkdir(parents=True, exist_ok=True)
    print(f"run-all: {len(books)} notebook(s), {'%d GPU(s)' % gpus if gpus else 'CPU only (gloo)'}, "
          f"parameters {params}; report in {out}", file=sys.stderr, flush=True)
    entries, executed_nbs = [], []
    for i, (nb_path, entry) in enumerate(execute_all(books, out, params, parallel), 1):
        executed = out / nb_path.name
        if executed.exists():
            node = nbformat.read(executed, as_version=4)
        else:  # papermill could not even start (bad JSON, no kernel): report the source notebook
            node = nbformat.read(nb_path, as_version=4)
        redact_notebook(node)
        nbformat.write(node, executed)
        entries.append(entry)
        executed_nbs.append(node)
        if entry["status"] != "ok":
            print(f"[{i}/{len(books)}] {nb_path.stem}: {describe_failure(failure_of(node))}", file=sys.stderr, flush=True)
    summary = build_summary(entries, executed_nbs, started=stamp, gpus=gpus, parameters=params)
    write_report(out, summary, executed_nbs)
    total = time.time() - t_start
    print(f"run-all: {summary['verdict']} in {total:.0f} s; report: {out / 'report.html'}", file=sys.stderr, flush=True)
    return out


# ---------------------------------------------------------------------------------------------- reading
def failure_of(nb) -> dict | None:
    """Where an executed notebook stopped: the first cell with an error output or papermill's failed mark."""
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or "papermill-error-cell-tag" in cell.metadata.get("tags", []):
            continue
        err = next((o for o in cell.get("outputs", []) if o.get("output_type") == "error"), None)
        failed = cell.metadata.get("papermill", {}).get("status") == "failed"
        if err is None and not failed:
            continue
        if err is not None and "raises-exception" in cell.metadata.get("tags", []):
            continue
        tb = ANSI.sub("", "\n".join(err.get("traceback", []))) if err else ""
        return {"cell": i, "execution_count": cell.get("execution_count"),
                "ename": err.get("ename") if err else "CellTimeoutOrDeadKernel",
                "evalue": err.get("evalue") if err else "the cell did not finish (timeout or the kernel died)",
                "source": cell.source[:400], "traceback": tb[-4000:]}
    return None


def describe_failure(f: dict | None) -> str:
    if not f:
        return ""
    return f"stopped at cell [{f['execution_count'] or '?'}] (#{f['cell']}): {f['ename']}: {f['evalue']}"[:300]


def cell_durations(nb) -> list[dict]:
    rows = [{"cell": i, "execution_count": c.get("execution_count"),
             "seconds": round(c.metadata.get("papermill", {}).get("duration") or 0.0, 2)}
            for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    return sorted(rows, key=lambda r: -r["seconds"])


HTML_MARKER = "&lt;redacted&gt;"


def _redact_obj(obj, html_text: bool = False):
    if isinstance(obj, str):
        if PLOTLY_BANNER in obj[:400]:
            return obj  # never edit the plotly.js bundle
        return redact_text(obj, marker=HTML_MARKER if html_text else REDACTED)
    if isinstance(obj, list):
        return [_redact_obj(v, html_text) for v in obj]
    if isinstance(obj, dict):
        return {k: _redact_obj(v, html_text or k == "text/html") for k, v in obj.items()}
    return obj


def redact_notebook(nb) -> None:
    """Redact every string of a notebook in place: sources, outputs, tracebacks, widget state, metadata."""
    import nbformat

    for i, cell in enumerate(nb.cells):
        nb.cells[i] = nbformat.from_dict(_redact_obj(cell))
    nb.metadata = nbformat.from_dict(_redact_obj(nb.metadata))


def evidence_lines(finding, traceback_lines: list[str]) -> list[str]:
    """The classifier's evidence (up to 3 lines) and the exception line, or the traceback's last 3 lines."""
    if finding is None:
        return traceback_lines[-3:]
    found = [str(e) for e in finding.evidence[:3]]
    last = traceback_lines[-1] if traceback_lines else ""
    return found + ([last] if last and not any(last.strip() in f for f in found) else [])


def build_summary(entries: list[dict], nbs: list, *, started: str, gpus: int | None = None,
                  parameters: dict | None = None) -> dict:
    """summary.json: fingerprint, each notebook's status, failure location, records, timings; incidents first."""
    from nbhelpers.runtime.learned import classify, second_opinion
    from nbhelpers.runtime.fingerprint import collect

    try:
        fingerprint = collect()
    except Exception as exc:  # a report must come out even when the fingerprint cannot be taken
        fingerprint = {"error": f"{type(exc).__name__}: {exc}"}
    books, incidents, reproduced = [], [], []
    for entry, nb in zip(entries, nbs):
        stem = Path(entry["notebook"]).stem
        fail = failure_of(nb)
        status = "failed" if fail or entry["status"] != "ok" else "ok"
        records = collect_records(nb)
        book = {**entry, "status": status, "section": f"nb-{stem}", "failure": fail,
                "records": records, "slowest_cells": cell_durations(nb)[:3]}
        books.append(book)
        if status != "ok":
            text = (fail or {}).get("traceback") or entry.get("error") or ""
            found = classify(text) if text else []
            top = found[0] if found else None
            candidates = [f.candidate() for f in found[:2]]
            if text and not found:  # nothing confident: the model's two likeliest, marked as a guess
                candidates = [{"category": c, "confidence": round(p, 2), "by": "model, not confident"}
                              for c, p in second_opinion(text)["top2"]]
            lines = [ln for ln in text.splitlines() if ln.strip()]
            incidents.append({
                "kind": "notebook", "notebook": entry["notebook"], "what": describe_failure(fail) or entry.get("error"),
                "where": f"cell [{fail['execution_count'] or '?'}]" if fail else "before the first cell",
                "rank": None, "node": fingerprint.get("hostname"),
                "category": top.category if top else None, "title": top.title if top else None,
                "remedy": top.remedies[0] if top else "Read the traceback of that cell; a failed self-check means "
                "this machine does not behave as the notebook claims: file it with this report.",
                "evidence": evidence_lines(top, lines), "candidates": candidates,
                "link": f"#cell-id={cell_anchor(stem, fail['cell'])}" if fail else f"#nb-{stem}"})
        for r in records:
            if r.get("kind") != "run":
                continue
            item = {"kind": "run", "notebook": entry["notebook"], "what": f"{r['label']}: {r['status']}",
                    "where": r.get("reason"), "rank": r.get("culprit_rank"), "node": r.get("culprit_host"),
                    "category": r.get("category"), "title": r.get("title"), "remedy": r.get("remedy"),
                    "evidence": r.get("evidence", [])[:4], "outcome": r["outcome"], "candidates": r.get("candidates", []),
                    "link": f"#cell-id={cell_anchor(stem, r['cell'])}"}
            if r["outcome"] in ("failed", "unexpected"):
                incidents.append(item)
            elif r["outcome"] == "reproduced":
                reproduced.append(item)
    incidents.sort(key=lambda i: i["kind"] != "notebook")  # a notebook that stopped first, then failed runs
    n_failed = sum(b["status"] != "ok" for b in books)
    verdict = (f"{n_failed} of {len(books)} notebook(s) failed" if n_failed else
               f"{len(incidents)} unexpected run failure(s)" if incidents else "all notebooks ran to the end")
    return {"started": started, "gpus": gpus, "verdict": verdict, "ok": not incidents,
            "parameters": {k: str(v) for k, v in (parameters or {}).items()},
            "seconds": round(sum(e.get("seconds") or 0 for e in entries), 1),
            "fingerprint": fingerprint, "incidents": incidents, "reproduced": reproduced, "notebooks": books}


# ---------------------------------------------------------------------------------------------- rendering
def cell_anchor(stem: str, index: int) -> str:
    return f"{re.sub(r'[^A-Za-z0-9_-]', '-', stem)}-c{index}"


def _children(value) -> list[str]:
    return [c[len("IPY_MODEL_"):] for c in (value or []) if isinstance(c, str) and c.startswith("IPY_MODEL_")]


def static_widget(model_id: str, state: dict, depth: int = 0) -> str:
    """A widget's last state as plain HTML (disabled controls, boxes as flex rows/columns)."""
    model = state.get(model_id)
    if model is None or depth > 20:
        return "<div class='nbh-widget'><i>(widget state not saved with this notebook)</i></div>"
    name, s = model.get("model_name", ""), model.get("state", {})
    esc = lambda v: html.escape(str(v if v is not None else ""))  # noqa: E731
    desc = f"<label>{esc(s.get('description'))}</label> " if s.get("description") and name != "ButtonModel" else ""
    if name in ("VBoxModel", "HBoxModel", "BoxModel", "GridBoxModel", "AccordionModel", "TabModel"):
        direction = "row" if name == "HBoxModel" else "column"
        inner = "".join(static_widget(c, state, depth + 1) for c in _children(s.get("children")))
        return f"<div class='nbh-widget nbh-box' style='display:flex;flex-direction:{direction};gap:4px'>{inner}</div>"
    if name in ("HTMLModel", "HTMLMathModel"):
        return f"<div class='nbh-widget'>{desc}{str(s.get('value', '')).replace(REDACTED, HTML_MARKER)}</div>"
    if name == "TextareaModel":
        return f"<div class='nbh-widget'>{desc}<textarea readonly rows=8 style='width:100%'>{esc(s.get('value'))}</textarea></div>"
    if name == "ButtonModel":
        return f"<div class='nbh-widget'><button disabled>{esc(s.get('description'))}</button></div>"
    if name in ("DropdownModel", "SelectModel", "RadioButtonsModel", "ToggleButtonsModel"):
        labels, idx = s.get("_options_labels", []), s.get("index")
        opts = "".join(f"<option{' selected' if i == idx else ''}>{esc(o)}</option>" for i, o in enumerate(labels))
        return f"<div class='nbh-widget'>{desc}<select disabled>{opts}</select></div>"
    if "Slider" in name or "Progress" in name:
        return (f"<div class='nbh-widget'>{desc}<input type=range disabled min='{esc(s.get('min'))}' "
                f"max='{esc(s.get('max'))}' value='{esc(s.get('value'))}'> {esc(s.get('value'))}</div>")
    if name in ("CheckboxModel", "ToggleButtonModel"):
        return f"<div class='nbh-widget'>{desc}<input type=checkbox disabled{' checked' if s.get('value') else ''}></div>"
    if "value" in s:
        return f"<div class='nbh-widget'>{desc}<input readonly value='{esc(s.get('value'))}'></div>"
    return f"<div class='nbh-widget'><i>({esc(name or 'widget')})</i></div>"


def _plotly_html(fig: dict, div_id: str) -> str:
    data = json.dumps(fig.get("data", [])).replace("</", "<\\/")
    layout = json.dumps(fig.get("layout", {})).replace("</", "<\\/")
    return (f"<div id='{div_id}' class='nbh-plotly' style='width:100%;min-height:{fig.get('layout', {}).get('height', 450)}px'></div>"
            f"<script>Plotly.newPlot('{div_id}', {data}, {layout}, {{responsive: true}});</script>")


def static_notebook(nb, stem: str) -> tuple[object, int]:
    """A copy whose outputs need no kernel, no require.js, no widget manager; returns it and its figure count."""
    nb = copy.deepcopy(nb)
    widget_state = nb.metadata.get("widgets", {}).get(WIDGET_STATE_MIME, {}).get("state", {})
    figures = 0
    cells = []
    for i, cell in enumerate(nb.cells):
        if "papermill-error-cell-tag" in cell.metadata.get("tags", []):
            continue  # its own error banner; the report has one
        cell.id = cell_anchor(stem, i)
        outputs = []
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if PLOTLY_MIME in data:
                figures += 1
                fig = data[PLOTLY_MIME]
                fig = json.loads(fig) if isinstance(fig, str) else fig
                out.data = {"text/html": _plotly_html(fig, f"{cell.id}-fig{figures}")}
            elif WIDGET_VIEW_MIME in data:
                out.data = {"text/html": static_widget(data[WIDGET_VIEW_MIME].get("model_id", ""), widget_state)}
            elif PLOTLY_BANNER in "".join(data.get("text/html", ""))[:2000]:
                continue  # the plotly.js bundle the notebook renderer emits once; the report inlines its own
            elif RECORD_MIME in data:
                out.data = {k: v for k, v in data.items() if k != RECORD_MIME}
            outputs.append(out)
        if cell.cell_type == "code":
            cell.outputs = outputs
        cells.append(cell)
    nb.cells = cells
    nb.metadata.pop("widgets", None)
    return nb, figures


TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js -%}<script>""" + PLOTLY_SLOT + """</script>{%- endblock html_head_js -%}
{% block jupyter_widgets %}{% endblock jupyter_widgets %}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block html_head_css -%}<style>{{ resources.nbh_css }}</style>{%- endblock html_head_css -%}
{%- block body_header -%}{{ super() }}{{ resources.nbh_summary }}{%- endblock body_header -%}
"""

CSS = """
.nbh-summary { max-width: 1100px; margin: 12px auto; font-family: var(--jp-ui-font-family, sans-serif); }
.nbh-summary table { border-collapse: collapse; } .nbh-summary td, .nbh-summary th { border: 1px solid #ccc; padding: 3px 6px; vertical-align: top; }
.nbh-bad { color: #d62728; } .nbh-good { color: #2ca02c; }
.nbh-incident { border-left: 4px solid #d62728; padding: 4px 10px; margin: 8px 0; background: #fff5f5; }
.nbh-incident pre, .nbh-summary pre { white-space: pre-wrap; font-size: 85%; margin: 2px 0; }
.nbh-section { border-top: 3px solid #1f77b4; margin: 30px 0 8px; padding-top: 6px; font-family: sans-serif; }
"""


def _incident_html(it: dict) -> str:
    esc = lambda v: html.escape(str(v if v is not None else ""))  # noqa: E731
    who = []
    if it.get("rank") is not None:
        who.append(f"rank {esc(it['rank'])}")
    if it.get("node"):
        who.append(f"node {esc(it['node'])}")
    cause = f"<b>{esc(it['title'])}</b> (<code>{esc(it['category'])}</code>)" if it.get("category") else "not classified"
    ev = "".join(f"<pre>{esc(e)[:500]}</pre>" for e in it.get("evidence", []))
    top2 = ", ".join(f"<code>{esc(c['category'])}</code> {c['confidence']:.2f}" + (f" ({esc(c['by'])})" if c["by"] != "rules" else "")
                     for c in it.get("candidates") or [])
    return (f"<div class='nbh-incident'><b>{esc(it['notebook'])}</b>: {esc(it['what'])}"
            f" <a href='{esc(it['link'])}'>go to the cell</a><br>"
            f"Where: {esc(it.get('where'))}{' · ' + ', '.join(who) if who else ''}<br>"
            f"Classified cause: {cause}" + (f" · the log's top 2: {top2}" if top2 else "")
            + f"<br>Remedy: {esc(it.get('remedy') or '-')}"
            + (f"<br>Evidence:{ev}" if ev else "") + "</div>")


def summary_html(summary: dict) -> str:
    esc = lambda v: html.escape(str(v if v is not None else ""))  # noqa: E731
    fp = summary.get("fingerprint", {})
    head = (f"<h1>Incident report {esc(summary['started'])}</h1>"
            f"<p class='{'nbh-good' if summary['ok'] else 'nbh-bad'}' id='nbh-verdict'><b>{esc(summary['verdict'])}</b></p>"
            f"<p>Host <code>{esc(fp.get('hostname'))}</code> · torch {esc(fp.get('torch'))}"
            + (f" · GPUs {esc(summary['gpus'])}" if summary.get("gpus") is not None else "")
            + (f" · parameters {esc(summary['parameters'])}" if summary.get("parameters") else "")
            + (f" · {esc(summary['seconds'])} s in all" if summary.get("seconds") else "") + "</p>")
    if summary["incidents"]:
        head += "<h2>What failed</h2>" + "".join(_incident_html(i) for i in summary["incidents"])
    else:
        head += "<h2>What failed</h2><p class='nbh-good'>Nothing unexpected: every notebook ran to the end and every " \
                "recorded run did what its notebook expected.</p>"
    if summary["reproduced"]:
        rows = "".join(
            f"<tr><td><a href='{esc(r['link'])}'>{esc(r['what'])}</a></td><td>{esc(r['rank'])}</td><td>{esc(r['node'])}</td>"
            f"<td>{esc(r['category'])}</td><td>{esc(r['where'])}</td><td>{esc(r['remedy'])}</td></tr>"
            for r in summary["reproduced"])
        head += ("<h2>Incidents reproduced on purpose</h2><p>Faults the notebooks inject; each failed as intended.</p>"
                 "<table><tr><th>run</th><th>culprit rank</th><th>node</th><th>cause</th><th>verdict</th>"
                 f"<th>remedy</th></tr>{rows}</table>")
    rows = "".join(
        f"<tr><td><a href='#{esc(b['section'])}'>{esc(b['notebook'])}</a></td>"
        f"<td class='{'nbh-good' if b['status'] == 'ok' else 'nbh-bad'}'>{esc(b['status'])}</td>"
        f"<td>{esc(b['seconds'])}</td><td>{len(b['records'])}</td><td>{esc(describe_failure(b['failure']))}</td></tr>"
        for b in summary["notebooks"])
    head += (f"<h2>Notebooks</h2><table><tr><th>notebook</th><th>status</th><th>seconds</th><th>records</th>"
             f"<th>stopped at</th></tr>{rows}</table>")
    fp_rows = "".join(f"<tr><td>{esc(k)}</td><td><pre>{esc(json.dumps(v, indent=1) if isinstance(v, (dict, list)) else v)}</pre></td></tr>"
                      for k, v in fp.items())
    head += f"<details><summary>Fingerprint of the machine that ran it</summary><table>{fp_rows}</table></details>"
    return f"<section class='nbh-summary' id='summary'>{head}</section>"


def section_cell(book: dict):
    import nbformat

    esc = html.escape
    color = "#2ca02c" if book["status"] == "ok" else "#d62728"
    where = describe_failure(book["failure"])
    link = f" <a href='#cell-id={cell_anchor(Path(book['notebook']).stem, book['failure']['cell'])}'>go there</a>" \
        if book["failure"] else ""
    text = (f"<div class='nbh-section' id='{esc(book['section'])}'><b>{esc(book['notebook'])}</b> · "
            f"<span style='color:{color}'>{esc(book['status'])}</span>"
            + (f" · {book['seconds']} s" if book.get("seconds") else "")
            + (f" · <span style='color:#d62728'>{esc(where)}</span>{link}" if where else "")
            + " · <a href='#summary'>back to the summary</a></div>")
    return nbformat.v4.new_raw_cell(text, metadata={"format": "text/html"})


def render_html(summary: dict, nbs: list) -> str:
    """One self-contained HTML document: the summary, then every notebook; plotly.js inlined once if needed."""
    import jinja2
    import nbformat
    from nbconvert import HTMLExporter

    combined = nbformat.v4.new_notebook()
    combined.metadata = copy.deepcopy(nbs[0].metadata) if nbs else {}
    combined.metadata.pop("widgets", None)
    figures = 0
    for book, nb in zip(summary["notebooks"], nbs):
        static, n = static_notebook(nb, Path(book["notebook"]).stem)
        figures += n
        combined.cells += [section_cell(book)] + static.cells
    exporter = HTMLExporter(template_name="lab", template_file="nbh_report.html.j2",
                            extra_loaders=[jinja2.DictLoader({"nbh_report.html.j2": TEMPLATE})])
    resources = {"metadata": {"name": f"Incident report {summary['started']}"},
                 "nbh_summary": summary_html(summary), "nbh_css": CSS}
    body, _ = exporter.from_notebook_node(combined, resources=resources)
    body = redact_text(body, marker=HTML_MARKER, patterns=False)
    plotly_js = ""
    if figures:
        from plotly.offline import get_plotlyjs

        plotly_js = get_plotlyjs().replace("</script", "<\\/script")
    return body.replace(PLOTLY_SLOT, plotly_js, 1)


def write_report(out: Path, summary: dict, nbs: list) -> Path:
    """summary.json and report.html into ``out`` (written to temp names, then renamed)."""
    from nbhelpers.diagnosis.redact import redact_obj

    summary = redact_obj(summary)
    for name, text in (("summary.json", json.dumps(summary, indent=2, default=str)),
                       ("report.html", render_html(summary, nbs))):
        tmp = out / f".{name}.tmp"
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(out / name)
    return out / "report.html"
