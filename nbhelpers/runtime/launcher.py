"""Start a world of ranks from a kernel through torchrun, watch it live, stop it for sure.

    run = Run("probe", ["--fault", "stall"], nproc=2, timeout=60)
    result = run.wait()          # live per-rank table in a notebook, progress lines elsewhere
    result.verdict               # culprit rank, victims, evidence

Each rank runs under :mod:`nbhelpers.runtime.rankshim`, inside the rank's own process (the pid, parent, session,
environment and signals plain torchrun gives it): its own log file (stdout+stderr), an exit record, and a stack
dump when it is stopped (py-spy's, read by the launcher before any stop; faulthandler's on torchrun's SIGTERM).  torchrun runs in a session of its own and
gets SIGTERM if the kernel dies.  A run that times out, is interrupted, or outlives its kernel ends
with every process of its tree gone (TERM, grace, KILL).
"""
from __future__ import annotations

import contextlib
import html
import json
import os
import re
import selectors
import shlex
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import psutil

from nbhelpers.diagnosis.api import Failure, Verdict
from nbhelpers.diagnosis.categories import CATEGORIES, run_failure
from nbhelpers.diagnosis.classify import top2_text
from nbhelpers.diagnosis.culprit import KILLED_BEFORE_ESCALATION_S, RankView, exit_records, find_culprit, signal_name
from nbhelpers.diagnosis.redact import redact_text
from nbhelpers.diagnosis.remedies import advice
from nbhelpers.diagnosis.ownerror import own_failure
from nbhelpers.diagnosis.tracebacks import faulthandler_as_spy, last_traceback, where_from
from nbhelpers.errors import LaunchError, PortInUseError
from nbhelpers.runtime import machine, procs
from nbhelpers.runtime.events import parse_line
from nbhelpers.runtime.launchspec import REPO_ROOT, SHIM, LaunchSpec, child_env, user_launch
from nbhelpers.runtime.ports import check_port, free_port
from nbhelpers.runtime.progress import LiveView
from nbhelpers.runtime.runfolder import LogTail, ask_for_records, collective_record, read_log_dir, read_sources

__all__ = ["Run", "RunResult", "launch", "run_one", "result_from_dir", "runs_dir"]

READY_STAGES = ("rendezvous", "connect")  # the stage events that end a rank program's start-up
GLOO_SOURCE = re.compile(r"\[[^\]\s]*\.(?:cc|cpp|h):\d+\]\s*")  # "[../gloo/transport/tcp/pair.cc:598] "


def runs_dir() -> Path:
    """Where run logs go: $NBH_RUNS_DIR, else ``runs/`` beside the package in a checkout, else ./runs."""
    if os.environ.get("NBH_RUNS_DIR"):
        return Path(os.environ["NBH_RUNS_DIR"])
    return (REPO_ROOT / "runs") if (REPO_ROOT / "pyproject.toml").exists() else Path.cwd() / "runs"


def result_from_dir(log_dir: str | os.PathLike, launcher_log: str = "") -> "RunResult":
    """A job that ran elsewhere, diagnosed from the logs it left (:func:`read_log_dir`) as a run of the workbook's
    own is: the culprit rules over the ranks' tracebacks, exit records and source (read where the tracebacks point,
    when it is on this machine), and the log classifier.  Its status is "ok" only when every rank exited 0 (per
    ``launcher_log``), or, with no exit records at all, when no rank logged an error."""
    views, torchrun_log = read_log_dir(log_dir, launcher_log)
    records = {v.rank: v.record for v in views if v.record}
    if records:
        ok = len(records) == len(views) and all(rec.get("returncode") == 0 for rec in records.values())
    else:
        ok = not any(v.error or v.traceback for v in views) and "ChildFailedError" not in torchrun_log
    status = "ok" if views and ok else "failed"
    collectives = collective_record(Path(log_dir) / "fr", len(views))
    verdict = find_culprit(views, status, None, torchrun_log, read_sources(views), collectives)
    return RunResult(Path(log_dir).name, status, len(views), 0.0, Path(log_dir), [], records, [],
                     {v.rank: v.log for v in views}, {v.rank: v.stack for v in views if v.stack}, torchrun_log,
                     verdict, 0.0, collectives=collectives)


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
    hang: dict | None = None              # the hang named live while the ranks still hung (HangReport.to_dict)
    straggler: dict | None = None         # the rank the others waited for, named live (Straggler.to_dict + text)
    waiting: list | None = None           # [seconds since start, {rank: share of its recent samples spent waiting}]
    collectives: dict | None = None       # the ranks' collective records compared (FRReport.to_dict), when written

    @property
    def finished(self) -> bool:
        """Every rank's program ran to its end and returned (the rank shim saw Python about to exit 0), whatever
        happened after: a rank can still abort in interpreter shutdown (gloo on torch 2.13, now and then even after
        ``destroy_process_group``: 1 in 8 runs of a healthy DDP job here, under plain torchrun as under the
        workbook), and the run is then ``failed`` although every step ran."""
        return len(self.records) == len(self.rank_ids or range(self.nproc)) and \
            all(rec.get("python_exit", rec.get("returncode")) == 0 for rec in self.records.values())

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def findings(self) -> list:
        """The classifier's reading of every rank's log plus torchrun's (cached; empty when all is well)."""
        if not hasattr(self, "_findings"):
            from nbhelpers.diagnosis.classify import classify_logs

            self._findings = [] if self.ok else classify_logs(self.logs, self.torchrun_log)
        return self._findings

    @property
    def failure(self) -> Failure | None:
        """What went wrong: the culprit rule's failure where it knows one, else the log classifier's reading
        (None when the run passed or nothing matched)."""
        if self.ok:
            return None
        rule = self.verdict.failure
        if rule is None and self.status == "hang":  # stopped while ranks waited in a collective: what the timeout would say
            rule = Failure.COLLECTIVE_TIMEOUT
        if rule is Failure.RANK_ERROR and self.verdict.culprit is not None:  # unless its own exception names the failure
            rule = own_failure(last_traceback(self.logs.get(self.verdict.culprit, ""))) or rule
        return run_failure(rule, self.findings[0].failure if self.findings else None)

    @property
    def category(self) -> str | None:
        return None if self.failure is None else self.failure.value

    @property
    def remedies(self) -> list[str]:
        """What to do: the culprit rule's remedy, then the failure's (the one advice everywhere)."""
        return [] if self.ok else advice(self.verdict.kind, self.failure)

    def first_error(self) -> str:
        """The first error of the run in one line: the earliest failed stage's error (gloo's source path
        dropped), else a rank killed by a signal nobody sent it, else the first rank log's last exception line."""
        fails = sorted((e for e in self.events if e.get("status") == "fail" and e.get("error")), key=lambda e: e["t"])
        if fails:
            lines = [ln for ln in fails[0]["error"].splitlines() if ln.strip()]
            return GLOO_SOURCE.sub("", lines[-1]).strip()[:300] if lines else ""
        for r, rec in sorted(self.records.items()):
            if rec.get("signal") and not rec.get("stop_signal"):
                what = next((ln for ln in reversed(self.logs.get(r, "").splitlines()) if "what():" in ln), "")
                return f"rank {r} killed by {rec['signal']}" + (f": {GLOO_SOURCE.sub('', what).strip()}"[:300] if what else "")
        err = next((e for r in sorted(self.logs) if (e := RankView(r, log=self.logs[r]).error)), "")
        return GLOO_SOURCE.sub("", err.strip().splitlines()[-1]).strip()[:300] if err.strip() else ""

    @property
    def culprit(self) -> int | None:
        return self.verdict.culprit

    @property
    def stages(self):
        """One row per (rank, stage): status, start/end in seconds from launch, duration, error."""
        from nbhelpers.runtime.events import stage_rows

        df = stage_rows(self.events)
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
                         "where": w.describe() if (w := where_from(self.logs.get(r, ""), self.stacks.get(r, ""))) else "",
                         "role": ("culprit: " + self.verdict.kind) if r == self.verdict.culprit
                         else self.verdict.victims.get(r, "ok" if rec.get("returncode") == 0 else "-")})
        return pd.DataFrame(rows).set_index("rank")

    def log(self, rank: int, tail: int | None = 60) -> str:
        lines = self.logs.get(rank, "").splitlines()
        return "\n".join(lines[-tail:] if tail else lines)

    def stack(self, rank: int) -> str:
        return self.stacks.get(rank, "")

    def to_dict(self) -> dict:
        """The run as JSON-ready data: the one form the CLI, the report and ``record`` use."""
        first = min((e["t"] for e in self.events if e.get("status") == "fail"), default=None)
        top = self.findings[0] if self.findings and not self.ok else None
        return {"name": self.name, "status": "ok" if self.ok else "failed", "run_status": self.status, "nproc": self.nproc,
                "wall_s": round(self.wall_s, 3),
                "first_failure_s": round(first - self.started, 3) if first else None,
                "culprit_named_s": None if self.culprit_named_s is None else round(self.culprit_named_s, 3),
                "category": self.category, "title": CATEGORIES[self.failure].title if self.failure else None,
                **self.verdict.to_dict(),
                "culprit_host": (self.records.get(self.culprit) or {}).get("host") if self.culprit is not None else None,
                "first_error": self.first_error(), "remedies": self.remedies,
                "evidence_lines": [str(e) for e in (top.evidence if top and top.failure == self.failure else [])],
                # the log classifier's two likeliest categories with their confidence (CLI, report, record)
                "candidates": [] if self.ok else [f.candidate() for f in self.findings[:2]],
                "hang": self.hang, "straggler": self.straggler, "collectives": self.collectives,
                "exit_codes": {str(r): rec.get("returncode") for r, rec in sorted(self.records.items())},
                "finished": self.finished,
                "log_dir": str(self.log_dir)}

    def __repr__(self) -> str:
        return (f"<RunResult {self.name} {self.status} nproc={self.nproc} {self.wall_s:.1f}s "
                f"culprit={self.culprit} log_dir={self.log_dir}>")

    def _repr_html_(self) -> str:
        v, color = self.verdict, "#2ca02c" if self.ok else "#d62728"
        head = (f"<p><b style='color:{color}'>{html.escape(self.name)}: {html.escape(self.status)}</b> "
                f"in {self.wall_s:.1f} s on {self.nproc} ranks. ")
        if not self.ok:
            who = "no single rank" if v.culprit is None else f"<b>rank {v.culprit}</b> ({v.kind})"
            head += f"Culprit: {who}. {html.escape(v.reason)}."
            if self.culprit_named_s is not None:
                head += f" Named {self.culprit_named_s:.1f} s after launch."
            if note := v.torchrun_note():
                head += f" ({html.escape(note)}.)"
        head += "</p>"
        if self.hang:
            h = self.hang
            who = f"rank {h['culprit']}" + (f" at {h['where']}" if h.get("where") else "") \
                if h["culprit"] is not None else "no single rank"
            head += (f"<p>Hang named live, {h['after_divergence_s']:.1f} s after the ranks diverged: <b>{html.escape(who)}</b>"
                     f" ({html.escape(h['reason'])}).</p>")
        if self.straggler:
            head += f"<p>Slow, not stuck: {html.escape(self.straggler['text'])}.</p>"
        if self.collectives and not self.collectives["ok"]:
            head += f"<p>The ranks' collective records: {html.escape(self.collectives['verdict'].splitlines()[0])}.</p>"
        if self.failure is not None:
            top2 = top2_text([f.candidate() for f in self.findings])
            head += (f"<p>Classified cause: <b>{html.escape(CATEGORIES[self.failure].title)}</b> "
                     f"(<code>{self.category}</code>){f'; the logs&#x27; top 2: {top2}' if top2 else ''}.</p>")
        if self.remedies:
            head += "<p>What to do:</p><ol>" + "".join(f"<li>{html.escape(r)}</li>" for r in self.remedies) + "</ol>"
        evidence = "".join(f"<li><code>{html.escape(e[:400])}</code></li>" for e in v.evidence)
        return head + (f"<ul>{evidence}</ul>" if evidence else "") + self.ranks.to_html()


class Run:
    """One torchrun world of ``nproc`` ranks running ``target`` (a worker name, module or script).

    Multi-node: ``nnodes``/``node_rank`` with the shared ``rdzv_endpoint`` ("host:port", the store
    is hosted where ``rdzv_conf`` says ``is_host=1`` or torchrun finds the host is itself) and
    ``rdzv_id``; ``local_addr`` is the address this node announces; ``prefix`` runs torchrun under
    another command (``ip netns exec NS``, ``ssh HOST``).  Such a Run is this node's part only:
    its ranks are whichever global ranks the rendezvous gives it (:mod:`nbhelpers.runtime.multinode`).
    """

    def __init__(self, target: str, args: Sequence[str] = (), *, nproc: int = 2, timeout: float = 120.0,
                 env: dict | None = None, port: int | None = None, host: str = "127.0.0.1",
                 name: str | None = None, log_dir: str | os.PathLike | None = None, grace: float = 8.0,
                 nnodes: int = 1, node_rank: int = 0, rdzv_endpoint: str | None = None, rdzv_id: str | None = None,
                 rdzv_conf: dict | None = None, local_addr: str | None = None, prefix: Sequence[str] = (),
                 hang_after: float | None = 2.0, stop_on_hang: bool = False, launcher: Sequence[str] | None = None):
        self.hang_after, self.stop_on_hang = hang_after, stop_on_hang
        self.launcher = list(launcher) if launcher else None   # the user's own torchrun / accelerate launch command
        self.hangwatch = None
        self.nnodes, self.node_rank, self.rdzv_endpoint = nnodes, node_rank, rdzv_endpoint
        self.rdzv_conf, self.local_addr, self.prefix = dict(rdzv_conf or {}), local_addr, list(prefix)
        if rdzv_endpoint is not None:
            host, _, p = rdzv_endpoint.rpartition(":")
            port = int(p)
        self.target, self.args, self.nproc = target, list(args), nproc
        # a SIGKILL sooner than that after a stop is read as the rank's own death (culprit.RankView.crashed)
        self.timeout, self.grace, self.host = timeout, max(grace, KILLED_BEFORE_ESCALATION_S), host
        self.env = {k: str(v) for k, v in (env or {}).items()}
        self.port = port
        if self.launcher:  # the user's command says how many ranks, and what they run (the log folder comes below)
            planned = user_launch(self.launcher, "-")
            prog, self.nproc = planned.program, planned.nproc
            self.target, self.args = (prog[1], prog[2:]) if prog[0] == "-m" else (prog[0], prog[1:])
            nproc, target = self.nproc, self.target.rsplit(".", 1)[-1] if prog[0] == "-m" else self.target
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
        if self.launcher:
            self.user_launch = user_launch(self.launcher, self.log_dir)
        self.tails = {r: LogTail(self.log_dir / f"rank{r}.log") for r in range(nproc * nnodes)}
        self._seen: dict[int, psutil.Process] = {}
        self._gone: dict[int, tuple[float, int | None]] = {}   # rank -> (when first seen gone, exit status if read)
        self.result: RunResult | None = None
        self.early_verdict: Verdict | None = None
        self.early_verdict_s: float | None = None
        self._claim = contextlib.ExitStack()  # the machine.shared() claim, held from start to finish
        self._ready: float | None = None

    @property
    def spec(self) -> LaunchSpec:
        """This node's torchrun, as :mod:`nbhelpers.runtime.launchspec` builds it for every command."""
        return LaunchSpec(self.target, self.args, self.nproc, self.nnodes, f"{self.host}:{self.port}", self.rdzv_id,
                          self.rdzv_conf, local_addr=self.local_addr, monitor_interval=0.1)

    @property
    def command(self) -> list[str]:
        if self.launcher:
            return [*self.prefix, *self.user_launch.argv]
        return [*self.prefix, *self.spec.argv(sys.executable, shim_log_dir=self.log_dir)]

    def __repr__(self) -> str:
        state = ("not started" if self.proc is None else "running" if self.ended is None else
                 self.result.status if self.result else "ended")
        age = f" {self.elapsed:.1f}s" if self.started else ""
        return f"<Run {self.name} nproc={self.nproc} port={self.port} {state}{age} log_dir={self.log_dir}>"

    @property
    def elapsed(self) -> float:
        return ((self.ended or time.time()) - self.started) if self.started else 0.0

    def start(self) -> "Run":
        picked = self.port is None
        for attempt in range(0 if self.launcher else 5):  # the user's own command picks its port
            if picked:  # a free port can be taken before torchrun binds it (another world's ranks, say): pick again
                self.port = free_port(self.host)
            if self.rdzv_endpoint is not None:  # the store lives elsewhere
                break
            try:  # a store this Run hosts on this machine: check its port first
                check_port(self.port, self.host)
                break
            except PortInUseError:
                if not picked or attempt == 4:
                    raise
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._claim.enter_context(machine.shared())  # waits while a measurement has the machine (machine.py)
        if not self.launcher and self.spec.workbook_program:
            env = child_env({**self.env, "NBH_RUN_DIR": str(self.log_dir)})  # NBH_RUN_DIR: procs.find_runs() finds strays
        else:  # the user's program gets the environment plain torchrun would give it, and that one name more
            env = {**os.environ, **self.env, "NBH_RUN_DIR": str(self.log_dir)}
        (self.log_dir / "command.txt").write_text(redact_text(shlex.join(self.command), env) + "\n")
        self.started = time.time()
        try:
            self.proc = subprocess.Popen(self.command, stdin=subprocess.DEVNULL,
                                         stdout=open(self.log_dir / "torchrun.log", "wb"), stderr=subprocess.STDOUT,
                                         env=env, start_new_session=True,
                                         preexec_fn=procs.parent_death_preexec())
        except OSError as exc:
            self._claim.close()
            raise LaunchError(f"could not start torchrun: {exc}") from exc
        self.root = psutil.Process(self.proc.pid)
        procs.register(self.root)
        if self.hang_after is not None:
            from nbhelpers.runtime.hangwatch import HangWatch

            self.hangwatch = HangWatch(self, self.hang_after)
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

    def ready_s(self) -> float | None:
        """Seconds from the start until every rank had started (its ``rendezvous`` or ``connect`` stage ended:
        the workbook's rank programs report it), or None before that or for a script that reports nothing.
        The run's ``timeout`` counts from there, so a slow start-up never eats the time a run was given."""
        if self._ready is None and self.started:
            ends = {e["rank"]: e["end"] for t in self.tails.values() for e in t.events
                    if e.get("stage") in READY_STAGES and e.get("status") == "ok" and "end" in e}
            if len(ends) == len(self.tails):
                self._ready = max(ends.values()) - self.started
        return self._ready

    def records(self) -> dict[int, dict]:
        out = {}
        for r in self.tails:
            path = self.log_dir / f"rank{r}.json"
            try:
                out[r] = json.loads(path.read_text())
            except (FileNotFoundError, ValueError):  # not written yet, or being replaced
                pass
        return self._complete(out)

    def _complete(self, records: dict[int, dict]) -> dict[int, dict]:
        """Each ended rank's ``end``, ``returncode`` and ``signal``.  :mod:`~nbhelpers.runtime.rankshim` runs inside
        the rank, so it can say only what Python meant to exit with (``python_exit``); the process may still abort
        after that, or die of a signal with nothing written.  The return code is the kernel's (read while the
        rank waits to be reaped), else torchrun's failure report's once torchrun has ended, else Python's, else
        SIGTERM where faulthandler's SIGTERM dump shows the rank was stopped.  That dump becomes the rank's
        ``rank<N>.stack.txt`` unless the launcher read one before the stop."""
        report = None
        for r, rec in records.items():
            if "end" in rec or not rec.get("pid"):
                continue  # a record written whole (an older run's), or a rank not started yet
            status = procs.exit_status(rec["pid"])
            if status is procs.RUNNING:
                continue
            seen, kernel = self._gone.setdefault(r, (time.time(), status))
            rec["end"] = min(rec.get("python_end", seen), seen)
            term = self.log_dir / f"rank{r}.term.txt"
            if term.exists() and term.stat().st_size:
                rec.update(stop_signal="SIGTERM", stop_time=term.stat().st_mtime)
                stack = self.log_dir / f"rank{r}.stack.txt"
                if not stack.exists():
                    stack.write_text(faulthandler_as_spy(term.read_text(errors="replace")))
                rec["stack_file"] = stack.name
            elif self._torchrun_stopped(rec["pid"]):  # a SIGTERM handler of the program's own (Lightning's) left no dump
                rec.update(stop_signal="SIGTERM", stop_time=seen)
            code = kernel
            if code is None and self.proc is not None and self.proc.poll() is not None:
                if report is None:
                    log = self.log_dir / "torchrun.log"
                    report = exit_records(log.read_text(errors="replace")) if log.exists() else {}
                code = report.get(r, {}).get("returncode")
            if code is None:
                code = rec.get("python_exit", -signal.SIGTERM if rec.get("stop_signal") else None)
            rec.update(returncode=code, signal=signal_name(code))
        return records

    def _torchrun_stopped(self, pid: int) -> bool:
        """torchrun's own log says it sent this rank its closing SIGTERM (after another rank had failed)."""
        try:
            text = (self.log_dir / "torchrun.log").read_text(errors="replace")
        except OSError:
            return False
        return f"Sending process {pid} closing signal SIGTERM" in text

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
        self.request_record()
        self._dump_stacks()
        shims = [p for p in procs.alive(procs.snapshot(self.root)) if _is_shim(p)]
        return procs.stop_tree(self.root, first=[self.root, *shims], grace=self.grace)

    def request_record(self, wait: float = 1.5) -> None:
        """Ask every running rank for its collective record now and wait up to ``wait`` s for them
        (:func:`ask_for_records`)."""
        ask_for_records(self.log_dir / "fr", lambda: [r for r, rec in self.records().items()
                                                      if "end" not in rec and "python_end" not in rec], wait)

    def _dump_stacks(self) -> None:
        """Every running rank's stack, read at once before any rank is stopped (a rank torn down first would
        move the others: its peers leave their collective with "Connection closed by peer").  The shims keep
        these instead of reading their rank again when the TERM reaches them."""
        from nbhelpers.runtime.stacks import dump_many

        pids = {r: rec["pid"] for r, rec in self.records().items() if rec.get("pid") and "end" not in rec}
        for r, text in dump_many(pids, nonblocking=False).items():
            tmp = self.log_dir / f"rank{r}.stack.txt.tmp"
            tmp.write_text(text)
            os.replace(tmp, self.log_dir / f"rank{r}.stack.txt")

    def wait(self, live: bool | None = None, reraise: bool = True) -> RunResult:
        """Block until the world ends or the timeout strikes; a kernel interrupt (or KeyboardInterrupt raised
        by a SIGTERM handler) stops every rank, their stacks dumped first, and is re-raised unless
        ``reraise=False``: then the result, status "interrupted", comes back with the verdict so far."""
        if self.proc is None:
            self.start()
        view = LiveView(self, live)
        cleanup: dict = {}
        try:
            while self.poll():
                if self.elapsed > self.timeout + (self.ready_s() or 0.0):
                    cleanup = self.stop("timeout")
                    break
                if self.hangwatch is not None and self.early_verdict is None and self.hangwatch.poll() is not None:
                    view.update(force=True)
                    if self.stop_on_hang:
                        cleanup = self.stop("hang")
                        break
                view.update()
                time.sleep(0.1)
        except KeyboardInterrupt:
            cleanup = self.stop("interrupted")
            self.result = self._finish(cleanup)
            view.finish(self.result)
            print(f"Interrupted: every rank of {self.name} was stopped; the partial result is run.result "
                  f"and the logs are in {self.log_dir}", file=sys.stderr)
            if reraise:
                raise
            return self.result
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
        self._claim.close()
        procs.unregister(self.proc.pid)
        self.ended = self.exited if self.nnodes > 1 and self.exited else time.time()
        self.poll()
        records = self.records()
        for r, rec in records.items():  # the exit records completed (kernel, torchrun): the folder read back says so too
            if "returncode" in rec:
                tmp = self.log_dir / f".rank{r}.json.tmp"
                tmp.write_text(json.dumps(rec))
                os.replace(tmp, self.log_dir / f"rank{r}.json")
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
        views = self.views(records, stacks)
        collectives = collective_record(self.log_dir / "fr", self.nproc if self.nnodes == 1 else None)
        verdict = find_culprit(views, status, self.stop_time, torchrun_log, read_sources(views), collectives)
        hang = self.hangwatch.report if self.hangwatch is not None else None
        named = self.hangwatch.stragglers.named if self.hangwatch is not None else None
        history = self.hangwatch.stragglers.history if self.hangwatch is not None else []
        straggler = named and {**named.to_dict(), "named_after_s": round(named.named_at - self.started, 1),
                               "first_collective_s": round(history[0][0] - self.started, 1), "text": named.text()}
        if status == "ok":  # what looked like a hang passed by itself: a long pause, and a job that ended ok hung nowhere
            hang = None
        if hang is not None and hang.verdict.culprit == verdict.culprit:
            named_s = hang.named_at - self.started
        else:
            named_s = (self.early_verdict_s if self.early_verdict and self.early_verdict.culprit == verdict.culprit
                       else self.ended - self.started)
        return RunResult(self.name, status, self.nproc, self.ended - self.started, self.log_dir, self.command,
                         records, events, logs, stacks, torchrun_log, verdict, self.started, self.stop_reason,
                         cleanup, None if verdict.culprit is None else named_s,
                         None if self.nnodes == 1 else mine, hang and hang.to_dict(), straggler,
                         [[round(t - self.started, 2), shares] for t, shares in history] if history else None,
                         collectives)


def _is_shim(p: psutil.Process) -> bool:
    """A rank the workbook started (it runs under the rank shim, in the same process)."""
    try:
        return SHIM in p.cmdline()
    except psutil.Error:
        return False


def run_one(module: str, args: Sequence[str], *, timeout: float, prefix: Sequence[str] = (),
               progress=None) -> tuple[int | None, list[dict], str]:
    """Run ``python -m nbhelpers.workers.<module>`` as one process, no torchrun (optionally under ``prefix``, e.g.
    unshare) with a hard timeout; returns (exit code or None on timeout, its events, its other output).
    ``progress(event)`` is called for each event as it arrives.  On timeout the whole process group is killed.
    For single-process workers (the SIGKILL test, a full disk, a tiny /dev/shm): a torchrun world would add
    its start-up and a rendezvous that nothing uses."""
    env = child_env({"NBH_RUN_DIR": str(runs_dir() / f"{module}-{uuid.uuid4().hex[:6]}"),  # find_runs() finds strays
                     "OMP_NUM_THREADS": "1"})
    cmd = [*prefix, sys.executable, "-m", f"nbhelpers.workers.{module}", *args]
    with machine.shared():
        return _run_one(cmd, env, timeout, progress)


def _run_one(cmd: list[str], env: dict, timeout: float, progress) -> tuple[int | None, list[dict], str]:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=env, start_new_session=True, preexec_fn=procs.parent_death_preexec(signal.SIGKILL),
                            text=True, errors="replace")
    events, other, deadline = [], [], time.monotonic() + timeout
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    timed_out = False
    try:
        while True:
            if time.monotonic() > deadline:
                timed_out = True
                break
            if not sel.select(timeout=0.2):
                if proc.poll() is not None:
                    break
                continue
            line = proc.stdout.readline()
            if not line:
                break
            ev = parse_line(line)
            if ev is None:
                other.append(line.rstrip("\n"))
            else:
                events.append(ev)
                if progress:
                    progress(ev)
    finally:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait()
        proc.stdout.close()
        sel.close()
    return (None if timed_out else proc.returncode), events, "\n".join(other)


def launch(target: str = "probe", args: Sequence[str] = (), *, nproc: int = 2, timeout: float = 120.0,
           live: bool | None = None, reraise: bool = True, **kw) -> RunResult:
    """Start ``target`` on ``nproc`` ranks, show it live, return the result when it ends (see ``Run.wait``
    for ``reraise``)."""
    return Run(target, args, nproc=nproc, timeout=timeout, **kw).wait(live=live, reraise=reraise)
