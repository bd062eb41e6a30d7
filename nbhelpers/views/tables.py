"""Tables and charts of what :mod:`nbhelpers.diagnosis` reads: pandas DataFrames and plotly figures over its
plain records (the environment catalog, a machine's fingerprint, lint findings, watchdog timeout lines, NCCL's
debug lines).  diagnosis/ itself returns dicts and dataclasses and imports neither library.

    df = parse_nccl(text)        # one row per NCCL line understood (kind, host, pid, dev, rank, ...)
    channel_table(df)            # rank -> peer, channel, transport (P2P, SHM, NET/IB, NET/Socket), interface
    nccl_summary(df)             # one row per rank: NCCL version, network, interfaces, init complete, WARNs
    nccl_chart(df)               # plotly: who talks to whom over what
"""
from __future__ import annotations

from dataclasses import asdict, fields
from typing import Iterable

from nbhelpers.diagnosis.envcatalog import CATALOG, EnvVar
from nbhelpers.diagnosis.lint import Finding
from nbhelpers.diagnosis.nccllog import COLUMNS, NCCL_EFFECTS, log_rows, parse_lines
from nbhelpers.diagnosis.watchdog import at_work, parse_watchdog

__all__ = ["channel_table", "effects_table", "env_catalog", "fingerprint_table", "lint_table", "nccl_chart",
           "nccl_frame", "nccl_summary", "parse_logs", "parse_nccl", "watchdog_table"]

NCCL_INT_COLUMNS = ("pid", "dev", "rank", "nranks", "channel", "peer", "net_dev", "log_rank")
TRANSPORT_COLOR = {"P2P": "#2ca02c", "SHM": "#17becf", "NET/IB": "#1f77b4", "NET/Socket": "#d62728"}


def env_catalog():
    """The catalog as a pandas DataFrame, one row per variable (tuples joined with ', ')."""
    import pandas as pd

    cols = [f.name for f in fields(EnvVar)]
    rows = [{c: (", ".join(v) if isinstance(v := getattr(e, c), tuple) else v) for c in cols}
            for e in CATALOG.values()]
    return pd.DataFrame(rows, columns=cols)


def fingerprint_table(fp: dict):
    """A machine's fingerprint as a two-column table (item, value); interfaces and env summarised."""
    import pandas as pd

    rows = {k: v for k, v in fp.items() if k not in ("interfaces", "env", "warnings")}
    rows["interfaces"] = "; ".join(f"{i['name']}({'up' if i['up'] else 'down'}, mtu {i['mtu']}): "
                                   f"{', '.join(i['addresses']) or '-'}" for i in fp.get("interfaces", []))
    for key in ("shm_total", "shm_free"):
        if rows.get(key) is not None:
            rows[key] = f"{rows[key] / 2**30:.2f} GiB"
    rows.update({f"env {k}": v for k, v in fp.get("env", {}).items()})
    rows["warnings"] = "\n".join(fp.get("warnings", [])) or "none"
    return pd.DataFrame({"item": list(rows), "value": [str(v) for v in rows.values()]})


def lint_table(findings: list[Finding]):
    """Lint findings, one row each (columns: the Finding fields)."""
    import pandas as pd

    return pd.DataFrame([asdict(f) for f in findings], columns=[f.name for f in fields(Finding)])


def watchdog_table(text: str):
    """The watchdog's timeout records as a table, one row per (rank, record); its "last enqueued/completed"
    lines in ``df.attrs["at_work"]``."""
    import pandas as pd

    df = pd.DataFrame([ln.to_dict() for ln in parse_watchdog(text)])
    df.attrs["at_work"] = at_work(text)
    return df


def nccl_frame(rows: list[dict] | object):
    """NCCL debug rows (:func:`~nbhelpers.diagnosis.nccllog.parse_lines`, ``log_rows``) as a DataFrame; a
    DataFrame comes back as it is."""
    import pandas as pd

    if isinstance(rows, pd.DataFrame):
        return rows
    rows = list(rows)
    cols = (["log_rank"] if any("log_rank" in r for r in rows) else []) + COLUMNS
    df = pd.DataFrame(rows, columns=cols)
    for col in NCCL_INT_COLUMNS:
        if col in df:
            df[col] = df[col].astype("Int64")
    return df


def parse_nccl(text: str | Iterable[str]):
    """A DataFrame of the NCCL lines in ``text`` (a string, or an iterable of lines)."""
    return nccl_frame(parse_lines(text.splitlines() if isinstance(text, str) else text))


def parse_logs(logs: dict[int, str]):
    """Each rank's log of a run (``RunResult.logs``) parsed; rows get ``log_rank``, the launcher's rank."""
    return nccl_frame(log_rows(logs)) if logs else parse_nccl("")


def channel_table(df):
    """Channel connections: rank, host, channel, peer, direction, transport, detail, interface, GDR."""
    df = nccl_frame(df)
    cols = ["rank", "host", "channel", "peer", "direction", "transport", "detail", "interface", "gdr"]
    return df[df.kind == "channel"][cols].reset_index(drop=True)


def nccl_summary(df):
    """One row per NCCL process and device: rank, version, network, interfaces, transports, init, WARNs."""
    import pandas as pd

    df = nccl_frame(df)
    keyed = df[df["host"].notna()]
    everywhere = df[df.kind == "version"]["value"].dropna().unique().tolist()
    everywhere = everywhere if len(everywhere) == 1 else []  # one job, one NCCL: lend it to every process
    rows = []
    for (host, pid, dev), g in keyed.groupby(["host", "pid", "dev"], sort=False):
        ch = g[g.kind == "channel"]
        ranks = g["rank"].dropna().unique().tolist()
        versions = g[g.kind == "version"]["value"].dropna().unique().tolist()
        rows.append({"host": host, "pid": pid, "dev": dev, "rank": ", ".join(str(r) for r in ranks) or "?",
                     "version": ", ".join(versions or everywhere) or None,
                     "network": ", ".join(g[g.kind == "network"]["value"].unique()) or None,
                     "interfaces": ", ".join(dict.fromkeys(
                         x for x in g[g.kind.isin(["net_devices", "bootstrap"])]["interface"].dropna() if x)) or None,
                     "transports": ", ".join(f"{t} x{n}" for t, n in ch["transport"].value_counts().items()) or None,
                     "init complete": bool((g.kind == "init_complete").any()),
                     "warnings": int((g.kind == "warn").sum())})
    return pd.DataFrame(rows)


def nccl_chart(df, title: str = "NCCL channels: rank -> peer, by transport"):
    """Scatter of rank (x) -> peer (y), one marker per pair and transport, sized by channel count."""
    import plotly.graph_objects as go

    ch = channel_table(df)
    fig = go.Figure()
    if len(ch):
        counts = ch.groupby(["rank", "peer", "transport"]).size().reset_index(name="channels")
        for transport, g in counts.groupby("transport"):
            fig.add_trace(go.Scatter(
                x=g["rank"].astype(int), y=g["peer"].astype(int), mode="markers", name=transport,
                marker=dict(size=8 + 3 * g["channels"].clip(upper=10), color=TRANSPORT_COLOR.get(transport),
                            opacity=0.75),
                hovertext=[f"rank {r} -> {p} via {transport}: {n} channel(s)"
                           for r, p, n in zip(g["rank"], g["peer"], g["channels"])], hoverinfo="text"))
    fig.update_layout(title=title, xaxis_title="rank (printing the line)", yaxis_title="peer rank", height=380,
                      margin=dict(l=10, r=10, t=50, b=30))
    return fig


def effects_table():
    """What each NCCL variable would change in the parsed table (a GPU is needed to see it for real)."""
    import pandas as pd

    return pd.DataFrame([{"setting": k, "what changes in the NCCL_DEBUG table": v} for k, v in NCCL_EFFECTS.items()])
