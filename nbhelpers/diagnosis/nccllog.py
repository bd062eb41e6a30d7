"""Read NCCL_DEBUG=INFO/WARN output: versions, networks, interfaces, channels and transports, per rank.

    rows = parse_lines(text.splitlines())   # one dict per NCCL line understood (kind, host, pid, dev, rank, ...)
    rows = log_rows(run.logs)               # each rank's log of a run, rows marked with the launcher's rank

The tables and the chart over these rows (``parse_nccl``, ``channel_table``, ``nccl_summary``, ``nccl_chart``) are
in :mod:`nbhelpers.views.tables`.

Tolerant of the formats seen from NCCL 2.4 to 2.2x: ``host:pid:tid [dev]`` prefixes behind any other
prefix (timestamps, ``[1,0]<stdout>:`` from mpirun, ``(pid=...)`` from Ray, Python logging), bare
``[dev] NCCL INFO`` lines, ``Ring`` (old) or ``Channel xx`` / ``Channel xx/y`` lines, busIds or device
numbers in the brackets, ``[send]``/``[receive]`` tags, transports with spaces (``P2P/direct pointer``)
and suffixes (``NET/IB/9/GDRDMA/Shared``).  Lines it does not understand are kept as kind ``other``.

The number in brackets after host:pid:tid is the CUDA device, not the rank; a line's rank comes from
``comm ... rank R`` (Init START/COMPLETE) or from its channel lines, per (host, pid, device).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "nccl_real_lines.log"

_VERSION = re.compile(r"NCCL version (?P<version>\d+\.\d+\.\d+)(?:\+cuda(?P<cuda>[\d.]+))?")
_CHANNEL = re.compile(r"^(?P<what>Channel|Ring) (?P<ch>\d+)(?:/(?P<nch>\d+))? : (?P<a>\d+)\[(?P<adev>[0-9a-fA-F]+)\] -> "
                      r"(?P<b>\d+)\[(?P<bdev>[0-9a-fA-F]+)\](?: \[(?P<dir>send|receive)\])? via (?P<via>.+?)\s*$")
_INIT = re.compile(r"comm 0x[0-9a-fA-F]+ rank (?P<rank>\d+) nranks (?P<nranks>\d+) cudaDev (?P<cudadev>\d+)"
                   r".*? - Init (?P<state>START|COMPLETE)")
_TIMINGS = re.compile(r"^Init timings.*?rank (?P<rank>\d+) nranks (?P<nranks>\d+) total (?P<total>[\d.]+)")
_NETDEVS = re.compile(r"^NET/(?P<net>\w[\w ]*?) ?: Using (?P<devs>.*)$")
_DEV_ITEM = re.compile(r"\[(?P<i>\d+)\](?P<name>[^\s\[;]+)")
_NETWORK = re.compile(r"^Using network (?P<network>.+?)\s*$")
_BOOTSTRAP = re.compile(r"^Bootstrap ?: Using (?P<what>.+?)\s*$")
_ENVSET = re.compile(r"^(?P<var>NCCL_\w+) set by environment to (?P<value>.*?)\.?\s*$")
_DRIVER = re.compile(r"^cudaDriverVersion (?P<driver>\d+)")

COLUMNS = ["line", "kind", "level", "host", "pid", "dev", "rank", "nranks", "channel", "peer", "direction",
           "transport", "detail", "net_dev", "gdr", "interface", "value", "source", "text"]


def _iface(item: str) -> str:
    """``mlx5_10:1/RoCE`` stays; ``ens7:10.128.0.32<0>`` becomes ``ens7 (10.128.0.32)``."""
    m = re.fullmatch(r"(?P<name>[^:]+):(?P<addr>.+)<\d+>", item)
    return f"{m['name']} ({m['addr']})" if m else item


def _split_via(via: str) -> tuple[str, str, int | None, bool]:
    """transport, detail, net device index, GPUDirect RDMA, from 'NET/IB/0/GDRDMA' or 'P2P/IPC/read'."""
    parts = via.split("/")
    if parts[0] == "NET" and len(parts) >= 2:
        transport = f"NET/{parts[1]}"
        dev = int(parts[2]) if len(parts) > 2 and parts[2].isdigit() else None
        rest = parts[3:] if dev is not None else parts[2:]
        return transport, "/".join(rest), dev, "GDRDMA" in rest
    return parts[0], "/".join(parts[1:]), None, False


def _classify(msg: str) -> dict:
    head = msg[:5]
    if head in ("Chann", "Ring "):
        m = _CHANNEL.match(msg)
        if m:
            transport, detail, net_dev, gdr = _split_via(m["via"])
            receiving = m["dir"] == "receive"
            a, b = int(m["a"]), int(m["b"])
            return {"kind": "channel", "channel": int(m["ch"]), "rank": b if receiving else a,
                    "peer": a if receiving else b, "direction": m["dir"] or "", "transport": transport,
                    "detail": detail, "net_dev": net_dev, "gdr": gdr, "value": m["what"]}
        return {"kind": "other"}  # ring/tree listings such as "Channel 00/32 :    0 1"
    if " - Init " in msg and (m := _INIT.search(msg)):
        return {"kind": "init_complete" if m["state"] == "COMPLETE" else "init_start", "rank": int(m["rank"]),
                "nranks": int(m["nranks"])}
    if head == "Init " and (m := _TIMINGS.match(msg)):
        return {"kind": "init_timings", "rank": int(m["rank"]), "nranks": int(m["nranks"]), "value": m["total"]}
    if head == "NCCL " and msg.startswith("NCCL version") and (m := _VERSION.search(msg)):
        return {"kind": "version", "value": m["version"], "detail": f"cuda {m['cuda']}" if m["cuda"] else ""}
    if head == "Using" and (m := _NETWORK.match(msg)):
        return {"kind": "network", "value": m["network"]}
    if head.startswith("NET/"):
        if msg.startswith("NET/IB : No device found"):
            return {"kind": "net_devices", "transport": "NET/IB", "value": "no device"}
        if m := _NETDEVS.match(msg):
            devs = {int(d["i"]): _iface(d["name"]) for d in _DEV_ITEM.finditer(m["devs"])}
            return {"kind": "net_devices", "transport": f"NET/{m['net'].strip()}", "value": m["devs"].strip(),
                    "interface": ", ".join(devs.values()), "_netdevs": devs}
    if head == "Boots" and (m := _BOOTSTRAP.match(msg)):
        items = [_iface(d["name"]) for d in _DEV_ITEM.finditer(m["what"])] or [_iface(m["what"])]
        return {"kind": "bootstrap", "interface": ", ".join(items), "value": m["what"]}
    if head == "NCCL_" and (m := _ENVSET.match(msg)):
        return {"kind": "env", "detail": m["var"], "value": m["value"]}
    if head == "cudaD" and (m := _DRIVER.match(msg)):
        return {"kind": "driver", "value": m["driver"]}
    return {"kind": "other"}


_LEVELS = ("INFO", "WARN", "TRACE", "ABORT")
_DEV_TOKEN = re.compile(r"\[(\d+)\]")
_HOST_TOKEN = re.compile(r"(?P<host>[^\s:\[\]()]+):(?P<pid>\d+):(?P<tid>\d+)")


def _split_line(line: str) -> dict | None:
    """host, pid, dev, level, source, text of one NCCL line, or None; cheap string work before any regex."""
    at = line.find(" NCCL ")
    if at < 0:
        return _bare_version(line)
    rest = line[at + 6:]
    level, _, text = rest.partition(" ")
    if level not in _LEVELS:
        return _bare_version(line)
    words = line[:at].split()
    src = None
    if words and not words[-1].startswith("[") and ":" in words[-1] and words[-1].rsplit(":", 1)[1].isdigit():
        src = words.pop()
    if not words or not (dm := _DEV_TOKEN.fullmatch(words[-1])):
        return None
    dev = int(dm[1])
    hm = _HOST_TOKEN.search(words[-2]) if len(words) >= 2 else None
    if hm and hm.end() == len(words[-2]):
        return {"host": hm["host"], "pid": int(hm["pid"]), "dev": dev, "level": level, "source": src, "text": text}
    return {"host": None, "pid": None, "dev": dev, "level": level, "source": src, "text": text}


def _bare_version(line: str) -> dict | None:
    v = _VERSION.search(line)
    if v is None:
        return None
    return {"host": None, "pid": None, "dev": None, "level": "INFO", "source": None, "text": line[v.start():]}


def parse_lines(lines: Iterable[str]) -> list[dict]:
    """One dict per NCCL line (see :data:`COLUMNS`); ranks filled in where the log reveals them."""
    rows: list[dict] = []
    last: tuple = (None, None, None)  # (host, pid, dev) of the last prefixed line
    for i, raw in enumerate(lines):
        if "NCCL" not in raw:
            continue
        row = _split_line(raw.rstrip("\n"))
        if row is None:
            continue
        if row["host"] is not None:
            last = (row["host"], row["pid"], row["dev"])
        elif row["dev"] is None:  # a bare "NCCL version" line: printed right after that process's init lines
            row["host"], row["pid"], row["dev"] = last
        row["line"] = i + 1
        row.update(_classify(row["text"]) if row["level"] != "WARN" else {"kind": "warn"})
        rows.append(row)
    _fill(rows)
    return rows


def _fill(rows: list[dict]) -> None:
    """Give every line of a (host, pid, dev) the rank its Init or channel lines revealed; resolve NET devices."""
    ranks: dict[tuple, int] = {}
    netdevs: dict[tuple, dict] = {}
    for r in rows:
        key = (r["host"], r["pid"], r["dev"])
        if r["kind"] in ("init_start", "init_complete", "init_timings", "channel") and r.get("rank") is not None \
                and r["host"] is not None:
            ranks.setdefault(key, r["rank"])
        if r["kind"] == "net_devices" and "_netdevs" in r:
            netdevs[(r["host"], r["pid"], r["transport"])] = r.pop("_netdevs")
    for r in rows:
        r.pop("_devs", None)
        r.pop("_netdevs", None)
        if r.get("rank") is None and r["host"] is not None:
            r["rank"] = ranks.get((r["host"], r["pid"], r["dev"]))
        if r["kind"] == "channel":
            if r["transport"].startswith("NET/"):
                devs = netdevs.get((r["host"], r["pid"], r["transport"]), {})
                r["interface"] = devs.get(r["net_dev"], f"{r['transport']} device {r['net_dev']}")
            else:
                r["interface"] = "intra-node"


def sample_log() -> str:
    """The real public NCCL lines shipped with the workbook (each block names its source URL)."""
    return SAMPLE.read_text()


# What each NCCL variable would show in this table, for the notebook's no-GPU explanation.
NCCL_EFFECTS = {
    "NCCL_DEBUG=INFO": "fills this table at all: versions, 'Using network', channels, 'Init COMPLETE'",
    "NCCL_DEBUG_SUBSYS=INIT,NET": "keeps the lines this table needs and drops per-call noise",
    "NCCL_P2P_DISABLE=1": "intra-node channels change from P2P/IPC or P2P/CUMEM to SHM/direct (or NET): slower",
    "NCCL_SHM_DISABLE=1": "SHM channels move to NET/Socket or NET/IB, even inside one node",
    "NCCL_IB_DISABLE=1": "'Using network IB' becomes 'Using network Socket'; inter-node channels NET/IB -> NET/Socket",
    "NCCL_SOCKET_IFNAME=<if>": "'Bootstrap : Using <if>:<addr>' and 'NET/Socket : Using [0]<if>' name the interface",
    "NCCL_NET_GDR_LEVEL=LOC": "NET/IB/x/GDRDMA channels lose the GDRDMA suffix (data staged through host memory)",
}


def log_rows(logs: dict[int, str]) -> list[dict]:
    """The NCCL lines of each rank's log of a run (``RunResult.logs``); each row gets ``log_rank``, the launcher's
    rank, which is also its ``rank`` where the line does not say."""
    rows = []
    for rank, text in logs.items():
        for r in parse_lines(text.splitlines()):
            rows.append({"log_rank": rank, **r, "rank": rank if r.get("rank") is None else r["rank"]})
    return rows
