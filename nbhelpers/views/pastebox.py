"""The classifier in a notebook: findings as a table or HTML, and a paste box for log text.

The paste box shows its answer in an ``ipywidgets.HTML`` (not an ``Output`` widget, which can
stall headless execution), so an executed notebook keeps the last diagnosis as widget state.
"""
from __future__ import annotations

import html

from nbhelpers.diagnosis.classify import Finding
from nbhelpers.runtime.learned import classify, second_opinion


def findings_table(findings: list[Finding]):
    import pandas as pd

    return pd.DataFrame([{"category": f.category, "title": f.title, "confidence": round(f.confidence, 2),
                          "first evidence": str(f.evidence[0]) if f.evidence else ""} for f in findings])


def findings_html(findings: list[Finding], limit: int = 2, text: str = "") -> str:
    if not findings:
        second = second_opinion(text) if text.strip() else None
        hints = "".join(f"<p>Worth a look, not a failure by itself: <b>{html.escape(h['title'])}</b>. "
                        f"{html.escape(h['why'])}</p><ul>"
                        + "".join(f"<li><code>{html.escape(e)[:400]}</code></li>" for e in h["evidence"])
                        + f"</ul><p>What to do then: {html.escape(h['remedy'])}</p>" for h in (second or {}).get("hints", []))
        if not second or not second["error_lines"]:
            return ("<p><b>No known failure found.</b> Paste more of the log: the first error of each rank matters "
                    "most.</p>" + hints)
        lines = "".join(f"<li><code>{html.escape(ln)}</code></li>" for ln in second["error_lines"][-6:])
        near = "".join(f"<li>{c['label']} ({c['similarity']:.2f}): <code>{html.escape(c['source'])}</code></li>"
                       for c in second["closest"])
        nxt = "".join(f"<li>{html.escape(n)}</li>" for n in second["next"])
        top = ", ".join(f"{lab} {p:.2f}" for lab, p in second["top2"])
        return (f"<p><b>No known failure found with confidence</b> (the model's best guesses: {top}).</p>"
                f"<p>Lines that look like the error:</p><ul>{lines}</ul>"
                + (f"<p>Closest known cases:</p><ul>{near}</ul>" if near else "") + hints
                + f"<p>What to run next:</p><ul>{nxt}</ul>")
    parts = []
    for i, f in enumerate(findings[:limit]):
        ev = "".join(f"<li><code>{html.escape(str(e))[:400]}</code></li>" for e in f.evidence)
        rem = "".join(f"<li>{html.escape(r)}</li>" for r in f.remedies)
        role = "cause" if f.is_cause else "consequence (look for what caused it)"
        by = " (the learned model's reading: no rule matched)" if f.by == "model" else ""
        parts.append(f"<div style='margin-bottom:8px'><b>{i + 1}. {html.escape(f.title)}</b> "
                     f"<code>{f.category}</code>, confidence {f.confidence:.2f}{by}, {role}"
                     f"<p>{html.escape(f.explanation)}</p>"
                     + (f"<p>Evidence:</p><ul>{ev}</ul>" if ev else "")
                     + (f"<p>What to do:</p><ol>{rem}</ol>" if i == 0 else "") + "</div>")
    more = f"<p>{len(findings) - limit} more finding(s) not shown.</p>" if len(findings) > limit else ""
    return "".join(parts) + more


def show_findings(text_or_findings):
    """Classify text (or take findings) and display them as HTML in the notebook."""
    from IPython.display import HTML

    text = text_or_findings if isinstance(text_or_findings, str) else ""
    return HTML(findings_html(classify(text) if text else text_or_findings, text=text))


def paste_box(initial: str = ""):
    """A text area for log text and a Diagnose button; the answer appears below it."""
    import ipywidgets as w

    area = w.Textarea(value=initial, placeholder="Paste the log text of one or more ranks here ...",
                      layout=w.Layout(width="100%", height="160px"))
    button = w.Button(description="Diagnose", button_style="primary", icon="stethoscope")
    answer = w.HTML()

    def diagnose(_=None):
        text = area.value
        answer.value = findings_html(classify(text), text=text) if text.strip() else "<p>Nothing pasted yet.</p>"

    button.on_click(diagnose)
    if initial:
        diagnose()
    box = w.VBox([area, button, answer])
    box.area, box.button, box.answer = area, button, answer  # handles for tests and callers
    return box
