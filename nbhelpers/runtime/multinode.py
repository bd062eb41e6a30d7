"""One world over several nodes: the same torchrun on every node, started together, read together.

    plan = Plan(nnodes=2, nproc_per_node=1, master_addr="10.0.0.1", port=29500)
    print(plan.commands()[1])         # what to paste on node 1
    print(plan.slurm_script())        # or sbatch this
    plan.ssh_argv(["node-a", "node-b"])   # argv lists that would start each node over ssh
    res = plan.start(node_rank=0).wait()  # start this node's ranks from the notebook

c10d rendezvous is the engine: every node runs the same ``torchrun --nnodes N --rdzv-backend c10d
--rdzv-endpoint MASTER:PORT --rdzv-id ID`` with its own ``--node-rank``; the store lives on the
master node (``is_host``).  :class:`MultiRun` starts several nodes' Runs (in the lab, one per
network namespace), waits on them together with one deadline, and returns a :class:`MultiResult`:
per-node status, the stage each rank reached, both nodes' logs side by side, the classifier's
reading per node, and which node failed first.
"""
from __future__ import annotations

import html
import re
import shlex
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Sequence

from nbhelpers.runtime.launcher import Run, RunResult
from nbhelpers.runtime.launchspec import LaunchSpec, child_env

FORWARD_ENV = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "NCCL_DEBUG", "NCCL_IB_DISABLE", "TORCH_DISTRIBUTED_DEBUG")


@dataclass
class Plan:
    """The parameters every node must agree on, and the per-node command each one runs."""
    nnodes: int = 2
    nproc_per_node: int = 1
    master_addr: str = "127.0.0.1"
    port: int = 29500
    target: str = "staged"
    args: Sequence[str] = ()
    rdzv_id: str = field(default_factory=lambda: f"nbh-{uuid.uuid4().hex[:8]}")
    join_timeout: int = 60         # how long the rendezvous waits for every node (c10d join_timeout)
    read_timeout: int = 10         # how long a node waits to reach the store (c10d read_timeout)
    env: dict = field(default_factory=lambda: {"LOGLEVEL": "INFO"})  # torchrun then logs its rendezvous
    python: str = "python"

    @property
    def endpoint(self) -> str:
        return f"{self.master_addr}:{self.port}"

    def rdzv_conf(self, node_rank: int) -> dict:
        return {"join_timeout": self.join_timeout, "read_timeout": self.read_timeout,
                "is_host": int(node_rank == 0)}

    def spec(self, node_rank: int | str, local_addr: str | None = None) -> LaunchSpec:
        """Node ``node_rank``'s torchrun (a shell expression such as ``$SLURM_NODEID`` leaves is_host to the
        hostname check); :meth:`run` gives the launcher the same spec."""
        conf = self.rdzv_conf(node_rank if isinstance(node_rank, int) else -1)
        if not isinstance(node_rank, int):
            conf.pop("is_host")
        return LaunchSpec(self.target, self.args, self.nproc_per_node, self.nnodes, self.endpoint, self.rdzv_id,
                          conf, node_rank=node_rank, local_addr=local_addr)

    def command(self, node_rank: int, local_addr: str | None = None) -> str:
        """The shell line for node ``node_rank`` (environment first, then torchrun)."""
        env = " ".join(f"{k}={shlex.quote(str(v))}" for k, v in self.env.items())
        line = shlex.join(self.spec(node_rank, local_addr).argv(self.python))
        return f"{env} {line}" if env else line

    def commands(self) -> dict[int, str]:
        """One copy-paste line per node; only ``--node-rank`` (and is_host) differ."""
        return {n: self.command(n) for n in range(self.nnodes)}

    def slurm_script(self, job_name: str = "nbh-multinode", time_limit: str = "00:10:00") -> str:
        """An sbatch script: one task per node, the first node of the allocation hosts the store."""
        env = "".join(f"export {k}={shlex.quote(str(v))}\n" for k, v in self.env.items())
        args = self.spec("$SLURM_NODEID").torchrun_args()
        args[args.index("--rdzv-endpoint") + 1] = f"$MASTER_ADDR:{self.port}"
        torchrun = " ".join(a if a.startswith("$") else shlex.quote(a) for a in args)
        return (f"#!/bin/bash\n#SBATCH --job-name={job_name}\n#SBATCH --nodes={self.nnodes}\n"
                f"#SBATCH --ntasks-per-node=1\n#SBATCH --time={time_limit}\nset -euo pipefail\n"
                "export MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\n"
                f"{env}"
                "# one torchrun per node; each one's node rank is its SLURM_NODEID (single quotes: expand per node)\n"
                f"srun --kill-on-bad-exit=1 bash -c '{self.python} -m torch.distributed.run {torchrun}'\n")

    def ssh_argv(self, hosts: Sequence[str], workdir: str | None = None) -> list[list[str]]:
        """Argv lists that start node i on ``hosts[i]`` over ssh (host 0 is the master).

        ``-tt`` gives the remote torchrun a terminal, so it gets SIGHUP when the local ssh is
        stopped; BatchMode fails at once instead of asking for a password.
        """
        if len(hosts) != self.nnodes:
            raise ValueError(f"{self.nnodes} nodes need {self.nnodes} hosts, got {len(hosts)}")
        out = []
        for n, host in enumerate(hosts):
            remote = (f"cd {shlex.quote(workdir)} && " if workdir else "") + self.command(n)
            out.append(["ssh", "-tt", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", host, remote])
        return out

    def run(self, node_rank: int = 0, *, local_addr: str | None = None, prefix: Sequence[str] = (),
            env: dict | None = None, timeout: float = 120.0, name: str | None = None, log_dir=None) -> Run:
        """Node ``node_rank``'s ranks as a :class:`~nbhelpers.runtime.launcher.Run` (not started): its torchrun
        is this plan's :meth:`spec` for the node, under the rank shim."""
        spec = self.spec(node_rank, local_addr)
        return Run(spec.target, spec.args, nproc=spec.nproc_per_node, timeout=timeout,
                   env={**self.env, **(env or {})}, name=name or f"node{node_rank}", log_dir=log_dir,
                   nnodes=spec.nnodes, node_rank=node_rank, rdzv_endpoint=spec.endpoint, rdzv_id=spec.rdzv_id,
                   rdzv_conf=spec.rdzv_conf, local_addr=local_addr, prefix=prefix)

    def start(self, node_rank: int = 0, **kw) -> Run:
        """Start node ``node_rank``'s ranks from here (see :meth:`run`)."""
        return self.run(node_rank, **kw).start()


class MultiRun:
    """Several nodes' Runs of one world, waited on together under one deadline."""

    def __init__(self, runs: Sequence[Run], timeout: float = 120.0, name: str = "multinode"):
        self.runs, self.timeout, self.name = list(runs), timeout, name
        self.started = min((r.started for r in self.runs if r.started), default=time.time())
        self._seen: dict = {}

    def _progress(self, handle) -> None:
        rows = progress_rows(self.runs)
        if handle is not None:
            from IPython.display import HTML

            handle.update(HTML(_progress_html(rows, time.time() - self.started, self.timeout)))
            return
        for row in rows:
            key = (row["node"], row["rank"])
            if self._seen.get(key) != (row["stage"], row["status"]):
                self._seen[key] = (row["stage"], row["status"])
                print(f"[{time.time() - self.started:6.1f}s] node {row['node']} rank {row['rank']}: "
                      f"{row['stage']} {row['status']}", file=sys.stderr, flush=True)

    def wait(self, live: bool | None = None) -> "MultiResult":
        from nbhelpers.runtime.progress import in_kernel

        handle = None
        show = in_kernel() if live is None else live
        if show and in_kernel():
            from IPython.display import HTML, display

            handle = display(HTML(""), display_id=True)
        cleanup: dict[int, dict] = {}
        last = 0.0
        try:
            while any([r.poll() for r in self.runs]):
                if time.time() - self.started > self.timeout:
                    cleanup = {i: r.stop("timeout") for i, r in enumerate(self.runs)}
                    break
                if show and time.monotonic() - last > 0.5:
                    last = time.monotonic()
                    self._progress(handle)
                time.sleep(0.1)
        except KeyboardInterrupt:
            for r in self.runs:
                r.stop("interrupted")
            for r in self.runs:
                r.finish()
            print(f"Interrupted: every node of {self.name} was stopped.", file=sys.stderr)
            raise
        finally:  # whatever happened above, no node outlives this call
            for r in self.runs:
                if r.proc is not None and r.proc.poll() is None:
                    r.stop("stopped")
        results = [r.finish(cleanup.get(i)) for i, r in enumerate(self.runs)]
        res = MultiResult(self.name, results, self.started)
        if show:
            self._progress(handle)
        return res


def progress_rows(runs: Sequence[Run]) -> list[dict]:
    rows = []
    for node, run in enumerate(runs):
        ranks = run.local_ranks()
        if not ranks:
            log = (run.log_dir / "torchrun.log")
            last = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
            rows.append({"node": node, "rank": "-", "stage": "rendezvous (torchrun)", "status": "",
                         "last": (last[0] if last else "")[-140:]})
        for r in ranks:
            t = run.tails[r]
            ev = t.events[-1] if t.events else None
            rows.append({"node": node, "rank": r, "stage": ev["stage"] if ev else "starting",
                         "status": ev["status"] if ev else "", "last": (t.lines[-1] if t.lines else "")[-140:]})
    return rows


def _progress_html(rows: list[dict], elapsed: float, timeout: float) -> str:
    cells = "".join("<tr>" + "".join(f"<td>{html.escape(str(row[k]))}</td>" for k in
                                     ("node", "rank", "stage", "status", "last")) + "</tr>" for row in rows)
    return (f"<div>{elapsed:.1f} s of {timeout:.0f} s<table><tr><th>node</th><th>rank</th><th>stage</th>"
            f"<th>status</th><th>last log line</th></tr>{cells}</table></div>")


@dataclass
class MultiResult:
    """What every node of one world left, read together."""
    name: str
    nodes: list[RunResult]
    started: float

    @property
    def ok(self) -> bool:
        return all(n.ok for n in self.nodes)

    @property
    def status(self) -> str:
        return "ok" if self.ok else next(n.status for n in self.nodes if not n.ok)

    @property
    def wall_s(self) -> float:
        return max(n.started + n.wall_s for n in self.nodes) - self.started

    def node_failure(self, node: int) -> tuple[float, str, str, float | None] | None:
        """(seconds after start, stage, error line, seconds spent in that stage) of this node's first failure."""
        res = self.nodes[node]
        if res.ok:
            return None
        fails = [e for e in res.events if e.get("status") == "fail"]
        if fails:
            e = min(fails, key=lambda e: e["t"])
            return (e["t"] - self.started, e["stage"], _last_error_line(e.get("error") or ""),
                    e["end"] - e["start"] if "start" in e else None)
        stage = "rendezvous (torchrun)" if not res.records else "exit"
        end = res.started + res.wall_s
        began = rendezvous_began(res.torchrun_log)
        logged = last_error_logged(res.torchrun_log)
        end = logged if logged and began and began <= logged <= end else end
        return (end - self.started, stage, error_line(res.torchrun_log) or res.status,
                end - began if began and began <= end else None)

    @property
    def first_failure(self) -> dict | None:
        """The node that failed first: node, seconds, stage, error."""
        fails = {n: f for n in range(len(self.nodes)) if (f := self.node_failure(n))}
        if not fails:
            return None
        n = min(fails, key=lambda k: fails[k][0])
        t, stage, err, in_stage = fails[n]
        return {"node": n, "seconds": round(t, 2), "stage": stage, "error": err,
                "in stage s": None if in_stage is None else round(in_stage, 2)}

    def findings(self, node: int | None = None) -> list:
        """The classifier's reading of one node's logs (rank logs and torchrun's), or of all nodes."""
        from nbhelpers.diagnosis.classify import classify_logs

        picked = self.nodes if node is None else [self.nodes[node]]
        logs = {r: text for res in picked for r, text in res.logs.items()}
        return classify_logs(logs, "\n".join(res.torchrun_log for res in picked))

    @property
    def category(self) -> str | None:
        f = self.findings() if not self.ok else []
        return f[0].category if f else None

    @property
    def stages(self):
        """Per node and rank, each stage's status and timing (seconds from the world's start)."""
        import pandas as pd

        frames = []
        for node, res in enumerate(self.nodes):
            st = res.stages
            st["start"] += res.started - self.started
            st["end"] += res.started - self.started
            frames.append(st.assign(node=node))
        if not frames:
            return pd.DataFrame()
        df = pd.concat(frames, ignore_index=True)
        return df[["node", *[c for c in df.columns if c != "node"]]]

    def progress(self):
        """Node/rank x stage: ✔ passed, ✘ failed, … still running when the world ended, · never reached."""
        from nbhelpers.runtime.progress import STATUS_MARK

        df = self.stages
        if df.empty:
            import pandas as pd

            return pd.DataFrame({"node": range(len(self.nodes)), "reached": "no rank started"}).set_index("node")
        order = list(dict.fromkeys(df.sort_values("start")["stage"]))
        df["cell"] = df["status"].map(lambda s: STATUS_MARK.get(s, s))
        return df.pivot(index=["node", "rank"], columns="stage", values="cell").reindex(columns=order).fillna("·")

    def sweep(self):
        """The staged test's growing all_reduce sizes: ms per op and MB/s, per rank."""
        import pandas as pd

        rows = [{"node": e.get("node"), "rank": e["rank"], "bytes": e.get("size"), "iters": e.get("iters"),
                 "ms/op": round(e["seconds_op"] * 1e3, 3), "MB/s": round(e["algbw_gbs"] * 1e3, 1)}
                for res in self.nodes for e in res.events
                if e.get("stage", "").startswith("allreduce_") and e.get("status") == "ok"]
        return pd.DataFrame(rows)

    def side_by_side(self, tail: int = 12, width: int = 110):
        """The last lines of each node (torchrun's log and its ranks'), one column per node."""
        import pandas as pd

        cols = {}
        for node, res in enumerate(self.nodes):
            lines = [f"[torchrun] {ln}" for ln in _readable(res.torchrun_log)][-tail:]
            for r, text in sorted(res.logs.items()):
                lines += [f"[rank {r}] {ln}" for ln in _readable(text)][-tail:]
            cols[f"node {node}"] = [ln[:width] for ln in lines]
        n = max((len(v) for v in cols.values()), default=0)
        return pd.DataFrame({k: v + [""] * (n - len(v)) for k, v in cols.items()})

    def per_node(self):
        """One row per node: status, wall time, first failure, classified category and its evidence."""
        import pandas as pd

        rows = []
        for node, res in enumerate(self.nodes):
            f = self.node_failure(node)
            found = [] if res.ok else self.findings(node)
            rows.append({"node": node, "status": res.status, "ranks": ",".join(map(str, sorted(res.logs))) or "-",
                         "wall s": round(res.wall_s, 2), "failed at s": round(f[0], 2) if f else None,
                         "stage": f[1] if f else "", "error": (f[2] if f else "")[:140],
                         "category": found[0].category if found else None})
        return pd.DataFrame(rows).set_index("node")

    def summary(self) -> dict:
        return {"name": self.name, "status": self.status, "wall_s": round(self.wall_s, 2),
                "first_failure": self.first_failure, "category": self.category,
                "log_dirs": [str(n.log_dir) for n in self.nodes]}

    def __repr__(self) -> str:
        return f"<MultiResult {self.name} {self.status} nodes={len(self.nodes)} {self.wall_s:.1f}s>"

    def _repr_html_(self) -> str:
        ff = self.first_failure
        color = "#2ca02c" if self.ok else "#d62728"
        head = f"<p><b style='color:{color}'>{html.escape(self.name)}: {self.status}</b> in {self.wall_s:.1f} s. "
        if ff:
            head += (f"First failure: <b>node {ff['node']}</b> at {ff['seconds']} s in <code>{html.escape(ff['stage'])}"
                     f"</code>: <code>{html.escape(ff['error'][:300])}</code>. Classified: "
                     f"<b>{html.escape(str(self.category))}</b>.")
        return head + "</p>" + self.per_node().to_html()


TRACEBACK_NOISE = re.compile(r"^(\s+\S|[\^~ ]+$|Traceback|frame #|Exception raised from|<omitting)")
INFO_PREFIX = re.compile(r"^[IWE]\d{4} [\d:.]+ \d+ \S+/site-packages/(\S+)\] ")


def _readable(text: str) -> list[str]:
    """Log lines without traceback frames; torchrun's INFO prefix shortened to the module path."""
    return [INFO_PREFIX.sub(r"\1] ", ln) for ln in text.splitlines() if ln.strip() and not TRACEBACK_NOISE.match(ln)]


RDZV_BEGIN = re.compile(r"^I(\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2}\.\d+) .*(Rendezvous'ing worker group|Starting elastic_operator)")
ERROR_LOGGED = re.compile(r"^\[?E(\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2}\.\d+) ")


def rendezvous_began(log: str) -> float | None:
    """When torchrun (LOGLEVEL=INFO) began its last rendezvous, as a timestamp (its log is in local time)."""
    return _glog_time([m for m in map(RDZV_BEGIN.match, log.splitlines()) if m])


def last_error_logged(log: str) -> float | None:
    """When torchrun's C++ side last logged an error (``[E1122 12:40:41.948 socket.cpp:1028] ...``)."""
    return _glog_time([m for m in map(ERROR_LOGGED.match, log.splitlines()) if m])


def _glog_time(found: list) -> float | None:
    if not found:
        return None
    mo, d, h, mi, sec = found[-1].groups()[:5]
    now = time.localtime()
    t = time.mktime((now.tm_year, int(mo), int(d), int(h), int(mi), 0, 0, 0, -1)) + float(sec)
    return t


ERROR_HINTS = ("Error", "error", "failed", "Timed out", "timed out", "Unable", "refused")


def _last_error_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return next((ln for ln in reversed(lines) if any(h in ln for h in ERROR_HINTS)), lines[-1] if lines else "")[:300]


def error_line(log: str) -> str:
    """The most telling error line of a torchrun log: the innermost exception, else the last error."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if ln.startswith(("torch.distributed", "RuntimeError", "torch.", "ValueError", "TimeoutError")) and \
                ("Error" in ln or "Exception" in ln) and "ChildFailedError" not in ln:
            return ln[:300]
    return _last_error_line(log)


def ssh_prefix(host: str, env: dict | None = None) -> list[str]:
    """Run a node's torchrun on ``host`` over ssh, with ``env`` set there (ssh does not forward it).

    The launcher's command names this kernel's python, the package and the log directory by
    their paths: the hosts must share them (a shared filesystem, the same venv path), which is
    also how the logs of every node come back here.
    """
    env = child_env(env, base={})
    return ["ssh", "-tt", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", host, "env",
            *(shlex.quote(f"{k}={v}") for k, v in env.items())]


def launch_ssh(plan: Plan, hosts: Sequence[str], *, env: dict | None = None, timeout: float = 300.0,
               live: bool | None = None) -> "MultiResult":
    """Start node i on ``hosts[i]`` over ssh (host 0 hosts the store), wait, read every node's logs."""
    if len(hosts) != plan.nnodes:
        raise ValueError(f"{plan.nnodes} nodes need {plan.nnodes} hosts, got {len(hosts)}")
    prefixes = [ssh_prefix(h, {**plan.env, **(env or {})}) for h in hosts]
    return start_nodes(plan, prefixes, timeout=timeout, name="ssh").wait(live=live)


def start_nodes(plan: Plan, prefixes: Sequence[Sequence[str]], *, local_addrs: Sequence[str | None] | None = None,
                envs: Sequence[dict] | None = None, timeout: float = 60.0, name: str = "multinode",
                log_root=None) -> MultiRun:
    """Start every node's torchrun (node i under ``prefixes[i]``), master first; returns the MultiRun."""
    from nbhelpers.runtime.launcher import runs_dir

    root = log_root or runs_dir() / f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{name}-{plan.rdzv_id[-6:]}"
    runs = []
    try:
        for n, prefix in enumerate(prefixes):
            runs.append(plan.start(n, local_addr=(local_addrs or [None] * len(prefixes))[n], prefix=prefix,
                                   env=(envs or [{}] * len(prefixes))[n], timeout=timeout, name=f"{name}-node{n}",
                                   log_dir=root / f"node{n}"))
    except BaseException:
        for r in runs:
            r.stop("start failed")
            r.finish()
        raise
    return MultiRun(runs, timeout=timeout, name=name)
