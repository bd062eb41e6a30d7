"""Two hosts on one machine: two network namespaces joined by a veth pair, one "node" in each.

    with Lab() as lab:                      # root only; lab.a / lab.b are the namespaces
        lab.block_port(29500, "drop")       # nftables inside node A's namespace
        lab.cap_bandwidth("100mbit")        # tc tbf on both ends of the veth
        lab.run(["python", "-c", "..."], node=1)

Everything the lab creates lives inside its own two namespaces (``nbh5-<pid>-<id>-a`` / ``-b``):
the veth pair is created directly inside them, the addresses (10.77.0.1/24 and 10.77.0.2/24)
exist only there, firewall rules and qdiscs are set inside them.  Closing the lab kills every
process still inside, then deletes both namespaces, which takes the veth, the rules and the
qdiscs with them.  It closes on ``with`` exit, on an exception, on a kernel interrupt, and at
interpreter exit (atexit); :func:`cleanup_stale` removes the namespaces of dead owners (a
kernel killed with SIGKILL cannot clean up after itself).

This kernel has no ``netem`` qdisc (``tc qdisc ... netem delay`` fails): latency cannot be
injected here, only a bandwidth cap (``tbf``).  :func:`netem_available` checks it for real.
"""
from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass

import psutil

from nbhelpers.errors import WorkbookError
from nbhelpers.runtime.launchspec import child_env
from nbhelpers.scenarios.api import Gallery

PREFIX = "nbh5-"
SUBNET = "10.77.0"
ADDRS = (f"{SUBNET}.1", f"{SUBNET}.2")
IFNAMES = ("veth-a", "veth-b")
NAME = re.compile(rf"^{PREFIX}(\d+)-([0-9a-f]+)-[ab]$")
_open: dict[str, "Lab"] = {}
_hook = False


class LabError(WorkbookError):
    """The lab could not be set up (not root, a tool missing, a command refused)."""


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def why_not() -> str | None:
    """None when the lab can run here, else the reason in one sentence."""
    if not is_root():
        return "the two-host lab needs root (network namespaces and veth pairs); run the notebook as root or skip it"
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is missing: apt-get install -y iproute2"
    return None


NO_FIREWALL = ("neither nft nor iptables is installed, so no port can be blocked: `make sysdeps` (root) or "
               "`apt-get install -y nftables` installs it")


def firewall_tool() -> str | None:
    """``nft`` if installed (preferred), else ``iptables``, else None."""
    return "nft" if shutil.which("nft") else "iptables" if shutil.which("iptables") else None


def sh(*cmd: str, check: bool = True, timeout: float = 10.0) -> subprocess.CompletedProcess:
    res = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check and res.returncode != 0:
        raise LabError(f"`{' '.join(cmd)}` failed ({res.returncode}): {(res.stderr or res.stdout).strip()}",
                       "run as root on Linux with iproute2 (and nftables for the firewall faults)")
    return res


def namespaces(others: bool = True) -> list[str]:
    """The workbook's namespaces that exist now.  ``others=False`` leaves out those of other live processes
    (another notebook or test running labs beside this one): what is left is this process's (and its
    children's) and any left behind by a process that is gone."""
    out = sh("ip", "netns", "list", check=False).stdout
    names = [line.split()[0] for line in out.splitlines() if line.startswith(PREFIX)]
    if others:
        return names
    me = psutil.Process()
    mine = {me.pid, *(c.pid for c in me.children(recursive=True))}

    def foreign(ns: str) -> bool:
        m = NAME.match(ns)
        return m is not None and int(m.group(1)) not in mine and psutil.pid_exists(int(m.group(1)))
    return [ns for ns in names if not foreign(ns)]


def kill_inside(ns: str, grace: float = 2.0) -> int:
    """TERM every process inside ``ns``, wait up to ``grace`` s, KILL the rest; returns how many there were."""
    pids = [int(p) for p in sh("ip", "netns", "pids", ns, check=False).stdout.split()]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + (grace if sig == signal.SIGTERM else 3.0)
        while time.monotonic() < deadline and any(psutil.pid_exists(p) and not _zombie(p) for p in pids):
            time.sleep(0.05)
    return len(pids)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def delete_namespace(ns: str) -> None:
    kill_inside(ns)
    sh("ip", "netns", "delete", ns, check=False)


def cleanup_stale(everything: bool = False) -> list[str]:
    """Delete the workbook's namespaces whose owner process is gone (all of them with ``everything``)."""
    removed = []
    for ns in namespaces():
        m = NAME.match(ns)
        if ns in _open and not everything:
            continue
        if everything or m is None or not psutil.pid_exists(int(m.group(1))):
            delete_namespace(ns)
            removed.append(ns)
    return removed


def netem_available() -> bool:
    """Try a real ``tc qdisc add ... netem delay`` in a scratch namespace; False on this kernel."""
    ns = f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:6]}-a"
    sh("ip", "netns", "add", ns)
    try:
        res = sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "10ms",
                 check=False)
        return res.returncode == 0
    finally:
        delete_namespace(ns)


@dataclass
class Lab:
    """Two namespaces ``a`` (node 0, 10.77.0.1) and ``b`` (node 1, 10.77.0.2) joined by a veth pair."""
    a: str = ""
    b: str = ""
    mtu: int = 1500

    def __post_init__(self):
        reason = why_not()
        if reason:
            raise LabError(reason, "run as root (CI does), or read the lab's results table in the README")
        tag = f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.a, self.b = self.a or f"{tag}-a", self.b or f"{tag}-b"
        self.rules: list[tuple[int, str]] = []
        self.closed = True

    @property
    def nodes(self) -> tuple[str, str]:
        return (self.a, self.b)

    def open(self) -> "Lab":
        global _hook
        cleanup_stale()
        if not _hook:
            atexit.register(close_all)
            _hook = True
        _open[self.a] = _open[self.b] = self
        self.closed = False
        try:
            for ns in self.nodes:
                sh("ip", "netns", "add", ns)
                sh("ip", "-n", ns, "link", "set", "lo", "up")
            # created straight inside the namespaces: no veth ever exists in the host's namespace
            sh("ip", "link", "add", IFNAMES[0], "netns", self.a, "mtu", str(self.mtu), "type", "veth",
               "peer", "name", IFNAMES[1], "netns", self.b, "mtu", str(self.mtu))
            for ns, ifname, addr in zip(self.nodes, IFNAMES, ADDRS):
                sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", ifname)
                sh("ip", "-n", ns, "link", "set", ifname, "up")
        except BaseException:
            self.close()
            raise
        return self

    def __enter__(self) -> "Lab":
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for ns in self.nodes:
            delete_namespace(ns)
            _open.pop(ns, None)

    def __repr__(self) -> str:
        return f"<Lab {self.a} ({ADDRS[0]}) <-> {self.b} ({ADDRS[1]}){' closed' if self.closed else ''}>"

    # --- running things inside a node ---------------------------------------------------------
    def prefix(self, node: int) -> list[str]:
        """The command prefix that runs a program inside node ``node``'s namespace."""
        return ["ip", "netns", "exec", self.nodes[node]]

    def exec(self, node: int, *cmd: str, check: bool = True, timeout: float = 30.0) -> subprocess.CompletedProcess:
        return sh(*self.prefix(node), *cmd, check=check, timeout=timeout)

    def addr(self, node: int) -> str:
        return ADDRS[node]

    def ifname(self, node: int) -> str:
        return IFNAMES[node]

    # --- faults -------------------------------------------------------------------------------
    def block_port(self, port: int, how: str = "drop", node: int = 0) -> str:
        """Drop or reject (TCP reset) TCP to ``port`` arriving at ``node`` from the other node (its veth).

        Only traffic from outside is blocked, as a host firewall would: the node still reaches
        its own port over loopback, so the store starts fine and only the peer is locked out.
        """
        if how not in ("drop", "reject"):
            raise ValueError("how must be 'drop' or 'reject'")
        tool = firewall_tool()
        if tool is None:
            raise LabError(NO_FIREWALL)
        if tool == "nft":
            verdict = "drop" if how == "drop" else "reject with tcp reset"
            self.exec(node, "nft", "add", "table", "inet", "nbh")
            self.exec(node, "nft", "add", "chain", "inet", "nbh", "input",
                      "{ type filter hook input priority 0 ; policy accept ; }")
            rule = f"iifname {IFNAMES[node]} tcp dport {port} {verdict}"
            self.exec(node, "nft", "add", "rule", "inet", "nbh", "input", *rule.split())
        else:
            target = ["DROP"] if how == "drop" else ["REJECT", "--reject-with", "tcp-reset"]
            rule = f"-i {IFNAMES[node]} -p tcp --dport {port} -j {' '.join(target)}"
            self.exec(node, "iptables", "-A", "INPUT", *rule.split())
        self.rules.append((node, rule))
        return f"{tool} ({self.nodes[node]}): {rule}"

    def cap_bandwidth(self, rate: str = "100mbit", burst: str = "64kb", latency: str = "50ms") -> list[str]:
        """A token-bucket cap (``tc qdisc ... tbf``) on the egress of both veth ends."""
        done = []
        for node in (0, 1):
            args = ["tc", "qdisc", "replace", "dev", IFNAMES[node], "root", "tbf", "rate", rate, "burst", burst,
                    "latency", latency]
            self.exec(node, *args)
            done.append(" ".join(args))
        return done

    def measure(self, mb: float = 4.0, port: int = 29600) -> dict:
        """TCP latency and throughput from node 1 to node 0 with netcheck's bounded server and client."""
        return self.netcheck_with_server(port, 20, 1, "measure", "--host", ADDRS[0], "--port", str(port),
                                         "--mb", str(mb))

    def netcheck_with_server(self, port: int, seconds: float, node: int, *args: str, env: dict | None = None) -> dict:
        """``python -m nbhelpers.scenarios.netcheck ARGS`` inside ``node`` while netcheck's bounded server listens on node 0's
        ``port`` (for at most ``seconds``); the client's JSON answer."""
        server = subprocess.Popen([*self.prefix(0), sys.executable, "-m", "nbhelpers.scenarios.netcheck", "serve", "--port",
                                   str(port), "--seconds", str(seconds)], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=_env())
        try:
            server.stdout.readline()  # "serving on ..." once it listens
            out = subprocess.run([*self.prefix(node), sys.executable, "-m", "nbhelpers.scenarios.netcheck", *args],
                                 capture_output=True, text=True, timeout=30, env={**_env(), **(env or {})},
                                 stdin=subprocess.DEVNULL)
            if out.returncode != 0:
                raise LabError(f"netcheck {args[0]} inside {self.nodes[node]} failed: {out.stderr.strip()[-400:]}")
            return json.loads(out.stdout)
        finally:
            server.kill()
            server.wait()

    def state(self) -> dict:
        """What exists inside the lab now: interfaces, firewall rules, qdiscs (for the notebook)."""
        out = {}
        for node in (0, 1):
            links = self.exec(node, "ip", "-br", "addr", check=False).stdout.strip()
            qdisc = self.exec(node, "tc", "qdisc", "show", "dev", IFNAMES[node], check=False).stdout.strip()
            fw = ""
            if firewall_tool() == "nft":
                fw = self.exec(node, "nft", "list", "ruleset", check=False).stdout.strip()
            out[self.nodes[node]] = {"addresses": links, "qdisc": qdisc, "firewall": fw or "(none)"}
        return out


def close_all() -> None:
    for lab in list({id(v): v for v in _open.values()}.values()):
        lab.close()


# --- the lab's scenarios: one fault each, injected for real, then checked and classified ---------
PORT = 29500
FAULTS = {
    "healthy": ("nothing injected", None),
    "port-drop": ("nft on node 0: drop TCP to the rendezvous port from node 1", "rendezvous_timeout"),
    "port-reject": ("nft on node 0: reject (TCP reset) the rendezvous port from node 1", "rendezvous_timeout"),
    "ifname-unset": ("GLOO_SOCKET_IFNAME unset (the hostname resolves to 127.0.0.1)", "network_interface"),
    "ifname-lo": ("GLOO_SOCKET_IFNAME=lo on both nodes", "network_interface"),
    "ifname-missing": ("GLOO_SOCKET_IFNAME=eth9 (no such interface)", "network_interface"),
    "bandwidth-cap": ("tc tbf rate 100mbit on both veth ends (no netem here: no latency)", None),
}

START_FAULTS = ("ifname-unset", "ifname-lo")
"""Faults that strike inside ``init_process_group`` (no node can reach the address the other announced): there
``timeout`` bounds start-up too.  The others start with the long start-up timeout, then shorten it."""


@dataclass
class Scenario:
    """What one lab run did and found."""
    fault: str
    injected: str
    result: object            # MultiResult
    checks: list              # netcheck.check_path rows from node 1, under the fault
    expected: str | None

    def other(self, first: int | None) -> str:
        """What the node that did not fail first ended with."""
        if first is None:
            return ""
        f = self.result.node_failure(1 - first)
        if f is None:
            return f"node {1 - first}: {self.result.nodes[1 - first].status}"
        after = f" after {f[3]:.1f} s" if f[3] is not None else ""
        return f"node {1 - first}: {_short(f[2])[:70]}{after}"

    @property
    def row(self) -> dict:
        res = self.result
        ff = res.first_failure or {}
        failed_checks = [c["check"] for c in self.checks if not c["ok"]]
        sweep = res.sweep()
        big = sweep[sweep["bytes"] == sweep["bytes"].max()]["MB/s"].min() if not sweep.empty else None
        return {"fault": self.fault, "injected": self.injected, "status": res.status,
                "failed after s": ff.get("in stage s"), "from launch s": ff.get("seconds"),
                "wall s": round(res.wall_s, 1),
                "failed first": f"node {ff['node']} ({ff['stage']})" if ff else "",
                "error": _short(ff.get("error", "")), "other node": self.other(ff.get("node")), "category": res.category, "expected": self.expected,
                "classified right": res.category == self.expected,
                "checks flag": ", ".join(failed_checks) or "none",
                "largest all_reduce MB/s": big}


def _short(err: str) -> str:
    err = re.sub(r"\[enforce fail at \S+\] |\[/\S+\] |Gloo connectFullMesh failed with ", "", err)
    err = re.sub(r"^(torch\.distributed\.\S*\.|RuntimeError: )", "", err)
    return err[:110]


def fault_env(lab: "Lab", fault: str) -> list[dict]:
    """Each node's environment for ``fault``: the right GLOO_SOCKET_IFNAME unless the fault changes it."""
    if fault == "ifname-unset":
        return [{}, {}]
    name = {"ifname-lo": "lo", "ifname-missing": "eth9"}.get(fault)
    return [{"GLOO_SOCKET_IFNAME": name or lab.ifname(n)} for n in (0, 1)]


def check_from(lab: "Lab", node: int, env: dict, timeout: float = 1.5) -> list[dict]:
    """netcheck's checks towards node 0's rendezvous port, run inside ``node`` while a listener holds it."""
    return lab.netcheck_with_server(PORT, 15, node, "check", "--master", ADDRS[0], "--port", str(PORT),
                                    "--timeout", str(timeout), env=env)


def _env() -> dict:
    env = child_env()
    env.pop("GLOO_SOCKET_IFNAME", None)
    return env


def run_fault(fault: str, *, timeout: float = 3.0, join_timeout: int = 10, read_timeout: int = 5,
              sizes: str = "4K,64K,1M,4M", iters: str = "1,2,2,2", run_timeout: float = 90.0,
              live: bool | None = False, lab: "Lab | None" = None) -> Scenario:
    """One lab world (one rank per node, the staged test) with ``fault`` injected for real."""
    from nbhelpers.runtime.multinode import Plan, start_nodes

    if fault not in FAULTS:
        raise ValueError(f"unknown fault {fault!r}; one of {', '.join(FAULTS)}")
    own = lab is None
    lab = lab or Lab().open()
    try:
        injected, expected = FAULTS[fault]
        if fault in ("port-drop", "port-reject"):
            injected = lab.block_port(PORT, fault.split("-")[1])
        elif fault == "bandwidth-cap":
            injected = lab.cap_bandwidth("100mbit")[0].replace(lab.ifname(0), "veth-a|b")
        envs = fault_env(lab, fault)
        checks = check_from(lab, 1, envs[1])
        start = ["--start-timeout", str(timeout)] if fault in START_FAULTS else []
        if not fault.startswith("port-"):  # the rendezvous is not what fails: its timeouts must not cover a slow start
            join_timeout, read_timeout = max(join_timeout, 60), max(read_timeout, 30)
        plan = Plan(nnodes=2, nproc_per_node=1, master_addr=ADDRS[0], port=PORT, target="staged",
                    args=["--backend", "gloo", "--timeout", str(timeout), *start, "--sizes", sizes, "--iters", iters],
                    join_timeout=join_timeout, read_timeout=read_timeout)
        mr = start_nodes(plan, [lab.prefix(0), lab.prefix(1)], local_addrs=list(ADDRS), envs=envs,
                         timeout=run_timeout, name=f"lab-{fault}")
        return Scenario(fault, injected, mr.wait(live=live), checks, expected)
    finally:
        if own:
            lab.close()


def run_lab(faults=tuple(FAULTS), parallel: int = 3, **kw):
    """Every fault in its own fresh lab, ``parallel`` labs at a time; the results table.

    Labs are independent (each has its own two namespaces), so several run at once; the
    scenarios are in ``gallery.runs``.  Progress: one line per finished fault.
    """
    from concurrent.futures import ThreadPoolExecutor, as_completed

    import pandas as pd

    skipped = {f: NO_FIREWALL for f in faults if f.startswith("port-") and firewall_tool() is None}
    if skipped:
        print(f"skipping {', '.join(skipped)}: {NO_FIREWALL}", file=sys.stderr)
    faults = [f for f in faults if f not in skipped]
    scenarios = {}
    t0 = time.monotonic()
    pool = ThreadPoolExecutor(max_workers=max(1, parallel))
    try:
        futures = {pool.submit(run_fault, f, **kw): f for f in faults}
        for fut in as_completed(futures):
            s = fut.result()
            scenarios[s.fault] = s
            print(f"[{time.monotonic() - t0:5.1f}s] {s.fault}: {s.result.status}, classified {s.result.category}",
                  file=sys.stderr, flush=True)
    except BaseException:  # an interrupt or a failed lab: stop the others now, not when their timeouts strike
        pool.shutdown(wait=False, cancel_futures=True)
        close_all()
        raise
    finally:
        pool.shutdown(wait=True)
    scenarios = {f: scenarios[f] for f in faults}
    rows = [s.row for s in scenarios.values()] + [
        {"fault": f, "injected": FAULTS[f][0], "status": "skipped", "error": why, "expected": FAULTS[f][1],
         "classified right": None} for f, why in skipped.items()]
    table = pd.DataFrame(rows).set_index("fault")
    return Gallery(table, scenarios)
