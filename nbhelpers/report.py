"""The main job: execute every notebook headless and leave an incident report folder.

``python -m nbhelpers run-all`` (``make run``) writes ``reports/<UTC timestamp>/``: each executed
notebook, its HTML rendering (plotly charts embedded, readable offline), an ``index.html`` that says
first what failed, and ``summary.json``.  A notebook that fails still yields its executed copy and
HTML up to the failing cell, and the report says where it stopped.
"""
from __future__ import annotations

import html
import json
import sys
import time
from pathlib import Path

from .launcher import PACKAGE_ROOT
from .redact import redact_text

NOTEBOOKS = PACKAGE_ROOT.parent / "notebooks"
CELL_TIMEOUT_S = 600


def quick_parameters(gpus: int) -> dict:
    """Parameters fit for this machine: small on CPU, fuller with GPUs (names a notebook lacks are ignored)."""
    if gpus >= 2:
        return {"NPROC": min(gpus, 8), "SIZE_MB": 256.0, "SCALE": tuple(n for n in (1, 2, 4, 8) if n <= gpus)}
    return {"NPROC": 2, "SIZE_MB": 16.0, "TIMEOUT": 5.0}


def declared_parameters(path: Path) -> set[str]:
    import nbformat

    nb = nbformat.read(path, as_version=4)
    names = set()
    for cell in nb.cells:
        if "parameters" in cell.metadata.get("tags", []):
            names |= {ln.split("=")[0].strip() for ln in cell.source.splitlines() if "=" in ln and not ln.startswith("#")}
    return names


def to_html(executed: Path, out: Path) -> None:
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_filename(str(executed))
    out.write_text(redact_text(body))


def run_all(out_root: Path | None = None, notebooks: list[Path] | None = None, parameters: dict | None = None) -> Path:
    import papermill as pm

    from .diagnose import setup_notebook

    gpus = setup_notebook(quiet=True)["gpus"]
    params = {**quick_parameters(gpus), **(parameters or {})}
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = (out_root or PACKAGE_ROOT.parent / "reports") / stamp
    out.mkdir(parents=True, exist_ok=True)
    books = notebooks or sorted(NOTEBOOKS.glob("[0-9]*.ipynb"))
    summary = {"started": stamp, "gpus": gpus, "parameters": {k: str(v) for k, v in params.items()}, "notebooks": []}
    for i, nb in enumerate(books, 1):
        print(f"[{i}/{len(books)}] {nb.stem}: running ...", file=sys.stderr, flush=True)
        t0 = time.time()
        executed = out / nb.name
        entry = {"notebook": nb.name, "status": "ok", "error": None}
        try:
            pm.execute_notebook(str(nb), str(executed), cwd=str(nb.parent), kernel_name="python3",
                                parameters={k: v for k, v in params.items() if k in declared_parameters(nb)},
                                execution_timeout=CELL_TIMEOUT_S, progress_bar=False, log_output=False)
        except Exception as exc:  # papermill saves the notebook up to the failing cell first
            entry.update(status="failed", error=redact_text(f"{type(exc).__name__}: {exc}")[-2000:])
        entry["seconds"] = round(time.time() - t0, 1)
        if executed.exists():
            to_html(executed, out / f"{nb.stem}.html")
            entry["html"] = f"{nb.stem}.html"
        summary["notebooks"].append(entry)
        print(f"[{i}/{len(books)}] {nb.stem}: {entry['status']} in {entry['seconds']} s", file=sys.stderr, flush=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    (out / "index.html").write_text(index_html(summary))
    print(f"report: {out / 'index.html'}", file=sys.stderr)
    return out


def index_html(summary: dict) -> str:
    failed = [n for n in summary["notebooks"] if n["status"] != "ok"]
    head = (f"<p style='color:#d62728'><b>{len(failed)} notebook(s) failed:</b> "
            + ", ".join(html.escape(n["notebook"]) for n in failed) + "</p>") if failed else \
        "<p style='color:#2ca02c'><b>Every notebook ran to the end.</b></p>"
    rows = "".join(
        f"<tr><td><a href='{html.escape(n.get('html', ''))}'>{html.escape(n['notebook'])}</a></td>"
        f"<td>{n['status']}</td><td>{n['seconds']}</td><td><pre>{html.escape(n['error'] or '')}</pre></td></tr>"
        for n in summary["notebooks"])
    return (f"<!doctype html><meta charset='utf-8'><title>Workbook report {summary['started']}</title>"
            f"<h1>Workbook report {summary['started']}</h1>{head}<p>GPUs: {summary['gpus']}</p>"
            f"<table border=1 cellpadding=4><tr><th>notebook</th><th>status</th><th>seconds</th><th>error</th></tr>"
            f"{rows}</table>")
