"""Check the path between nodes step by step, from any node.

    resolve("node-a")                        # addresses, and whether they are loopback
    probe_port("node-a", 29500)              # open / refused / timeout (+ a firewall hint)
    scan_ports("node-a")                     # 29500-29510 in parallel
    route_to("10.0.0.1")                     # which local interface routes there, its MTU
    would_pick()                             # the interface Gloo and NCCL would use under *_SOCKET_IFNAME
    measure("node-a", port)                  # TCP latency and throughput against `serve` on the peer
    check_path("node-a", 29500)              # all of it as one table of ✔ / ✘ with what to do

``python -m nbhelpers.scenarios.netcheck serve --port P --seconds 20`` is the peer side of :func:`measure`
(a small TCP echo/sink server that exits by itself); ``python -m nbhelpers.scenarios.netcheck check
--master A --port P`` prints :func:`check_path` as JSON (the lab runs it inside a namespace).
Nothing here needs root or torch.
"""
from __future__ import annotations

import argparse
import errno
import ipaddress
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

DEFAULT_PORTS = range(29500, 29511)
HINTS = {
    "open": "something listens there and accepted the connection",
    "refused": "the host answered with a reset: it is reachable but nothing listens on that port (or a firewall "
               "REJECT rule); start the master first, or check the port number",
    "timeout": "no answer at all: a firewall drops the packets (DROP rule, security group) or the host is down; "
               "open the port range on the master (e.g. 29500-29510) for the other nodes",
    "unreachable": "no route to that address from this node: wrong MASTER_ADDR, or the nodes are on different "
                   "networks",
}


# --- names and ports ------------------------------------------------------------------------------
def resolve(host: str) -> dict:
    """Addresses ``host`` resolves to here; loopback ones cannot be reached from another node."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        return {"host": host, "addresses": [], "loopback": False, "error": str(exc)}
    addrs = list(dict.fromkeys(i[4][0] for i in infos))
    loop = [a for a in addrs if ipaddress.ip_address(a.split("%")[0]).is_loopback]
    return {"host": host, "addresses": addrs, "loopback": bool(loop) and len(loop) == len(addrs), "error": None}


def probe_port(host: str, port: int, timeout: float = 2.0) -> dict:
    """Try one TCP connection: ``open``, ``refused``, ``timeout`` or ``unreachable``, and how long it took."""
    t0 = time.perf_counter()
    state, detail = "open", ""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except ConnectionRefusedError:
        state = "refused"
    except (socket.timeout, TimeoutError):
        state = "timeout"
    except OSError as exc:
        state = "unreachable" if exc.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH) else "error"
        detail = str(exc)
    ms = (time.perf_counter() - t0) * 1e3
    return {"host": host, "port": port, "state": state, "ms": round(ms, 1), "hint": detail or HINTS.get(state, "")}


def scan_rows(host: str, ports=DEFAULT_PORTS, timeout: float = 1.5) -> list[dict]:
    """:func:`probe_port` on every port at once (a dropped range costs one timeout, not one per port)."""
    ports = list(ports)
    with ThreadPoolExecutor(max_workers=min(16, len(ports))) as pool:
        return list(pool.map(lambda p: probe_port(host, p, timeout), ports))


def scan_ports(host: str, ports=DEFAULT_PORTS, timeout: float = 1.5):
    """:func:`scan_rows` as a table, one row per port."""
    import pandas as pd

    return pd.DataFrame(scan_rows(host, ports, timeout)).set_index("port")


def firewall_hint(states) -> str:
    """One sentence on what a set of port states says about a firewall."""
    states = set(states)
    if "timeout" in states:
        return ("Some ports time out instead of refusing: packets are dropped on the way (a firewall DROP rule or "
                "a security group), not answered. " + HINTS["timeout"])
    if states == {"refused"}:
        return "Every port refuses: the host is reachable and no firewall drops the packets; nothing listens yet."
    if "unreachable" in states:
        return HINTS["unreachable"]
    return "No sign of a firewall: the ports answer (open or refused)."


# --- interfaces and routes ------------------------------------------------------------------------
def interfaces():
    """Local interfaces in the kernel's order: up, MTU, IPv4 and IPv6 addresses."""
    import pandas as pd
    import psutil

    stats = psutil.net_if_stats()
    rows = []
    for name, addrs in psutil.net_if_addrs().items():
        st = stats.get(name)
        rows.append({"interface": name, "up": bool(st and st.isup), "mtu": st.mtu if st else None,
                     "ipv4": ",".join(a.address for a in addrs if a.family == socket.AF_INET),
                     "ipv6": ",".join(a.address.split("%")[0] for a in addrs if a.family == socket.AF_INET6)})
    return pd.DataFrame(rows, columns=["interface", "up", "mtu", "ipv4", "ipv6"])


def _mtu(dev: str) -> int | None:
    try:
        return int(open(f"/sys/class/net/{dev}/mtu").read())
    except (OSError, ValueError):
        return None


def route_to(addr: str) -> dict:
    """The interface and source address this node would use to reach ``addr`` (``ip route get``)."""
    res = resolve(addr)
    target = res["addresses"][0] if res["addresses"] else addr
    if shutil.which("ip") is None:
        return {"to": target, "dev": None, "src": None, "via": None, "mtu": None, "error": "`ip` is not installed"}
    out = subprocess.run(["ip", "-j", "route", "get", target], capture_output=True, text=True, timeout=5)
    if out.returncode != 0:
        return {"to": target, "dev": None, "src": None, "via": None, "mtu": None, "error": out.stderr.strip()}
    r = json.loads(out.stdout)[0]
    return {"to": target, "dev": r.get("dev"), "src": r.get("prefsrc"), "via": r.get("gateway"),
            "mtu": _mtu(r.get("dev", "")), "error": None}


def _has_address(addrs: list) -> bool:
    return any(a.family == socket.AF_INET or (a.family == socket.AF_INET6 and not a.address.startswith("::1"))
               for a in addrs)


def nccl_match(spec: str, names: list[str]) -> list[str]:
    """NCCL_SOCKET_IFNAME's rules: comma list of prefixes; ``=`` exact names; ``^`` excludes (``^=`` exact)."""
    exclude = spec.startswith("^")
    spec = spec[1:] if exclude else spec
    exact = spec.startswith("=")
    spec = spec[1:] if exact else spec
    parts = [p for p in spec.split(",") if p]

    def hit(name: str) -> bool:
        return any(name == p if exact else name.startswith(p) for p in parts)

    return [n for n in names if hit(n) != exclude]


def nccl_pick(spec: str | None = None) -> dict:
    """Which interfaces NCCL's socket transport and bootstrap would use (the first is the bootstrap's)."""
    import psutil

    addrs = psutil.net_if_addrs()
    names = [n for n, a in addrs.items() if _has_address(a)]
    if spec:
        found = nccl_match(spec, names)
        how = f"NCCL_SOCKET_IFNAME={spec}"
        if not found:
            return {"library": "NCCL", "setting": how, "picks": "", "why": "no interface matches: NCCL fails with "
                    "'Bootstrap : no socket interface found' (prefix match; '=' for exact, '^' to exclude)"}
    else:
        for how, pattern in (("default: ib* first", "ib"), ("default: not docker*, not lo", "^docker,lo"),
                             ("default: docker*", "docker"), ("default: lo (last resort)", "lo")):
            found = nccl_match(pattern, names)
            if found:
                break
        how = f"NCCL_SOCKET_IFNAME unset ({how})"
    return {"library": "NCCL", "setting": how, "picks": ",".join(found), "why": "first one is used to bootstrap"}


def gloo_pick(spec: str | None = None) -> dict:
    """Which interface Gloo would bind: GLOO_SOCKET_IFNAME's exact names, else the hostname's address."""
    import psutil

    addrs = psutil.net_if_addrs()
    if spec:
        missing = [n for n in spec.split(",") if n not in addrs or not _has_address(addrs[n])]
        if missing:
            return {"library": "Gloo", "setting": f"GLOO_SOCKET_IFNAME={spec}", "picks": "",
                    "why": f"no such interface (or no address): init fails with 'Unable to find address for: "
                           f"{missing[0]}' (exact names only, no prefixes)"}
        return {"library": "Gloo", "setting": f"GLOO_SOCKET_IFNAME={spec}", "picks": spec, "why": "exact name(s)"}
    host = socket.gethostname()
    res = resolve(host)
    local = {a.address.split("%")[0]: n for n, lst in addrs.items() for a in lst}
    for a in res["addresses"]:
        if a in local:
            why = (f"hostname {host!r} resolves to {a}: loopback, peers on other nodes cannot connect to it"
                   if ipaddress.ip_address(a).is_loopback else f"hostname {host!r} resolves to {a}")
            return {"library": "Gloo", "setting": "GLOO_SOCKET_IFNAME unset", "picks": local[a], "why": why}
    return {"library": "Gloo", "setting": "GLOO_SOCKET_IFNAME unset", "picks": "lo",
            "why": f"hostname {host!r} resolves to {res['addresses'] or 'nothing'}, not an address of this node: "
                   "Gloo falls back to loopback ('Using the loopback address as fallback')"}


def would_pick(env: dict | None = None, master: str | None = None):
    """Gloo's and NCCL's choice under ``env`` (default: this process's), and whether it routes to ``master``."""
    import pandas as pd

    return pd.DataFrame(pick_rows(env, master))


def pick_rows(env: dict | None = None, master: str | None = None) -> list[dict]:
    env = os.environ if env is None else env
    rows = [gloo_pick(env.get("GLOO_SOCKET_IFNAME") or None), nccl_pick(env.get("NCCL_SOCKET_IFNAME") or None)]
    if master:
        dev = route_to(master).get("dev")
        for row in rows:
            picks = row["picks"].split(",") if row["picks"] else []
            row["route to master"] = dev
            row["ok"] = bool(picks) and dev in picks
    return rows


# --- latency and throughput -----------------------------------------------------------------------
def serve(port: int, seconds: float = 20.0, host: str = "0.0.0.0", ready=None) -> int:
    """A bounded TCP peer: ``P`` lines are echoed (latency), ``B n`` then n bytes are sunk and acknowledged."""
    deadline = time.monotonic() + seconds
    served = 0
    with socket.socket() as srv:
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind((host, port))
        srv.listen(4)
        srv.settimeout(0.2)
        if ready:
            ready()
        print(f"netcheck serving on {host}:{port} for {seconds:g} s", flush=True)
        while time.monotonic() < deadline:
            try:
                conn, _ = srv.accept()
            except (socket.timeout, TimeoutError):
                continue
            with conn:
                conn.settimeout(max(0.1, deadline - time.monotonic()))
                try:
                    _handle(conn)
                    served += 1
                except OSError:
                    pass
    return served


def _handle(conn: socket.socket) -> None:
    f = conn.makefile("rb")
    while True:
        line = f.readline()
        if not line:
            return
        if line.startswith(b"P"):
            conn.sendall(line)
        elif line.startswith(b"B"):
            n, got = int(line.split()[1]), 0
            while got < n:
                chunk = f.read1(min(1 << 20, n - got)) if hasattr(f, "read1") else f.read(min(1 << 20, n - got))
                if not chunk:
                    return
                got += len(chunk)
            conn.sendall(f"OK {got}\n".encode())


def measure(host: str, port: int, pings: int = 20, bulk_mb: float = 4.0, timeout: float = 10.0) -> dict:
    """Round-trip latency (small messages) and one-way TCP throughput to a :func:`serve` peer."""
    t0 = time.perf_counter()
    with socket.create_connection((host, port), timeout=timeout) as s:
        connect_ms = (time.perf_counter() - t0) * 1e3
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        f = s.makefile("rb")
        rtts = []
        for i in range(pings):
            t = time.perf_counter()
            s.sendall(f"P {i:060d}\n".encode())
            f.readline()
            rtts.append((time.perf_counter() - t) * 1e3)
        n = int(bulk_mb * 2**20)
        block = b"\0" * (1 << 20)
        t = time.perf_counter()
        s.sendall(f"B {n}\n".encode())
        sent = 0
        while sent < n:
            s.sendall(block[:min(len(block), n - sent)])
            sent += min(len(block), n - sent)
        ack = f.readline()
        secs = time.perf_counter() - t
    return {"peer": f"{host}:{port}", "connect ms": round(connect_ms, 2), "rtt ms (median)": round(statistics.median(rtts), 3),
            "rtt ms (max)": round(max(rtts), 3), "MB sent": round(n / 2**20, 1), "MB/s": round(n / secs / 1e6, 1),
            "acked": ack.startswith(b"OK")}


# --- everything at once ---------------------------------------------------------------------------
def check_path(master: str, port: int = 29500, ports=DEFAULT_PORTS, timeout: float = 1.5,
               env: dict | None = None) -> list[dict]:
    """Every check from this node towards the master, each ✔/✘ with what it found and what to do."""
    rows = []

    def add(check, ok, found, todo=""):
        rows.append({"check": check, "ok": ok, "found": found, "what to do": "" if ok else todo})

    res = resolve(master)
    add("resolve master", bool(res["addresses"]) and not res["loopback"],
        ", ".join(res["addresses"]) or res["error"],
        "use an address the other nodes can reach (not 127.x, not a name that resolves to it)")
    route = route_to(master)
    add("route to master", route["dev"] is not None and not (route["dev"] == "lo" and not res["loopback"]),
        f"dev {route['dev']} src {route['src']}" + (f" via {route['via']}" if route["via"] else "")
        + f", MTU {route['mtu']}" if route["dev"] else route["error"], "fix MASTER_ADDR or the routing table")
    p = probe_port(master, port, timeout)
    add(f"rendezvous port {port}", p["state"] == "open", f"{p['state']} in {p['ms']} ms", p["hint"])
    others = [q for q in ports if q != port]
    if others:
        counts: dict[str, int] = {}
        for r in scan_rows(master, others, timeout):
            counts[r["state"]] = counts.get(r["state"], 0) + 1
        states = counts
        add(f"ports {others[0]}-{others[-1]}", "timeout" not in states and "unreachable" not in states,
            ", ".join(f"{n} {s}" for s, n in states.items()), firewall_hint(states))
    for row in pick_rows(env, master):
        add(f"{row['library']} interface", bool(row.get("ok")), f"{row['setting']} -> {row['picks'] or 'none'} "
            f"(route to master: {row.get('route to master')})",
            f"{row['why']}; set {row['library'].upper()}_SOCKET_IFNAME={route['dev']}")
    return rows


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m nbhelpers.scenarios.netcheck", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="a bounded TCP echo/sink peer for measure()")
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--seconds", type=float, default=20.0)
    s.add_argument("--host", default="0.0.0.0")
    c = sub.add_parser("check", help="check_path() as JSON")
    c.add_argument("--master", required=True)
    c.add_argument("--port", type=int, default=29500)
    c.add_argument("--timeout", type=float, default=1.5)
    m = sub.add_parser("measure", help="measure() against a serve peer, as JSON")
    m.add_argument("--host", required=True)
    m.add_argument("--port", type=int, required=True)
    m.add_argument("--mb", type=float, default=4.0)
    args = p.parse_args(argv)
    if args.cmd == "serve":
        serve(args.port, args.seconds, args.host)
    elif args.cmd == "check":
        json.dump(check_path(args.master, args.port, timeout=args.timeout), sys.stdout)
    else:
        json.dump(measure(args.host, args.port, bulk_mb=args.mb), sys.stdout)


if __name__ == "__main__":
    main()
