"""Progress of a running world: a live per-rank table in a Jupyter kernel, one line per change elsewhere.

In a kernel the live table is one display updated in place (a display handle, not an ``Output``
widget: those stall headless execution); elsewhere progress goes to stderr as one line per stage
change, so every long run shows where it is.
"""
from __future__ import annotations

import html
import sys
import time

__all__ = ["LiveView", "in_kernel", "STATUS_MARK", "STATUS_COLOR"]

STATUS_MARK = {"ok": "✔", "fail": "✘", "running": "…", None: ""}
STATUS_COLOR = {"ok": "#2ca02c", "fail": "#d62728", "running": "#ff7f0e"}


def in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    ip = get_ipython()
    return ip is not None and hasattr(ip, "kernel")


def _rank_rows(run) -> list[dict]:
    rows = []
    for r in run.local_ranks():
        tail = run.tails[r]
        ev = tail.events[-1] if tail.events else None
        last = tail.lines[-1] if tail.lines else ""
        rows.append({"rank": r, "stage": ev["stage"] if ev else "starting",
                     "status": ev["status"] if ev else "", "since": time.time() - ev["t"] if ev else None,
                     "last": last[-140:]})
    return rows


def _since(row: dict) -> str:
    return "" if row["since"] is None else f"{row['since']:.1f} s"


class LiveView:
    """Progress of a running :class:`~nbhelpers.runtime.launcher.Run`, throttled to a few updates a second."""

    def __init__(self, run, live: bool | None = None, every: float = 0.5):
        self.run, self.every = run, every
        self.kernel = in_kernel() if live is None else (live and in_kernel())
        self.text = live is None and not self.kernel or (live is True and not self.kernel)
        self.handle = None
        self.last = 0.0
        self.seen: dict[int, tuple] = {}
        if self.kernel:
            from IPython.display import HTML, display

            self.handle = display(HTML(self._html()), display_id=True)

    def _html(self) -> str:
        run = self.run
        head = (f"<b>{html.escape(run.name)}</b> · {run.nproc} ranks · {run.elapsed:.1f} s of "
                f"{run.timeout:.0f} s timeout · logs <code>{html.escape(str(run.log_dir))}</code>")
        hang = run.hangwatch.report if getattr(run, "hangwatch", None) is not None else None
        if hang is not None:
            head += f"<br><b style='color:#d62728'>{html.escape(hang.text())}</b>"
            head += " · stopping the ranks ..." if run.stop_on_hang else " · still waiting (the job goes on)"
        if run.early_verdict is not None:
            head += (f"<br><b style='color:#d62728'>culprit: rank {run.early_verdict.culprit}</b> "
                     f"({html.escape(run.early_verdict.reason)}); stopping the other ranks ...")
        cells = "".join(
            f"<tr><td>{r['rank']}</td><td>{html.escape(r['stage'])}</td>"
            f"<td style='color:{STATUS_COLOR.get(r['status'], '#555')}'>{html.escape(r['status'])}</td>"
            f"<td>{_since(r)}</td>"
            f"<td><code>{html.escape(r['last'])}</code></td></tr>" for r in _rank_rows(run))
        return (f"<div>{head}<table><tr><th>rank</th><th>stage</th><th>status</th><th>for</th>"
                f"<th>last log line</th></tr>{cells}</table></div>")

    def update(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last < self.every:
            return
        self.last = now
        if self.handle is not None:
            from IPython.display import HTML

            self.handle.update(HTML(self._html()))
        elif self.text:
            if self.run.early_verdict is not None and "culprit" not in self.seen:
                self.seen["culprit"] = True
                print(f"[{self.run.elapsed:6.1f}s] {self.run.name}: culprit rank {self.run.early_verdict.culprit}: "
                      f"{self.run.early_verdict.reason}", file=sys.stderr, flush=True)
            hang = self.run.hangwatch.report if getattr(self.run, "hangwatch", None) is not None else None
            if hang is not None and "hang" not in self.seen:
                self.seen["hang"] = True
                print(f"[{self.run.elapsed:6.1f}s] {self.run.name}: {hang.text()}", file=sys.stderr, flush=True)
            for r in _rank_rows(self.run):
                key = (r["stage"], r["status"])
                if self.seen.get(r["rank"]) != key:
                    self.seen[r["rank"]] = key
                    print(f"[{self.run.elapsed:6.1f}s] {self.run.name} rank {r['rank']}: {r['stage']} {r['status']}",
                          file=sys.stderr, flush=True)

    def finish(self, result) -> None:
        if self.handle is not None:
            from IPython.display import HTML

            self.handle.update(HTML(f"<div><b>{html.escape(result.name)}</b>: {html.escape(result.status)} in "
                                    f"{result.wall_s:.1f} s · logs <code>{html.escape(str(result.log_dir))}</code></div>"))
        elif self.text:
            self.update(force=True)
            print(f"[{result.wall_s:6.1f}s] {result.name}: {result.status}; {result.verdict.reason}",
                  file=sys.stderr, flush=True)
