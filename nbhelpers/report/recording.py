"""Verdicts a notebook hands to its report: one line per run, ``nb.record(result)``.

``record`` displays a one-line note and, beside it in the same output, a JSON payload under the
mimetype :data:`MIMETYPE`.  The payload lives in the executed notebook's cell output, so
``python -m nbhelpers run-all`` and :func:`nbhelpers.export_report` collect it from the ``.ipynb``
afterwards (no side channel, nothing global), and Jupyter front-ends ignore the mimetype.

    nb.record(faulty, expect="fail")      # a RunResult; the report checks it failed as intended
    nb.record(gallery)                    # a table from fault_gallery/scale_up: each of its runs
    nb.record("busbw_gbs", 1.31)          # a named value (glue-like)

``expect`` is ``"ok"``, ``"fail"`` or None (no expectation).  A deliberate fault that failed is
"reproduced"; a run that did not do what the notebook expected is "unexpected" and goes to the top
of the report.  Every string is redacted before it is displayed.
"""
from __future__ import annotations

import html
import json
import math
from typing import Any

from nbhelpers.diagnosis.redact import redact_text
from nbhelpers.runtime.launcher import RunResult
from nbhelpers.scenarios.api import Gallery

MIMETYPE = "application/vnd.nbhelpers.record+json"


def _jsonable(value: Any):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (str, int, float, bool)) or value is None:
        return redact_text(value) if isinstance(value, str) else value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item"):  # numpy scalars
        try:
            return _jsonable(value.item())
        except (TypeError, ValueError):
            pass
    return redact_text(str(value))


def outcome(status: str, expect: str | None) -> str:
    """ok | failed (no expectation) | reproduced (failed as intended) | unexpected."""
    ok = status == "ok"
    if expect is None:
        return "ok" if ok else "failed"
    if expect not in ("ok", "fail"):
        raise ValueError(f"expect must be 'ok', 'fail' or None, not {expect!r}")
    if expect == "fail":
        return "reproduced" if not ok else "unexpected"
    return "ok" if ok else "unexpected"


def run_payload(result, expect: str | None = None, label: str | None = None) -> dict:
    """A RunResult as the report keeps it: its ``to_dict()`` plus the expectation, evidence trimmed."""
    d = result.to_dict()
    evidence = d["evidence"][:4] + d.pop("evidence_lines")[:4]
    return _jsonable({**d, "kind": "run", "label": label or result.name, "status": result.status,
                      "expect": expect, "outcome": outcome(result.status, expect), "evidence": evidence,
                      "remedy": d["remedies"][0] if d["remedies"] else ""})


def payloads(obj, value: Any = None, *, expect: str | None = None, label: str | None = None) -> list[dict]:
    """What :func:`record` stores for ``obj`` (a RunResult, a Gallery of runs, or a name and value)."""
    if isinstance(obj, RunResult):
        return [run_payload(obj, expect, label)]
    if isinstance(obj, Gallery):
        return [run_payload(r, expect, f"{label or r.name} [{key}]") for key, r in obj.runs.items()
                if isinstance(r, RunResult)]
    if isinstance(obj, str):
        return [{"kind": "value", "label": redact_text(obj), "value": _jsonable(value)}]
    raise TypeError(f"record() takes a RunResult, a Gallery (fault_gallery, scale_up, ...), or a name and a value; "
                    f"got {type(obj).__name__}")


def _line(p: dict) -> str:
    if p["kind"] == "value":
        return f"<code>{html.escape(p['label'])}</code> = {html.escape(json.dumps(p['value']))}"
    who = "" if p["culprit_rank"] is None else f", culprit rank {p['culprit_rank']}"
    cause = f", {p['category']}" if p["category"] else ""
    return f"<code>{html.escape(p['label'])}</code>: {p['outcome']} ({html.escape(p['status'])}{who}{cause})"


class Recorded:
    """The displayed form of a record: a short note for people, the payload for the report."""

    def __init__(self, items: list[dict]):
        self.items = items

    def _repr_mimebundle_(self, include=None, exclude=None):
        note = "<br>".join(_line(p) for p in self.items)
        return {"text/html": f"<div style='color:#555;font-size:90%'>recorded for the report: {note}</div>",
                "text/plain": "recorded for the report: " + "; ".join(p["label"] for p in self.items),
                MIMETYPE: {"records": self.items}}


def record(obj, value: Any = None, *, expect: str | None = None, label: str | None = None) -> Recorded | None:
    """Hand a run's verdict (or a named value) to the report.

    In a kernel it displays the note and payload at once (anywhere in a cell) and returns None;
    elsewhere it returns the :class:`Recorded` (its ``items`` are the payloads).
    """
    from nbhelpers.runtime.progress import in_kernel

    rec = Recorded(payloads(obj, expect=expect, label=label, value=value))
    if in_kernel():
        from IPython.display import display

        display(rec)
        return None
    return rec


def collect(notebook) -> list[dict]:
    """Every record in an executed notebook (an ``nbformat`` node), with the index of its cell."""
    found, seen = [], set()
    for i, cell in enumerate(notebook.cells):
        for out in cell.get("outputs", []):
            data = out.get("data", {}) if out.get("output_type") in ("display_data", "execute_result") else {}
            if MIMETYPE in data:
                payload = data[MIMETYPE]
                payload = json.loads(payload) if isinstance(payload, str) else payload
                for p in payload.get("records", []):
                    if p.get("kind") == "run" and p.get("log_dir"):
                        if p["log_dir"] in seen:  # a run shown again (in a gallery, say) is one incident
                            continue
                        seen.add(p["log_dir"])
                    found.append({**p, "cell": i})
    return found
