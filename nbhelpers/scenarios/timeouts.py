"""What each timeout really bounds, measured (kernel side of :mod:`nbhelpers.workers.timeouts`).

    timeouts()    # one row per mechanism: the bound asked for, when control came back, what was raised
"""
from __future__ import annotations

from nbhelpers.runtime.launcher import launch
from nbhelpers.scenarios.api import Gallery


def timeouts(*, pg_timeout: float = 3.0, wait_timeout: float = 1.0, monitored_timeout: float = 1.5,
             alarm: float = 1.0, live: bool | None = None, **kw):
    """Measure what each timeout bounds while rank 1 never joins; one row per mechanism."""
    import pandas as pd

    args = ["--pg-timeout", str(pg_timeout), "--wait-timeout", str(wait_timeout),
            "--monitored-timeout", str(monitored_timeout), "--alarm", str(alarm)]
    res = launch("timeouts", args, nproc=2, timeout=4 * pg_timeout + 60, live=live, name="timeouts", **kw)
    rows = [{"mechanism": e["mechanism"], "bound asked s": e["bound_s"], "control back after s": round(e["took_s"], 2),
             "raised": e["raised"], "names the late rank": "Rank 1" in (e.get("error") or "")
             or "Ranks 1" in (e.get("error") or ""), "message": e.get("error")}
            for e in res.events if e.get("stage") == "measure"]
    if not rows:
        from nbhelpers.errors import WorkbookError

        raise WorkbookError(f"the timeouts run measured nothing ({res.status}): {res.verdict.reason}",
                            f"read the ranks' logs in {res.log_dir}")
    table = pd.DataFrame(rows).set_index("mechanism")
    return Gallery(table, {"timeouts": res})
