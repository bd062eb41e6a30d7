"""Export the open notebook as an incident report: ``nb.export_report()`` or ``nb.export_button()``.

The report is built from the notebook **as last saved on disk** (the kernel cannot read the
front-end's unsaved outputs): save first (Ctrl+S).  Which notebook: the ``path`` argument, else
VS Code's ``__vsc_ipynb_file__``, else ``JPY_SESSION_NAME`` (set by jupyter_server when it starts
the kernel; stale after a rename), else the running Jupyter servers' sessions matched on this
kernel's id.  Widgets appear as their saved state only if the front-end saved it (JupyterLab:
Settings > "Save Widget State Automatically"); otherwise the report says the state was not saved.
Plotly figures need the ``plotly_mimetype`` renderer that ``setup_notebook()`` sets.
"""
from __future__ import annotations

import json
import os
import time
import urllib.request
from pathlib import Path

from nbhelpers.errors import WorkbookError


def _from_servers() -> Path | None:
    try:
        import ipykernel
        from jupyter_server.serverapp import list_running_servers
    except ImportError:
        return None
    try:
        kernel_id = Path(ipykernel.get_connection_file()).stem.removeprefix("kernel-")
    except RuntimeError:  # not in a kernel
        return None
    for srv in list_running_servers():
        req = urllib.request.Request(srv["url"].rstrip("/") + "/api/sessions",
                                     headers={"Authorization": f"token {srv.get('token', '')}"})
        try:
            with urllib.request.urlopen(req, timeout=3) as resp:
                sessions = json.load(resp)
        except OSError:
            continue
        for s in sessions:
            if (s.get("kernel") or {}).get("id") == kernel_id:
                root = srv.get("root_dir") or srv.get("notebook_dir") or "."
                return Path(root) / s["path"]
    return None


def notebook_path(path: str | os.PathLike | None = None) -> Path:
    """The notebook this kernel runs (or ``path``); raises WorkbookError with what to do if unknown."""
    if path:
        p = Path(path)
        if not p.is_file():
            raise WorkbookError(f"no such notebook: {p}", "give the path of a saved .ipynb file")
        return p
    try:
        from IPython import get_ipython

        ip = get_ipython()
    except ImportError:
        ip = None
    vsc = ip.user_ns.get("__vsc_ipynb_file__") if ip is not None else None
    for candidate in (vsc, os.environ.get("JPY_SESSION_NAME")):
        if candidate and candidate.endswith(".ipynb") and Path(candidate).is_file():
            return Path(candidate)
    found = _from_servers()
    if found and found.is_file():
        return found
    raise WorkbookError("cannot tell which notebook this kernel runs",
                        "pass its path: nb.export_report('notebooks/01_diagnose.ipynb')")


def export_report(path: str | os.PathLike | None = None, out_root: str | os.PathLike | None = None) -> Path:
    """Write ``reports/<UTC>-<notebook>/`` (redacted notebook copy, report.html, summary.json); returns report.html."""
    import nbformat

    from nbhelpers.report.build import (
        build_summary,
        cell_durations,
        failure_of,
        redact_notebook,
        reports_dir,
        write_report,
    )

    src = notebook_path(path)
    nb = nbformat.read(src, as_version=4)
    redact_notebook(nb)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = Path(out_root or reports_dir()) / f"{stamp}-{src.stem}"
    out.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out / src.name)
    seconds = round(sum(c["seconds"] for c in cell_durations(nb)), 1)
    entry = {"notebook": src.name, "status": "failed" if failure_of(nb) else "ok", "error": None,
             "seconds": seconds or None}
    summary = build_summary([entry], [nb], started=stamp)
    return write_report(out, summary, [nb])


def export_button(path: str | os.PathLike | None = None, out_root: str | os.PathLike | None = None):
    """A button that exports the saved notebook as a report; the answer shows below it (no Output widget)."""
    import html

    import ipywidgets as w

    button = w.Button(description="Export report", icon="file-export", tooltip="save the notebook first (Ctrl+S)")
    answer = w.HTML("<small>Save the notebook first (Ctrl+S): the report is built from the saved file.</small>")

    def click(_=None):
        answer.value = "exporting ..."
        try:
            answer.value = f"report written: <code>{html.escape(str(export_report(path, out_root)))}</code>"
        except Exception as exc:  # shown, not raised: a callback's exception would be lost in the log
            answer.value = f"<span style='color:#d62728'>export failed: {html.escape(str(exc))}</span>"

    button.on_click(click)
    box = w.VBox([button, answer])
    box.button, box.answer, box.click = button, answer, click
    return box
