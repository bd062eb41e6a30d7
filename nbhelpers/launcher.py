"""Start a world of ranks from a kernel through torchrun, watch it live, stop it for sure.

    run = Run("probe", ["--fault", "stall"], nproc=2, timeout=60)
    result = run.wait()          # live per-rank table in a notebook, progress lines elsewhere
    result.verdict               # culprit rank, victims, evidence

Each rank runs under :mod:`nbhelpers.rankshim`: its own log file (stdout+stderr, stdin closed), an
exit record, and a py-spy stack dump when it is stopped.  torchrun runs in a session of its own and
gets SIGTERM if the kernel dies.  A run that times out, is interrupted, or outlives its kernel ends
with every process of its tree gone (TERM, grace, KILL).
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import psutil

from . import procs
from .culprit import RankView, Verdict, find_culprit
from .errors import LaunchError
from .events import parse_line
from .ports import check_port, free_port
from .redact import redact_text

PACKAGE_ROOT = Path(__file__).resolve().parent


def runs_dir() -> Path:
    """Where run logs go: $NBH_RUNS_DIR, else ``runs/`` beside the package in a checkout, else ./runs."""
    if os.environ.get("NBH_RUNS_DIR"):
        return Path(os.environ["NBH_RUNS_DIR"])
    repo = PACKAGE_ROOT.parent
    return (repo / "runs") if (repo / "pyproject.toml").exists() else Path.cwd() / "runs"


def python_args(target: str, args: Sequence[str]) -> list[str]:
    """``probe`` -> ``-m nbhelpers.workers.probe``; ``pkg.mod`` -> ``-m pkg.mod``; ``x.py`` -> ``x.py``."""
    if target.endswith(".py") or os.sep in target:
        return [str(Path(target).resolve()), *args]
    module = target if "." in target else f"nbhelpers.workers.{target}"
    return ["-m", module, *args]


class LogTail:
    """Reads a growing log file incrementally; keeps its lines and the events found in them."""

    def __init__(self, path: Path):
        self.path, self.offset, self.partial = path, 0, b""
        self.lines: list[str] = []
        self.events: list[dict] = []

    def poll(self) -> bool:
        try:
            with self.path.open("rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except FileNotFoundError:
            return False
        if not data:
            return False
        self.offset += len(data)
        chunks = (self.partial + data).split(b"\n")
        self.partial = chunks.pop()
        for raw in chunks:
            line = raw.decode(errors="replace")
            event = parse_line(line)
            if event is not None:
                self.events.append(event)
            else:
                self.lines.append(line)
        return True

    @property
    def text(self) -> str:
        return "\n".join(self.lines + ([self.partial.decode(errors="replace")] if self.partial else []))


@dataclass
class RunResult:
    """What a finished run left: status, per-rank records, events, logs, stacks and the verdict."""
    name: str
    status: str
    nproc: int
    wall_s: float
    log_dir: Path
    command: list[str]
    records: dict[int, dict]
    events: list[dict]
    logs: dict[int, str]
    stacks: dict[int, str]
    torchrun_log: str
    verdict: Verdict
    started: float
    stop_reason: str | None = None
    cleanup: dict = field(default_factory=dict)
    culprit_named_s: float | None = None  # seconds from launch until the launcher first named the culprit
    rank_ids: list[int] | None = None     # the global ranks this node ran (multi-node); default range(nproc)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def findings(self) -> list:
        """The classifier's reading of every rank's log plus torchrun's (cached; empty when all is well)."""
        if not hasattr(self, "_findings"):
            from .classify import classify_logs

            self._findings = [] if self.ok else classify_logs(self.logs, self.torchrun_log)
        return self._findings

    @property
    def category(self) -> str | None:
        return self.findings[0].category if self.findings else None

    @property
    def culprit(self) -> int | None:
        return self.verdict.culprit

    @property
    def stages(self):
        """One row per (rank, stage): status, start/end in seconds from launch, duration, error."""
        from .events import stage_table

        df = stage_table(self.events)
        for col in ("start", "end"):
            df[col] = df[col] - self.started
        return df

    @property
    def ranks(self):
        import pandas as pd

        rows = []
        for r in self.rank_ids if self.rank_ids is not None else range(self.nproc):
            rec = self.records.get(r, {})
            evs = [e for e in self.events if e.get("rank") == r]
            rows.append({"rank": r, "pid": rec.get("pid"), "exit": rec.get("returncode"),
                         "signal": rec.get("signal") or rec.get("stop_signal"),
                         "last stage": f"{evs[-1]['stage']} ({evs[-1]['status']})" if evs else "-",
                         "role": ("culprit: " + self.verdict.kind) if r == self.verdict.culprit
                         else self.verdict.victims.get(r, "ok" if rec.get("returncode") == 0 else "-")})
        return pd.DataFrame(rows).set_index("rank")

    def log(self, rank: int, tail: int | None = 60) -> str:
        lines = self.logs.get(rank, "").splitlines()
        return "\n".join(lines[-tail:] if tail else lines)

    def stack(self, rank: int) -> str:
        return self.stacks.get(rank, "")

    def summary(self) -> dict:
        """A JSON-ready summary (for reports and ``--json``)."""
        first = min((e["t"] for e in self.events if e.get("status") == "fail"), default=None)
        return {"name": self.name, "status": self.status, "nproc": self.nproc, "wall_s": round(self.wall_s, 3),
                "first_failure_s": round(first - self.started, 3) if first else None,
                "culprit_named_s": None if self.culprit_named_s is None else round(self.culprit_named_s, 3),
                "log_dir": str(self.log_dir), "category": self.category, **self.verdict.as_dict()}

    def __repr__(self) -> str:
        return (f"<RunResult {self.name} {self.status} nproc={self.nproc} {self.wall_s:.1f}s "
                f"culprit={self.culprit} log_dir={self.log_dir}>")

    def _repr_html_(self) -> str:
        from .display import result_html

        return result_html(self)


class Run:
    """One torchrun world of ``nproc`` ranks running ``target`` (a worker name, module or script).

    Multi-node: ``nnodes``/``node_rank`` with the shared ``rdzv_endpoint`` ("host:port", the store
    is hosted where ``rdzv_conf`` says ``is_host=1`` or torchrun finds the host is itself) and
    ``rdzv_id``; ``local_addr`` is the address this node announces; ``prefix`` runs torchrun under
    another command (``ip netns exec NS``, ``ssh HOST``).  Such a Run is this node's part only:
    its ranks are whichever global ranks the rendezvous gives it (:mod:`nbhelpers.multinode`).
    """

    def __init__(self, target: str, args: Sequence[str] = (), *, nproc: int = 2, timeout: float = 120.0,
                 env: dict | None = None, port: int | None = None, host: str = "127.0.0.1",
                 name: str | None = None, log_dir: str | os.PathLike | None = None, grace: float = 8.0,
                 nnodes: int = 1, node_rank: int = 0, rdzv_endpoint: str | None = None, rdzv_id: str | None = None,
                 rdzv_conf: dict | None = None, local_addr: str | None = None, prefix: Sequence[str] = ()):
        self.nnodes, self.node_rank, self.rdzv_endpoint = nnodes, node_rank, rdzv_endpoint
        self.rdzv_conf, self.local_addr, self.prefix = dict(rdzv_conf or {}), local_addr, list(prefix)
        if rdzv_endpoint is not None:
            host, _, p = rdzv_endpoint.rpartition(":")
            port = int(p)
        self.target, self.args, self.nproc = target, list(args), nproc
        self.timeout, self.grace, self.host = timeout, grace, host
        self.env = {k: str(v) for k, v in (env or {}).items()}
        self.port = port
        self.name = name or Path(target).stem
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        self.run_id = f"{stamp}-{self.name}-{uuid.uuid4().hex[:6]}"
        self.rdzv_id = rdzv_id or self.run_id
        self.log_dir = Path(log_dir) if log_dir else runs_dir() / self.run_id
        self.proc: subprocess.Popen | None = None
        self.root: psutil.Process | None = None
        self.started = self.ended = None
        self.exited: float | None = None  # when torchrun was first seen gone (before the result is collected)
        self.stop_reason: str | None = None
        self.stop_time: float | None = None
        self.tails = {r: LogTail(self.log_dir / f"rank{r}.log") for r in range(nproc * nnodes)}
        self._seen: dict[int, psutil.Process] = {}
        self.result: RunResult | None = None
        self.early_verdict: Verdict | None = None
        self.early_verdict_s: float | None = None

    @property
    def command(self) -> list[str]:
        nodes = ["--nnodes", str(self.nnodes)]  # c10d ignores --node-rank: the rendezvous assigns node ranks
        extra = (["--rdzv-conf", ",".join(f"{k}={v}" for k, v in self.rdzv_conf.items())] if self.rdzv_conf else []) + \
            (["--local-addr", self.local_addr] if self.local_addr else [])
        return [*self.prefix, sys.executable, "-m", "torch.distributed.run", *nodes, "--nproc-per-node", str(self.nproc),
                "--rdzv-backend", "c10d", "--rdzv-endpoint", f"{self.host}:{self.port}", "--rdzv-id", self.rdzv_id,
                *extra, "--max-restarts", "0", "--monitor-interval", "0.1",
                "-m", "nbhelpers.rankshim", "--log-dir", str(self.log_dir), "--",
                *python_args(self.target, self.args)]

    def __repr__(self) -> str:
        state = ("not started" if self.proc is None else "running" if self.ended is None else
                 self.result.status if self.result else "ended")
        age = f" {self.elapsed:.1f}s" if self.started else ""
        return f"<Run {self.name} nproc={self.nproc} port={self.port} {state}{age} log_dir={self.log_dir}>"

    @property
    def elapsed(self) -> float:
        return ((self.ended or time.time()) - self.started) if self.started else 0.0

    def start(self) -> "Run":
        if self.port is None:
            self.port = free_port(self.host)
        if self.rdzv_endpoint is None:  # a store this Run hosts on this machine: check its port first
            check_port(self.port, self.host)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, **self.env)
        env.setdefault("OMP_NUM_THREADS", "1")
        env["PYTHONUNBUFFERED"] = "1"
        env["NBH_RUN_DIR"] = str(self.log_dir)  # inherited by every rank: procs.find_runs() finds strays
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_ROOT.parent), env.get("PYTHONPATH")]))
        (self.log_dir / "command.txt").write_text(redact_text(shlex.join(self.command), env) + "\n")
        self.started = time.time()
        try:
            self.proc = subprocess.Popen(self.command, stdin=subprocess.DEVNULL,
                                         stdout=open(self.log_dir / "torchrun.log", "wb"), stderr=subprocess.STDOUT,
                                         env=env, start_new_session=True,
                                         preexec_fn=procs.parent_death_preexec())
        except OSError as exc:
            raise LaunchError(f"could not start torchrun: {exc}") from exc
        self.root = psutil.Process(self.proc.pid)
        procs.register(self.root)
        return self

    def poll(self) -> bool:
        """Read what the ranks wrote since the last poll; True while torchrun is running."""
        for tail in self.tails.values():
            tail.poll()
        if self.early_verdict is None and self.started:
            self._early_verdict()
        if self.root is not None:
            for p in procs.snapshot(self.root):
                self._seen.setdefault(p.pid, p)
        running = self.proc is not None and self.proc.poll() is None
        if self.proc is not None and not running and self.exited is None:
            self.exited = time.time()
        return running

    def records(self) -> dict[int, dict]:
        out = {}
        for r in self.tails:
            path = self.log_dir / f"rank{r}.json"
            try:
                out[r] = json.loads(path.read_text())
            except (FileNotFoundError, ValueError):  # not written yet, or being replaced
                pass
        return out

    def local_ranks(self) -> list[int]:
        """The global ranks this node runs: all of them on one node, those that left a log on several."""
        if self.nnodes == 1:
            return list(self.tails)
        return [r for r, t in self.tails.items() if t.offset or t.path.exists()]

    def views(self, records: dict[int, dict], stacks: dict[int, str] | None = None) -> list[RankView]:
        return [RankView(r, self.tails[r].events, records.get(r, {}), self.tails[r].text, (stacks or {}).get(r, ""))
                for r in self.local_ranks()]

    def _early_verdict(self) -> None:
        """Name the culprit as soon as a rank fails, while torchrun is still tearing the world down."""
        failed = any(e.get("status") == "fail" for t in self.tails.values() for e in t.events)
        records = self.records()
        if not failed and not any(RankView(r, record=rec).crashed for r, rec in records.items()):
            return
        verdict = find_culprit(self.views(records), "failed")
        if verdict.culprit is not None:
            self.early_verdict, self.early_verdict_s = verdict, time.time() - self.started

    def stop(self, reason: str = "stopped") -> dict:
        """TERM torchrun and the rank shims (they dump stacks first), then KILL what is left."""
        if self.proc is None or self.proc.poll() is not None:
            return {}
        self.stop_reason, self.stop_time = reason, time.time()
        shims = [p for p in procs.alive(procs.snapshot(self.root)) if _is_shim(p)]
        return procs.stop_tree(self.root, first=[self.root, *shims], grace=self.grace)

    def wait(self, live: bool | None = None) -> RunResult:
        """Block until the world ends or the timeout strikes; a kernel interrupt stops every rank."""
        from .display import LiveView

        if self.proc is None:
            self.start()
        view = LiveView(self, live)
        cleanup: dict = {}
        try:
            while self.poll():
                if self.elapsed > self.timeout:
                    cleanup = self.stop("timeout")
                    break
                view.update()
                time.sleep(0.1)
        except KeyboardInterrupt:
            cleanup = self.stop("interrupted")
            self.result = self._finish(cleanup)
            view.finish(self.result)
            print(f"Interrupted: every rank of {self.name} was stopped; the partial result is run.result "
                  f"and the logs are in {self.log_dir}", file=sys.stderr)
            raise
        self.result = self._finish(cleanup)
        view.finish(self.result)
        return self.result

    def finish(self, cleanup: dict | None = None) -> RunResult:
        """Collect the result once torchrun has ended (or been stopped); ``wait`` calls it."""
        self.result = self._finish(cleanup or {})
        return self.result

    def _finish(self, cleanup: dict) -> RunResult:
        self.proc.wait()
        leftovers = procs.alive(list(self._seen.values()))
        if leftovers:  # e.g. a rank that ignored TERM after torchrun gave up on it
            for p in leftovers:
                p.kill()
            psutil.wait_procs(leftovers, timeout=3)
            cleanup["orphans_killed"] = len(leftovers)
        procs.unregister(self.proc.pid)
        self.ended = self.exited if self.nnodes > 1 and self.exited else time.time()
        self.poll()
        records = self.records()
        stacks = {r: p.read_text() for r in self.tails if (p := self.log_dir / f"rank{r}.stack.txt").exists()}
        torchrun_log = (self.log_dir / "torchrun.log").read_text(errors="replace")
        if not records and self.stop_reason is None and self.proc.returncode != 0 and self.nnodes == 1:
            raise LaunchError(f"torchrun exited with code {self.proc.returncode} before starting any rank",
                              "\n".join(torchrun_log.splitlines()[-25:]))
        events = sorted((e for t in self.tails.values() for e in t.events), key=lambda e: e["t"])
        mine = self.local_ranks()
        logs = {r: self.tails[r].text for r in mine}
        if self.stop_reason:
            status = self.stop_reason
        elif self.proc.returncode == 0 and len(mine) == self.nproc and \
                all(records.get(r, {}).get("returncode") == 0 for r in mine):
            status = "ok"
        else:
            status = "failed"
        verdict = find_culprit(self.views(records, stacks), status, self.stop_time, torchrun_log)
        named_s = (self.early_verdict_s if self.early_verdict and self.early_verdict.culprit == verdict.culprit
                   else self.ended - self.started)
        return RunResult(self.name, status, self.nproc, self.ended - self.started, self.log_dir, self.command,
                         records, events, logs, stacks, torchrun_log, verdict, self.started, self.stop_reason,
                         cleanup, None if verdict.culprit is None else named_s,
                         None if self.nnodes == 1 else mine)


def _is_shim(p: psutil.Process) -> bool:
    try:
        return "nbhelpers.rankshim" in p.cmdline()
    except psutil.Error:
        return False


def launch(target: str = "probe", args: Sequence[str] = (), *, nproc: int = 2, timeout: float = 120.0,
           live: bool | None = None, **kw) -> RunResult:
    """Start ``target`` on ``nproc`` ranks, show it live, return the result when it ends."""
    return Run(target, args, nproc=nproc, timeout=timeout, **kw).wait(live=live)
