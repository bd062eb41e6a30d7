"""Which rank caused a failed run, and which ranks were only its victims.

The first rank to raise is usually a victim: when rank 1 stalls, rank 0 is the one that times out,
and torchrun's "Root Cause" names rank 0.  :func:`find_culprit` asks the rules of :data:`RULES`
in order; the first that concludes gives the :class:`~nbhelpers.diagnosis.api.Verdict`.  Each rule
is a small function over :class:`Evidence` (every rank's events, exit record, log and stack dump);
its docstring says what evidence it needs and what it concludes.  A rule that does not apply
returns None.  Rules are pure: no processes, no files (``tests/test_culprit.py`` feeds each one
evidence recorded from real runs).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import cached_property
from itertools import permutations
from typing import Callable, Iterator

from nbhelpers.diagnosis.api import Failure, Rule, Verdict
from nbhelpers.diagnosis.hang import rank_ranges
from nbhelpers.diagnosis.rankonly import rank_only_calls
from nbhelpers.diagnosis.structure import (ConstantDtype, constant_dtypes, early_exit_before, early_stop, loop_exit,
                                          mapped_rewrites, own_call_at, project_flow, rank_flow, receives_at, sends_doc,
                                          sigbus_doc, skipped_send)
from nbhelpers.diagnosis.tracebacks import (RANK_PREFIX, SPY_FRAME, Frame, Where, exceptions, faulthandler_as_spy,
                                            faulthandler_threads, spy_threads, stack_frames, user_frame, where_from)
from nbhelpers.diagnosis.watchdog import SHORT_TIMEOUT_MS, timeout_ms

__all__ = ["RankView", "Evidence", "RULES", "find_culprit", "named_ranks", "store_key_ranks", "torchrun_root_cause",
           "exit_records",
           "enclosing_rank_branch", "enclosing_block", "loop_left"]

WAITING = re.compile(
    r"Timed out waiting \d+ ?ms for (recv|send)|wait timeout after|waiting for clients|clients joined|"
    r"Watchdog caught collective operation timeout|failed to pass monitoredBarrier|timed out|Timeout",
    re.I)
# Python's own socket exceptions: torch.distributed reports a peer gone as RuntimeError / DistBackendError /
# DistNetworkError, never as these; a rank that raises one met it in its own code (a DataLoader worker's hand-over)
PY_SOCKET_ERROR = re.compile(r"\b(?:ConnectionResetError|BrokenPipeError|ConnectionAbortedError)\b")
FD_PASSING = re.compile(r"in rebuild_storage_fd\b|multiprocessing/resource_sharer\.py")  # a DataLoader worker's batch
PEER_GONE = re.compile(
    r"Connection closed by peer|Connection reset by peer|Broken pipe|remote worker crashing|"
    r"communicator was aborted|Read error|Socket closed", re.I)
UNREACHABLE = re.compile(
    r"client socket has timed out after \d+ ?ms while trying to connect to|failed to connect|"
    r"Connection refused|No route to host|Unable to find address for|EADDRINUSE|Name or service not known",
    re.I)
KILLED_BEFORE_ESCALATION_S = 1.0
SIZE_MISMATCH = re.compile(r"doesn't match expected size|collective mismatch", re.I)
DTYPE_PAIRS = {2: "float32 on one rank and int64/float64 (or float16 and float32)",
               4: "uint8/bool on one rank and float32 (or float16 and float64)",
               8: "uint8/bool on one rank and int64/float64"}
GLOO_SIZES = re.compile(r"op\.preamble\.length <= op\.nbytes\. (\d+) vs (\d+)")  # bytes received vs posted
# DDP's constructor compares every rank's parameter shapes with rank 0's
DDP_SHAPES = re.compile(r"appears not to match (?:sizes|strides) of the same param in process 0|"
                        r"DDP expects same model across all ranks")
STOPPED = re.compile(r"KeyboardInterrupt|SystemExit|SignalException")  # what a stop itself raises
EXIT_ABORT = re.compile(r"terminate called without an active exception")
FATAL = re.compile(r"^(?:\[rank\d+\]:\s*)?Fatal Python error: ")  # faulthandler's dump follows (PYTHONFAULTHANDLER)
# faulthandler.dump_traceback_later's header: a watchdog of the program's own fired (Modules/faulthandler.c prints
# "Timeout (H:MM:SS)!", then every thread's stack; with exit=True the process then exits with code 1)
OWN_WATCHDOG = re.compile(r"^(?:\[rank\d+\]:\s*)?Timeout \(\d+:\d\d:\d\d\)!\s*$")
OOM = re.compile(r"can't allocate memory|out of memory|std::bad_alloc|Cannot allocate memory|CUBLAS_STATUS_ALLOC_FAILED",
                 re.I)
PROGRESS = re.compile(r"\b(?:step|steps|iter|iteration|batch|epoch)\b", re.I)
LOCK_BLOCK = re.compile(r"^\s*(?:async\s+)?with\b.*(?:lock|Lock|LOCK|mutex|Mutex|semaphore|Semaphore).*:\s*(#.*)?$")
STORE_KEYS = re.compile(r"wait timeout after \d+ ?ms, keys: (\S+)")
# a line saying the script resumed from a checkpoint at some epoch or step ("resumed from last.pt at epoch 4")
RESUMED = re.compile(r"\b(?:resum\w*|restor\w*|load(?:ed|ing)?\b.*\bcheckpoint)\b"
                     r".*\b(?:epoch|step|iter\w*)\b\s*[=:]?\s*(\d+)", re.I)  # the point it resumed at
LOADS = re.compile(r"\bload\w*\(")  # torch.load(, model.load_state_dict(, load_checkpoint(
ADDRESS_IN_USE = re.compile(r"Address already in use|EADDRINUSE|\[Errno 98\]|WinError 10048", re.I)
FILE_EXISTS = re.compile(r"^(?:\w+\.)*FileExistsError\b|\[Errno 17\] File exists|WinError 183")
RANK_KEY = re.compile(r"//(?:[a-z]+//)?\d+/(\d+)$")  # a process group's key of a rank: gloo's /default_pg/0//cpu//0/1
MONITORED = re.compile(r"Ranks? ([\d, ]+) failed to pass monitoredBarrier")
# A line a script logs when it takes a path of its own: it skipped, stopped, fell back, found something missing.
ASIDE = re.compile(r"\b(?:warn(?:ing)?|skip(?:s|ping|ped)?|stop(?:s|ping|ped)?|early[ -]stop\w*|fall(?:s|ing)? ?back|"
                   r"fallback|found no|no \w+ found|not found|missing|non-finite|nan|inf|ignor(?:e|es|ed|ing)|"
                   r"could not|couldn't|cannot|can't|failed|error|exception|empty|no data|giving up|retry(?:ing)?)\b",
                   re.I)
CHATTER = re.compile(r"^\S+:\d+: \w*Warning: |^\[[WIE]\d* |^[WIE]\d{4} |\bNCCL (?:INFO|WARN)\b|^\s|^Thread 0x|"
                     r"^Extension modules|^Current thread")  # (tracebacks, aborts: own_lines stops at them first)
EXCEPTION_LINE = re.compile(r"^(?:\[rank\d+\]:\s*)*((?:[A-Za-z_][\w.]*\.)?(?:[A-Z]\w*(?:Error|Exception|Interrupt)|"
                            r"Stop(?:Async)?Iteration)\b:?.*)$")


@dataclass
class RankView:
    """What the verdict needs of one rank (built by the launcher from events, records and logs)."""
    rank: int
    events: list[dict] = field(default_factory=list)
    record: dict = field(default_factory=dict)
    log: str = ""
    stack: str = ""

    @property
    def error(self) -> str | None:
        """The failing stage's error, or for programs without events the last exception line of the log."""
        fails = [e for e in self.events if e.get("status") == "fail"]
        if fails:
            return fails[-1].get("error")
        lines = self.log.splitlines()
        hit = next(((i, m.group(1)) for i in range(len(lines) - 1, -1, -1)
                    if (m := EXCEPTION_LINE.match(lines[i].strip())) and not lines[i].lstrip().startswith(("File ", "raise "))),
                   None)
        if not any("Traceback (most recent call last)" in ln for ln in lines[hit[0] if hit else 0:]):
            return hit[1][:4000] if hit else None
        # a traceback after it may end in an exception of another wording (GuardOnDataDependentSymNode: ...)
        closing = exceptions(self.log)
        if closing and (hit is None or closing[-1][1] > hit[0]):
            return RANK_PREFIX.sub("", lines[closing[-1][1]]).strip()[:4000]
        return hit[1][:4000] if hit else None

    def in_distributed(self) -> bool | None:
        """Whether the stack dump shows this rank inside torch.distributed (None: no dump)."""
        main = stack_frames(self.stack) if "Thread" in self.stack else None
        if main is None:  # no dump, or py-spy could not read the process (its error text is no stack)
            return None
        if "torch/distributed/" in self.stack or "distributed_c10d" in self.stack:
            return True
        return main.collective is not None  # DDP's gradient all_reduce waits under backward(), outside torch/distributed

    @property
    def first_fail_time(self) -> float | None:
        fails = [e["t"] for e in self.events if e.get("status") == "fail"]
        return min(fails) if fails else None

    def own_watchdog_dump(self) -> str | None:
        """The stacks faulthandler printed when a watchdog of the program's own fired
        (``faulthandler.dump_traceback_later(T, exit=True)``, the usual guard against a silent hang), read as a
        stack dump of the moment the program stopped itself; None when the log has none, or when an exception of
        the rank's own came after it."""
        lines = self.log.splitlines()
        at = next((i for i in range(len(lines) - 1, -1, -1) if OWN_WATCHDOG.match(lines[i])), None)
        if at is None or any("Traceback (most recent call last)" in ln for ln in lines[at:]):
            return None
        return "\n".join(RANK_PREFIX.sub("", ln) for ln in lines[at + 1:])

    @property
    def crashed(self) -> bool:
        """Died on its own: a non-zero exit nobody asked for.  A rank that was already dying of SIGKILL (it killed
        itself, or the OOM killer did) when torchrun's stop reached it still counts: the stop's own escalation to
        SIGKILL comes only after a grace period (the launcher's ``grace``, torchrun's 30 s), never within a second.
        So does a rank stopped after its log had ended with an exception of its own (:meth:`raised_at_end`)."""
        rc, stop = self.record.get("returncode"), self.record.get("stop_signal")
        if rc in (0, None):
            return False
        if not stop:
            if self.record.get("signal") == "SIGTERM" and self.record.get("python_exit") == 0:
                return False  # its script had ended well: torchrun's stop reached it in shutdown, past faulthandler
            return rc != 1 or self.own_watchdog_dump() is None  # its own watchdog stopped it: a wait, not a crash
        killed_at_once = self.record.get("end", 0) - self.record.get("stop_time", 0) < KILLED_BEFORE_ESCALATION_S
        return self.record.get("signal") == "SIGKILL" and stop != "SIGKILL" and killed_at_once or self.raised_at_end()

    def raised_at_end(self) -> bool:
        """The log ends with an exception of this rank's own (not a wait that timed out, not a lost peer, not the
        stop itself): the rank was already dying of it when a stop reached it (torchrun stops the others as soon as
        one rank exits, and a rank's own exit takes a while after its traceback is printed)."""
        tb = self.traceback
        if tb is None or _is_victim_error(tb.exception) or STOPPED.search(tb.exc_type or ""):
            return False
        ends = [RANK_PREFIX.sub("", ln).strip() for ln in self.tail(40) if ln.strip()]
        at = next((i for i in range(len(ends) - 1, -1, -1)
                   if ends[i] == tb.exc_type or ends[i].startswith(f"{tb.exc_type}:")), None)
        return at is not None and len(ends) - at <= 12  # only the rest of its (multi-line) message after it

    def current_stage(self, by: float) -> str | None:
        """The stage this rank was in at ``by`` (its last event, if that one opened or failed a stage)."""
        seen = [e for e in self.events if e["t"] <= by]
        return seen[-1]["stage"] if seen and seen[-1].get("status") in ("running", "fail") else None

    def completed(self, stage: str, by: float) -> bool:
        return any(e["stage"] == stage and e.get("status") == "ok" and e["t"] <= by for e in self.events)

    def stages_started(self, by: float) -> list[str]:
        return [e["stage"] for e in self.events if e.get("status") == "running" and e["t"] <= by]

    def last_seen(self, by: float) -> str:
        seen = [e for e in self.events if e["t"] <= by]
        if not seen:
            return self.where.describe() if self.where else "no event, no traceback and no stack dump"
        e = seen[-1]
        return f"{e['stage']} ({e['status']})"

    def tail(self, n: int = 30) -> list[str]:
        """The last ``n`` lines of the log before a faulthandler dump (which can be long)."""
        lines = self.log.splitlines()
        at = next((i for i, ln in enumerate(lines) if FATAL.match(ln)), len(lines))
        return lines[max(0, at - n):at]

    @property
    def where(self) -> Where | None:
        """Where this rank was when it ended: its stack dump when stopped, else its last traceback."""
        if not hasattr(self, "_where"):
            dump = self.stack or ((fh := self.own_watchdog_dump()) and faulthandler_as_spy(fh)) or ""
            self._where = where_from(self.log, dump)
        return self._where

    @property
    def position(self) -> Where | None:
        """Where it was in the user's code when it ended: :attr:`where`, or for a rank killed by a signal that left no
        traceback, faulthandler's dump of its stack (None when neither shows a frame of the user's)."""
        w = self.where if self.where and self.where.user else _fatal_where(self)
        return w if w and w.user else None

    @property
    def traceback(self) -> Where | None:
        """The exception this rank raised (its log's last Python traceback), or None (read once)."""
        if not hasattr(self, "_traceback"):
            w = where_from(self.log)
            self._traceback = w if w is not None and w.exc_type else None
        return self._traceback

    def progress_line(self) -> str | None:
        """The last line this rank logged about its steps, epochs or batches (a script's own progress)."""
        return next((ln.strip()[:200] for ln in reversed(self.tail(400)) if PROGRESS.search(ln)
                     and not ln.lstrip().startswith(("File ", "[rank")) and "Traceback" not in ln), None)

    def finished(self) -> bool:
        """It ran its script to the end: exit 0, or stopped (a peer's failure brought torchrun's stop) while its
        stack dump showed threads but no Python frame and its log no error: the interpreter shutting down after the
        script's last line (a rank dying of its own exception shows no frame either, but a traceback)."""
        if self.record.get("returncode") == 0 or self.record.get("python_exit") == 0:
            return True  # python_exit: the rank shim saw the script end with code 0 (a later abort in teardown aside)
        lines = self.stack.splitlines()
        return bool(self.record.get("stop_signal")) and any(ln.startswith("Thread ") for ln in lines) and \
            not any(SPY_FRAME.match(ln) for ln in lines) and self.error is None and self.traceback is None

    def lost_peer(self) -> bool:
        """The end of this rank's log says a peer went away (e.g. gloo's ``what(): ... Connection reset by peer``
        before a SIGABRT): it died of another rank's death.  Not when the connection lost was its own DataLoader
        worker's: a worker hands each batch's tensors over by file descriptor, through multiprocessing's resource
        sharer (``rebuild_storage_fd``), and a worker killed meanwhile resets that connection."""
        return not self.fd_passing() and any(PEER_GONE.search(ln) and not PY_SOCKET_ERROR.search(ln)
                                             for ln in self.tail(30))

    def fd_passing(self) -> bool:
        """The end of this rank's log is a traceback through a DataLoader worker's file-descriptor hand-over: a
        "Connection reset by peer" there is its own worker gone, not a rank."""
        return any(FD_PASSING.search(ln) for ln in self.tail(30))

    def victim(self) -> bool:
        """Its error is one of waiting (a timeout) or of a peer gone, not of its own."""
        return _is_victim_error(self.error) and not self.fd_passing() and not PY_SOCKET_ERROR.search(self.error)

    def exit_abort_line(self) -> str | None:
        """The "terminate called without an active exception" line of a rank that died of SIGABRT with no Python
        error of its own (the script ended without ``destroy_process_group`` and a process-group thread was torn
        down while the interpreter shut down), else None."""
        tail = self.tail(30)
        signal = self.record.get("signal")
        # Python's faulthandler, dumping the aborting process's threads, can itself crash: SIGSEGV after "Aborted"
        first_dump = next((ln for ln in self.log.splitlines() if FATAL.match(ln)), "")
        aborted = signal == "SIGABRT" or (signal == "SIGSEGV" and FATAL.sub("", first_dump).startswith("Aborted"))
        if not aborted or self.error is not None:
            return None
        return next((ln.strip() for ln in tail if EXIT_ABORT.search(ln)), None)

    def own_lines(self) -> list[str]:
        """What the script itself logged before anything failed: its lines up to the first traceback, abort or
        faulthandler dump, without Python's warnings, torch's C++ log lines and NCCL's."""
        out = []
        for line in self.log.splitlines():
            bare = RANK_PREFIX.sub("", line).rstrip()
            if bare.startswith(("Traceback ", "terminate called", "Fatal Python error", "Exception raised from")) \
                    or EXCEPTION_LINE.match(bare):
                break
            if bare and not CHATTER.search(bare) and not bare.lstrip().startswith(("File ", "warnings.warn")):
                out.append(bare.strip())
        return out

    def unreachable_lines(self) -> list[str]:
        return [ln.strip()[:300] for ln in self.log.splitlines() if UNREACHABLE.search(ln)]


def _signal_text(rec: dict) -> str:
    if rec.get("signal"):
        hint = {"SIGKILL": " (the OOM killer, or someone, sent SIGKILL)", "SIGABRT": " (aborted in C++)",
                "SIGSEGV": " (segmentation fault)"}.get(rec["signal"], "")
        return f"killed by {rec['signal']}{hint}"
    return f"exited with code {rec.get('returncode')}"


def _waited_keys(text: str | None) -> Iterator[str]:
    """The store keys a ``wait timeout after ... keys: ...`` error in ``text`` waited on."""
    for keys in STORE_KEYS.findall(text or ""):
        yield from (key.strip() for key in keys.split(","))


def store_key_ranks(text: str | None) -> set[int]:
    """The ranks whose store keys a ``wait timeout after ... keys: ...`` error waited on: a process group's key of a
    rank (gloo's ``/default_pg/0//cpu//0/1``), not a key of the script's own that ends in a number (``.../gate/1``)."""
    return {int(m.group(1)) for k in _waited_keys(text) if (m := RANK_KEY.search(k))}


def user_store_keys(text: str | None) -> list[str]:
    """The keys of the script's own (``store.get("vocab")``: ``/default_pg/0//vocab``) that a ``wait timeout after
    ... keys: ...`` error waited on: not a rank's key, not NCCL's id counter (``/default_pg/0//0``), not c10d's
    store-based barrier."""
    return [k for key in _waited_keys(text) if (k := key.rstrip(".,"))
            and not RANK_KEY.search(k) and not re.search(r"//\d+$", k) and "store_based_barrier" not in k]


def named_ranks(text: str | None, world: int) -> set[int]:
    """Ranks that an error message names as the ones waited for."""
    found = {r for r in store_key_ranks(text) if r < world}
    if not text:
        return found
    for group in MONITORED.findall(text):
        found |= {int(x) for x in re.findall(r"\d+", group)}
    return found


def torchrun_root_cause(torchrun_log: str) -> int | None:
    """The rank torchrun's ChildFailedError names under 'Root Cause (first observed failure)'."""
    at = torchrun_log.rfind("Root Cause")
    m = re.search(r"rank\s*:\s*(\d+)", torchrun_log[at:]) if at >= 0 else None
    return int(m.group(1)) if m else None


FAILURE_ENTRY = re.compile(r"^\s*rank\s*:\s*(\d+)\s*\(local_rank:\s*(\d+)\).*?\n\s*exitcode\s*:\s*(-?\d+)", re.M)


def signal_name(returncode: int | None) -> str | None:
    """``-11`` -> ``"SIGSEGV"`` (a return code as ``Popen`` gives it); None for an exit, or a number no signal has."""
    import signal as _signal

    try:
        return _signal.Signals(-returncode).name if returncode is not None and returncode < 0 else None
    except ValueError:
        return None


def exit_records(torchrun_log: str) -> dict[int, dict]:
    """Exit records as torchrun's ChildFailedError report gives them ("rank : 1 (local_rank: 1)", "exitcode : -6
    (pid: 25816)"), for logs that come without the workbook's own: exit code, and the signal when it is one.  A rank
    torchrun ended with SIGTERM after another failed counts as stopped (``stop_signal``), as the launcher records
    it; the last report in the log wins (a restarted job reports each attempt)."""
    found: dict[int, dict] = {}
    for m in FAILURE_ENTRY.finditer(torchrun_log):
        rank, code = int(m.group(1)), int(m.group(3))
        rec: dict = {"returncode": code, "local_rank": int(m.group(2))}
        if name := signal_name(code):
            rec["signal"] = name
            if name == "SIGTERM":
                rec["stop_signal"] = "SIGTERM"
        found[rank] = rec
    return found


@dataclass
class Evidence:
    """What every rule sees: the ranks' views, the run's status, and facts derived from them once."""
    views: list[RankView]
    status: str
    stop_time: float | None = None
    torchrun_log: str = ""
    sources: dict[str, str] = field(default_factory=dict)   # the user's source files named in frames: path -> text
    record: dict | None = None   # the ranks' collective records compared (flightrec.FRReport.to_dict), when written

    @cached_property
    def world(self) -> int:
        return len(self.views)

    @cached_property
    def by_rank(self) -> dict[int, RankView]:
        return {v.rank: v for v in self.views}

    @cached_property
    def blamed(self) -> int | None:
        return torchrun_root_cause(self.torchrun_log)

    @cached_property
    def first_times(self) -> dict[int, float]:
        """Per rank, when it first failed (a failed stage, or its own death)."""
        crash = {v.rank: v.record["end"] for v in self.views if v.crashed and v.record.get("end")}
        fail = {v.rank: v.first_fail_time for v in self.views if v.first_fail_time is not None}
        return {**crash, **{r: min(t, crash.get(r, t)) for r, t in fail.items()}}

    @cached_property
    def first(self) -> int | None:
        """The first rank to fail (often a victim)."""
        return min(self.first_times, key=self.first_times.get) if self.first_times else None

    @cached_property
    def t_fail(self) -> float:
        return self.first_times[self.first] if self.first is not None else (self.stop_time or 0.0)

    @cached_property
    def crashed_alone(self) -> list[RankView]:
        """Ranks that died on their own: not of a timeout, not of a lost peer."""
        return [v for v in self.views if v.crashed and not v.victim() and not v.lost_peer()]

    @cached_property
    def odd_one_out(self) -> tuple[int, str] | None:
        """The one rank whose script logged, before anything failed, that it took a path of its own ("skipping batch
        (IndexError ...)", "non-finite loss, stopping training", "found no rng_state_rank0.pt; starting at epoch 0"),
        a line no other rank logged: (rank, its first such line).  None when no rank or more than one did, or when
        another rank logged nothing of its own to compare with (a script that logs on rank 0 only)."""
        def norm(line: str) -> str:
            return re.sub(r"\d+", "0", re.sub(r"\brank\s*\d+|\brank\d+", "rank", line.lower()))

        own = {v.rank: v.own_lines() for v in self.views}
        if len(own) < 2 or not all(own.values()):
            return None
        found = {}
        for r, lines in own.items():
            theirs = {norm(ln) for q, other in own.items() if q != r for ln in other}
            aside = [ln for ln in lines if ASIDE.search(ln) and norm(ln) not in theirs]
            if aside:
                found[r] = aside[0][:300]
        return next(iter(found.items())) if len(found) == 1 else None

    @cached_property
    def resumes(self) -> dict[int, tuple[str, int]]:
        """Per rank that logged one before anything failed, its first resume line and the point it names (epoch,
        step or iteration): ``{1: ("resumed from ckpt/rank1/step_002200.pt at step 2200", 2200)}``."""
        found = {}
        for v in self.views:
            m = next((m for line in v.own_lines() if (m := RESUMED.search(line))), None)
            if m:
                found[v.rank] = (m.string, int(m.group(1)))
        return found

    @cached_property
    def resumed_apart(self) -> tuple[int, str, str] | None:
        """When every rank logged that it resumed (``resumed from ckpt/rank1/step_002200.pt at step 2200``), and not
        at one point: (the rank that resumed apart, its line, a peer's line).  With three ranks or more, the one rank
        whose point no other shares; with two, the one that resumed from the earlier point (its newer checkpoint
        missing or torn: the usual way per-rank checkpoints part)."""
        said = self.resumes
        points = [p for _, p in said.values()]
        if self.world < 2 or len(said) < self.world or len(set(points)) < 2:
            return None
        alone = [r for r, (_, p) in said.items() if points.count(p) == 1]
        if len(said) == 2:
            alone = [min(said, key=lambda r: said[r][1])]
        elif len(alone) != 1 or len(set(points)) != 2:
            return None
        peer = next(r for r in said if r != alone[0])
        return alone[0], said[alone[0]][0][:300], said[peer][0][:300]

    @cached_property
    def resumed_alone(self) -> tuple[int, str, int, str] | None:
        """When one rank alone logged that it resumed, and the script's line that logs it sits, after the checkpoint's
        loading, inside an ``if`` on the rank (``if args.resume and is_master and os.path.exists(ckpt_path):``): only
        that rank loaded the checkpoint and its counters.  As (that rank, its line, the ``if``'s line, its text).  The
        loading must be inside the ``if`` too: a resume every rank does, logged on rank 0 only, is not this."""
        script = self.script()
        if len(self.resumes) != 1 or script is None:
            return None
        r, (line, _) = next(iter(self.resumes.items()))
        head = " ".join(re.sub(r"^\[?rank\s*\d+\]?:?\s*", "", line, flags=re.I).split()[:2])  # "resumed from"
        source = self.sources[script]
        lines = source.splitlines()
        at = [i + 1 for i, text in enumerate(lines) if head in text and ('"' in text or "'" in text)]
        branch = enclosing_rank_branch(source, at[0], self.flow(script)) if len(at) == 1 else None
        if not branch or branch[1].startswith("else") or not any(LOADS.search(t) for t in lines[branch[0]:at[0]]):
            return None
        return r, line[:300], branch[0], branch[1]

    def script(self) -> str | None:
        """The script the ranks ran (``python train.py``), as its path is written, when its source is at hand."""
        return next((a[0] for v in self.views if (a := v.record.get("argv")) and a[0].endswith(".py")
                     and a[0] in self.sources), None)

    @cached_property
    def new_in_record(self) -> dict | None:
        """The records' first disagreement when it names one rank that issued what no rank had before (or differs
        from all its peers), with no rank missing from it, and the code shows how that rank left the common path: its
        call sits under a condition its peer's position is not under, or it had left a loop its peer is still in
        through a ``break``/``return`` under a condition (an early stop).  A loop with no such exit ends when its data
        does: the rank still in it had more data, and the rank with the new collective is not at fault (uneven
        inputs).  Else None."""
        fd = (self.record or {}).get("first_disagreement")
        if not (fd and fd.get("by") in ("new", "majority") and not fd["missing"] and fd["culprit"] in self.by_rank):
            return None
        r = fd["culprit"]
        where = {v.rank: v.where for v in self.views if v.where and v.where.collective}
        if r not in where or len(where) < 2:
            return None
        branch = self.branch_apart(where)
        if branch and branch[0] == r:
            return fd
        left = self.past_loop(where)
        if left and left[1] == r:
            file = next((p for p, text in self.sources.items() if 0 < left[2] <= len(lines := text.splitlines())
                         and lines[left[2] - 1].strip().rstrip(":") == left[3]), None)
            if file and loop_exit(self.sources[file], left[2]):
                return fd
        return None

    def blame(self, culprit: int, kind: Rule, reason: str, evidence: list[str],
              failure: Failure | None = None) -> Verdict:
        """A verdict naming ``culprit``; every other rank is described as a victim."""
        victims = {v.rank: _victim_reason(v, culprit) for v in self.views if v.rank != culprit}
        evidence = evidence + [f"rank {culprit}: {ln}" for ln in self.by_rank[culprit].unreachable_lines()[:2]]
        return Verdict(culprit, kind, reason, evidence, victims, self.first, self.blamed, failure,
                       _where_text(self.by_rank[culprit]))

    def nobody(self, kind: Rule, reason: str, evidence: list[str], failure: Failure | None = None) -> Verdict:
        """A verdict that names no rank (the evidence cannot tell, and guessing would mislead)."""
        return Verdict(None, kind, reason, evidence, {v.rank: _victim_reason(v, None) for v in self.views},
                       self.first, self.blamed, failure)

    def past_loop(self, where: dict[int, Where]) -> tuple[int, int, int, str, str] | None:
        """Of ranks waiting at different places, whether one was still in a loop another had left: (the rank inside,
        the rank past it, the loop's line, its header, its function).  Read first in the innermost function of the
        user's code both are in (rank 0 in the epoch loop, rank 1 past it in the final evaluation), then in the calls
        only the rank inside had made from there (rank 1 in ``reduce_metrics``'s loop over its metric names, rank 0
        gone on to the next batch)."""
        for deeper in (False, True):
            for a, b in permutations(where, 2):
                found = self._loop_apart(where[a], where[b], deeper)
                if found:
                    return a, b, *found
        return None

    @staticmethod
    def _common(wa: Where, wb: Where) -> tuple[list[Frame], int, list[Frame]] | None:
        """Where two positions meet in the user's code: ``wa``'s frames of it, the index among them of the innermost
        function ``wb`` is in too, and ``wb``'s frames of the user's code from that function inward; None when none."""
        mine = [f for f in wa.frames if not f.library]
        theirs = [f for f in wb.frames if not f.library]
        at = {(f.file, f.func): i for i, f in enumerate(theirs)}
        shared = next((i for i in range(len(mine) - 1, -1, -1) if (mine[i].file, mine[i].func) in at), None)
        return None if shared is None else (mine, shared, theirs[at[(mine[shared].file, mine[shared].func)]:])

    def _loop_apart(self, wa: Where, wb: Where, deeper: bool) -> tuple[int, str, str] | None:
        """A loop ``wa`` is still in and ``wb`` had left, unless ``wb`` waits in a call it makes only on a condition
        (``if is_best: dist.barrier()``): then ``wb`` may have made a call too many as well as ``wa`` an iteration."""
        common = self._common(wa, wb)
        if common is None:
            return None
        mine, shared, theirs = common
        fa, fb = mine[shared], theirs[0]
        if any(f.file in self.sources and enclosing_block(self.sources[f.file], f.line, CONDITION) for f in theirs):
            return None
        if not deeper:
            found = loop_left(self.sources[fa.file], fa.line, fb.line) if fa.file in self.sources else None
            return (*found, fa.func) if found else None
        if fa.line == fb.line:
            return None
        for f in reversed(mine[shared + 1:]):  # calls the other rank was not in: a loop there is one it had left
            found = enclosing_block(self.sources[f.file], f.line, LOOP) if f.file in self.sources else None
            if found:
                return (*found, f.func)
        return None

    def branch_apart(self, where: dict[int, Where]) -> tuple[int, int, int, str, str] | None:
        """Of ranks waiting at different places, one whose call sits under a condition its peer's position is not
        under (rank 1 in ``evaluate()`` under ``if self.tokens_seen >= self.next_eval:`` while rank 0 is in the next
        batch's backward; rank 0 in ``dist.barrier()`` under ``if ... is_best:``): (the rank in the branch, its peer,
        the condition's line, its header, its function).  Read in the innermost function of the user's code both are
        in, then in the calls only the rank in the branch had made from there."""
        for a, b in permutations(where, 2):
            common = self._common(where[a], where[b])
            if common is None or common[0][common[1]].file not in self.sources:
                continue
            mine, shared, theirs = common
            fa, fb = mine[shared], theirs[0]
            lines = self.sources[fa.file].splitlines()
            peer = set(_headers(lines, fb.line))
            found = next(((i + 1, lines[i].strip().rstrip(":"), fa.func) for i in _headers(lines, fa.line)
                          if CONDITION.match(lines[i]) and i not in peer), None)
            for f in reversed(mine[shared + 1:]) if not found and fa.line != fb.line else ():
                cond = enclosing_block(self.sources[f.file], f.line, CONDITION) if f.file in self.sources else None
                if cond:
                    found = (*cond, f.func)
                    break
            if found:
                return a, b, *found
        return None

    def in_autograd(self, where: dict[int, Where]) -> tuple[int, int, int, str] | None:
        """Of ranks waiting at different places, one whose collective sits in the ``backward`` of a custom autograd
        Function (``class GatherLayer(torch.autograd.Function)``) that its peer's backward did not reach: (that rank,
        its peer, the class's line, its header)."""
        for a, b in permutations(where, 2):
            mine = [f for f in where[a].frames if not f.library]
            f = mine[-1] if mine else None
            if f is None or f.func != "backward" or f.file not in self.sources:
                continue
            cls = enclosing_class(self.sources[f.file], f.line)
            reached = any((g.file, g.line) == (f.file, f.line) for g in where[b].frames)
            if cls and AUTOGRAD_FUNCTION.match(cls[1]) and not reached:
                return a, b, *cls
        return None

    @cached_property
    def positions(self) -> dict[int, Where]:
        """Where each rank was in the user's code when it ended: its traceback or stack dump, or for a rank killed
        by a signal, faulthandler's dump of its stack."""
        return {v.rank: p for v in self.views if (p := v.position)}

    def settle(self, verdict: Verdict, where: dict[int, Where]) -> Verdict:
        """``verdict``, which names nobody among ranks whose calls disagree, told what the positions show (a rank
        still in a loop its peer had left, :meth:`past_loop`), and naming the rank whose own log says it took a path
        of its own (:attr:`odd_one_out`) when there is one.  The loop alone names nobody: the rank inside it may have
        run more iterations (more data, an extra item of its own) or its peer fewer (a rank-local break, another
        start epoch), and on scripts written apart from these rules naming the rank inside was right in 2 of 4."""
        left = self.past_loop(where)
        loop = ""
        if left:
            inside, past, line, header, func = left
            loop = (f". Rank {inside} was still in the loop at line {line} (`{header}`, in {func}) that rank {past} had "
                    f"left: rank {inside} ran more iterations of it (more data, an item only it had) or rank {past} "
                    "fewer (a rank-local break or early stop, another start epoch on resume). Make every rank run the "
                    "same iterations: the same number of batches or items, the same start, a stop decided together "
                    "(an all_reduce of a flag)")
            if past in self.resumes and inside not in self.resumes:
                loop += (f". Rank {past} had logged `{self.resumes[past][0][:200]}` and rank {inside} no such line: if only rank "
                         f"{past} resumed (a checkpoint loaded under `if rank == 0:`), rank {inside} started earlier "
                         "and has more iterations to run; load the counters (epoch, step) on every rank, or broadcast "
                         "them")
        graph = None if left else self.in_autograd(where)
        branch = None if left or graph else self.branch_apart(where)
        if graph:
            inside, past, line, header = graph
            loop = (f". Rank {inside}'s collective is in the backward of `{header}` (line {line}), which autograd runs "
                    f"only on a rank whose loss used that function's output in this step: rank {past}'s backward did "
                    f"not reach it, so its loss left that term out (a term added under a condition on the rank's own "
                    f"batch: too few labelled rows, an empty mask), or rank {inside}'s loss had it extra. A collective "
                    "inside autograd must run on every rank at every step: compute the term on every rank (times zero "
                    "where it does not apply)")
        if branch:
            inside, past, line, header, func = branch
            loop = (f". Rank {inside}'s call is under `{header}` (line {line}, in {func}), and rank {past} was not "
                    "in that branch but in another call: a condition that reads a rank's own state (its own loss, "
                    "counter, data or clock) holds on one rank and not on another. A collective under a condition "
                    "needs the same condition on every rank: decide it from values every rank shares (all_reduce the "
                    "flag or the counter first, or use the global step)")
        if self.odd_one_out is not None:
            r, said = self.odd_one_out
            return self.blame(r, verdict.kind, f"{verdict.reason}{loop}. Rank {r} alone had logged `{said}` before: it "
                              "took a path its peers did not, so it is named", verdict.evidence + [f"rank {r}: {said}"],
                              verdict.failure)
        if self.resumed_apart is not None:
            r, mine, theirs = self.resumed_apart
            return self.blame(r, verdict.kind, f"{verdict.reason}{loop}. The ranks resumed at different points: rank "
                              f"{r} logged `{mine}` and a peer `{theirs}`, so from then on they ran different steps. Rank "
                              f"{r} resumed {'from the earlier point' if self.world == 2 else 'where no other rank did'}: "
                              "its newest checkpoint was missing or torn (or its peers read one it never wrote), so it is "
                              "named. Resume every rank from one point: agree on it first (each rank's latest complete "
                              "step, all_reduce with MIN, or rank 0 picks it and broadcasts it)",
                              verdict.evidence + [f"rank {r}: {mine}"], verdict.failure)
        if self.resumed_alone is not None:
            r, said, line, cond = self.resumed_alone
            return self.blame(r, verdict.kind, f"{verdict.reason}{loop}. Rank {r} alone logged `{said}`, and the script "
                              f"loads the checkpoint under `{cond}` (line {line}): only rank {r} resumed, so it started at "
                              "another epoch or step than its peers and ran other iterations (DDP copies rank 0's weights "
                              "to the others, not the counters or the optimizer's state), so it is named. Load the "
                              "checkpoint on every rank, or broadcast the counters (epoch, step) from rank 0",
                              verdict.evidence + [f"rank {r}: {said}", f"line {line}: {cond}"], verdict.failure)
        if left or branch or graph:
            return replace(verdict, reason=f"{verdict.reason}{loop}",
                           evidence=verdict.evidence + [f"rank {inside}: in `{header}` (line {line})"])
        return verdict

    def _up_the_stack(self, v: RankView, find: Callable[[str, int, str], tuple[int, str] | None]) -> tuple[int, str] | None:
        """``find(source, line, file)`` on ``v``'s line of user code, then on each call on the way there (the callers'
        lines), innermost first, where their source is at hand: the first it finds."""
        for frame in reversed(v.where.frames if v.where else []):
            text = None if frame.library else self.sources.get(frame.file)
            found = find(text, frame.line, frame.file) if text else None
            if found:
                return found
        return None

    def flow(self, file: str):
        """The project's :class:`~nbhelpers.diagnosis.structure.RankFlow` (every source file at hand read together),
        read from ``file``."""
        return project_flow(self.sources).of(file)

    def enclosing(self, v: RankView, header: re.Pattern) -> tuple[int, str] | None:
        """The block header matching ``header`` (``with cache_lock:``) that encloses ``v``'s line of user code, or a
        call on the way there, as (line, header)."""
        return self._up_the_stack(v, lambda text, line, _: enclosing_block(text, line, header))

    def rank_condition(self, v: RankView) -> tuple[int, str] | None:
        """The ``if`` on the rank (``if rank == 0:``, ``if is_main_process():``) that encloses the line of the
        user's code where ``v`` was, or a call on the way there (``if self.is_main: self.evaluate()`` around the
        method that waits), as (line, condition), when its source is at hand; an ``else:`` of such an ``if`` counts
        too."""
        return self._up_the_stack(v, lambda text, line, file: enclosing_rank_branch(text, line, self.flow(file)))


def passed(ev: Evidence) -> Verdict | None:
    """Needs: the run's status.  Concludes: nothing to blame when the run passed."""
    if ev.status == "ok":
        return Verdict(None, Rule.NONE, "every rank passed every stage", torchrun_blamed=ev.blamed)
    return None


def desync_rule(ev: Evidence) -> Verdict | None:
    """Needs: collectives traced per rank (events with ``seq``, ``call``, ``op``, ``shape``, as
    :mod:`nbhelpers.workers.desync` writes them).  Concludes: at the first collective number where the
    ranks' calls differ, the rank whose call differs from a strict majority's left the common sequence.
    With two ranks there is no majority: a rank that failed on its own just before is named; otherwise
    nobody is (the rank that aborted on the size mismatch is not the culprit, and no later rule may
    pretend it is)."""
    split = desync(ev.views)
    if split is None:
        return None
    seq, have, odd, agree = split["seq"], split["have"], split["odd"], split["agree"]
    evidence = [f"rank {v.rank}: " + " -> ".join(_fp_text(f) for f in sequence(v)[max(0, seq - 3):seq])
                for v in ev.views]
    if odd is not None:
        return ev.blame(odd, Rule.DESYNC, f"rank {odd}'s collective #{seq} was {_fp_text(have[odd])} while ranks "
                        f"{', '.join(map(str, agree))} called {_fp_text(have[agree[0]])}: rank {odd} left the "
                        "common sequence", evidence)
    own = {v.rank: err for v in ev.views if v.rank in have and (err := _own_error_before(v, _seq_time(v, seq)))}
    if len(own) == 1:
        r, err = next(iter(own.items()))
        return ev.blame(r, Rule.DESYNC, f"the ranks disagree at collective #{seq}, and rank {r} had just "
                        f"failed on its own ({err.splitlines()[-1][:120]}) and left the common sequence",
                        evidence + [f"rank {r}: {err}"])
    calls = "; ".join(f"rank {r}: {_fp_text(fp)}" for r, fp in sorted(have.items()))
    return ev.nobody(Rule.DESYNC, f"the ranks disagree at collective #{seq} ({calls}) and no majority says "
                     "which one left the common sequence (with two ranks a skipped call looks like an extra one, "
                     "and a short tensor like a long one), and the rank that aborts (SIGABRT on a size mismatch) is "
                     "whichever received more than it expected, not the culprit. Read both call sites, or rerun "
                     "with 3 ranks", evidence)


def _crashed_on(ev: Evidence, message: re.Pattern, signal: str | None = None) -> tuple[str, list[str]] | None:
    """When every rank that died on its own (by ``signal``, if given) logged ``message``: "rank 1" / "ranks 1, 2",
    and the first two such lines; else None."""
    crashed = ev.crashed_alone
    if not crashed or not all((signal is None or v.record.get("signal") == signal) and message.search(v.log)
                              for v in crashed):
        return None
    lines = [f"rank {v.rank}: {ln.strip()[:300]}" for v in crashed for ln in v.log.splitlines() if message.search(ln)]
    return f"rank{'s' if len(crashed) > 1 else ''} {', '.join(str(v.rank) for v in crashed)}", lines[:2]


def rank_only_collective(ev: Evidence) -> Verdict | None:
    """Needs: the user's source (the files the ranks' frames name) and a run that failed in its collectives (a
    rank waited until the timeout or lost its peer, the run was stopped hung, or gloo aborted a rank on a size
    mismatch; no rank died of an error of its own).  Concludes: a call the library documents as one every rank must
    make (``accelerator.wait_for_everyone()``, ``self.log(..., sync_dist=True)``, the Trainer's ``evaluate()``, a
    ``torch.distributed`` collective, ``dcp.save``) sits under a condition the library documents as true on rank 0
    only (``is_main_process``, ``trainer.is_global_zero``, ``state.is_world_process_zero``), or under any test of a
    value that differs by rank, followed through the script and the modules it imports (``rank, world, out =
    setup()`` in a helper module, ``if rank == 0:``; :class:`~nbhelpers.diagnosis.structure.RankFlow`): those ranks
    make collectives the others never match (:mod:`nbhelpers.diagnosis.rankonly`).  The rank the test holds on is
    named at that line, whatever the stacks show: the frameworks defer such collectives into their own loops."""
    if ev.status == "ok" or not ev.sources:
        return None
    mismatch = [v for v in ev.crashed_alone if v.record.get("signal") == "SIGABRT" and SIZE_MISMATCH.search(v.log)]
    if len(mismatch) < len(ev.crashed_alone):
        return None  # a rank died of something of its own: that comes first
    if not mismatch and ev.status not in ("hang", "timeout", "interrupted") and \
            not any(_is_victim_error(v.error) for v in ev.views):
        return None
    found = [c for path, text in ev.sources.items() for c in rank_only_calls(text, path, ev.flow(path), ev.sources)]
    who = [c.only if c.only is not None else 1 - c.but if c.but in (0, 1) and ev.world == 2 else None for c in found]
    found = [(c, r) for c, r in zip(found, who) if r in ev.by_rank]
    if not found:
        return None
    c, culprit = found[0]
    via = f" (which calls {c.via})" if c.via else ""
    others = f"; {len(found) - 1} more such call{'s' if len(found) > 2 else ''} in the source" if len(found) > 1 else ""
    makes = f"rank {culprit} makes" if c.only is not None else f"every rank but {c.but} makes"
    v = ev.blame(culprit, Rule.RANK_ONLY_COLLECTIVE, f"{c.call}{via} at {c.file.rsplit('/', 1)[-1]}:{c.line} runs "
                 f"only under `{c.guard}` (line {c.guard_line}), which holds on {c.holds_on} only, but {c.says}: "
                 f"{makes} collectives the other ranks never match{others}. Call it on every rank (keep only the "
                 "printing or saving under the condition)",
                 [f"line {c.guard_line}: {c.guard}", f"line {c.line}: {c.call}", f"documented: {c.source}"]
                 + [f"rank {w.rank}: {w.error}" for w in ev.views if w.error][:2],
                 Failure.COLLECTIVE_MISMATCH)
    return replace(v, where=c.where)


def size_mismatch(ev: Evidence) -> Verdict | None:
    """Needs: exit records (SIGABRT) and logs; tracebacks, faulthandler's dumps and source to settle it.
    Concludes: when the only ranks that died on their own aborted on a size mismatch, gloo aborted the rank that
    received more than it expected, which need not be the rank at fault (DETAIL makes every rank report the
    shapes): nobody is named unless the ranks' logs or positions point to one (:meth:`Evidence.settle`)."""
    found = _crashed_on(ev, SIZE_MISMATCH, "SIGABRT")
    if found is None:
        return None
    who, lines = found
    sizes = GLOO_SIZES.search(" ".join(lines))
    got, posted = (int(sizes.group(1)), int(sizes.group(2))) if sizes else (0, 0)
    factor = got // posted if posted and got % posted == 0 else 0
    dtype = (f" ({got} bytes received where {posted} were expected: a factor of {factor} is also what the same shape "
             f"in another dtype sends, {DTYPE_PAIRS[factor]} on the other ranks, e.g. a tensor built from Python "
             "numbers on a rank that had no data)") if factor in DTYPE_PAIRS else ""
    fd = (ev.record or {}).get("first_disagreement")
    if fd and fd["kind"] in ("size", "dtype") and not fd["missing"]:  # every rank's record, the aborted one's too
        shapes = (f". The ranks' collective records show what differed, at collective #{fd['seq']} on {fd['pg']}: " +
                  "; ".join(f"rank{'s' if len(g['ranks']) > 1 else ''} {rank_ranges(g['ranks'])} ran {g['desc']}"
                            for g in fd["groups"]) + ": find where that tensor's size or dtype comes from each rank's "
                  "own data")
        lines = [*lines, f"collective record: #{fd['seq']} {fd['kind']} mismatch"]
        dtype = ""  # the records say which dtypes and sizes; the bytes' ratio was only a guess at them
    else:
        shapes = "; rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL to have every rank report the shapes"
    said = (f"{who} aborted (SIGABRT) on a collective whose size did not match its peers'{dtype}: gloo aborts the rank "
            f"that received more than it expected, which is not necessarily the rank at fault{shapes}")
    odd = _constant_dtype(ev, fd) if fd and fd["kind"] == "dtype" and not fd["missing"] else None
    if odd:
        r, c, file, theirs = odd
        name = file.rsplit("/", 1)[-1]
        return ev.blame(r, Rule.MISMATCH, f"{said}. Rank {r}'s {c.dtype} is the dtype torch gives a tensor built "
                        f"from `{c.text}` ({name}:{c.line}), a constant of the code; its peers sent {theirs}, from "
                        f"values they computed: rank {r}'s tensor never got past that constant (it had no data of its "
                        "own for it: an empty shard or domain, a class it lacks), so it is named. Give the tensor one "
                        "dtype on every rank (dtype=torch.float32 where it is built, a float constant `0.0`)",
                        [*lines, f"{name}:{c.line}: {c.text} -> {c.dtype}"])
    return ev.settle(ev.nobody(Rule.MISMATCH, said, lines), ev.positions)


def _constant_dtype(ev: Evidence, fd: dict) -> tuple[int, ConstantDtype, str, str] | None:
    """When the records show the ranks' tensors differing in dtype only, and the code that builds the tensor (read up
    a rank's stack from the collective) holds a constant whose dtype is exactly one rank's, while the others' dtype
    is no constant's: (that rank, the constant, its file, what the others sent)."""
    for w in ev.positions.values():
        for f in reversed([f for f in w.frames if not f.library and f.file in ev.sources]):
            consts = constant_dtypes(ev.sources[f.file], f.line)
            if not consts:
                continue
            kinds = {c.dtype for c in consts}
            hit = [g for g in fd["groups"] if g["dtype"] in kinds]
            if len(hit) == 1 and len(hit[0]["ranks"]) == 1 and len(fd["groups"]) > 1:
                others = "; ".join(g["desc"] for g in fd["groups"] if g is not hit[0])
                return hit[0]["ranks"][0], next(c for c in consts if c.dtype == hit[0]["dtype"]), f.file, others
            return None
    return None


def model_mismatch(ev: Evidence) -> Verdict | None:
    """Needs: logs.  Concludes, naming nobody: when the ranks that died on their own raised DDP's check that every
    rank's parameters have rank 0's shapes, the ranks built different models (a vocabulary or label set from each
    rank's own shard, a per-rank config); the rank that raised is only the one compared with rank 0."""
    found = _crashed_on(ev, DDP_SHAPES)
    if found is None:
        return None
    who, lines = found
    return ev.nobody(Rule.MODEL_MISMATCH, f"{who} built a model whose parameters differ from rank 0's, and DDP's "
                     "constructor refused it: the ranks built their models from something of their own (a vocabulary "
                     "or label set read from each rank's shard, a per-rank config). Build it from the same data on "
                     "every rank, or build it on rank 0 and broadcast_object_list it", lines,
                     Failure.COLLECTIVE_MISMATCH)


def exit_without_destroy(ev: Evidence) -> Verdict | None:
    """Needs: exit records and log tails.  Concludes: when the only ranks that died aborted (SIGABRT,
    "terminate called without an active exception", no Python error) while the interpreter shut down,
    the script never called ``destroy_process_group``: a process-group thread was torn down at exit, at
    random (pytorch/pytorch#190489).  Nothing hung.  When the script's source shows it does call it, torch's own
    teardown aborted (rarer, and it happens with the call too): the reason says so instead."""
    crashed = ev.crashed_alone
    if not crashed or not all(v.exit_abort_line() for v in crashed):
        return None
    v = min(crashed, key=lambda v: v.record.get("end") or 0)
    many = len(crashed) > 1
    script = ev.script()
    if script and "destroy_process_group(" in ev.sources[script]:
        why = (f"{script.rsplit('/', 1)[-1]} does call destroy_process_group(), so torch's own teardown aborted: a gloo "
               "worker thread was still letting go of the last collective's tensors (or DDP's) while Python shut down. "
               "Nothing hung and every step ran; drop those references first (del the DDP model, gc.collect()) and "
               "put a dist.barrier() before destroy_process_group()")
    else:
        why = ("The process group was never destroyed, so its worker thread still held the last collective's tensors "
               "at interpreter exit. Call dist.destroy_process_group() at the end of every rank; nothing hung")
    return ev.blame(v.rank, Rule.EXIT_WITHOUT_DESTROY, f"rank{'s' if many else ''} "
                    f"{', '.join(str(v.rank) for v in crashed)} aborted while Python shut down, after "
                    f"{'their' if many else 'its'} script had ended: 'terminate called without an active "
                    f"exception'. {why}",
                    [f"rank {v.rank}: {_signal_text(v.record)}", f"rank {v.rank}: {v.exit_abort_line()}"])


def hung_at_exit(ev: Evidence) -> Verdict | None:
    """Needs: exit records (the script's end, as the rank shim saw it; the stop), stack dumps, the user's source.
    Concludes: the job did not end because ranks had ended their work but not their process, each stopped while
    either Python waited at exit for a thread of the script's own that was still running (the main thread in
    ``threading._shutdown``: a non-daemon thread never told to stop), or while the objects of the script's entry
    function were being freed (the main thread at the module-level ``main()`` call, ``main``'s own frame gone: a
    destructor waits).  Every other rank exited.  The one rank that hung is named; when every rank hung, what they
    share is at fault and nobody is."""
    if ev.status == "ok" or ev.crashed_alone:
        return None
    script = ev.script()
    hung: dict[int, str] = {}
    for v in ev.views:
        if not v.record.get("stop_signal"):
            if v.record.get("returncode") == 0:
                continue   # it exited
            return None
        if v.error or v.traceback:
            return None
        threads = spy_threads(v.stack)
        main = next((fr for name, fr in threads if name == "MainThread"), [])
        own = [(name, f) for name, fr in threads if name != "MainThread" and (f := user_frame(fr))]
        if "python_exit" in v.record and main and main[-1].func == "_shutdown" and own:
            hung[v.rank] = ("Python waited at exit for " + ", ".join(
                f"thread \"{name}\" ({f.file.rsplit('/', 1)[-1]}:{f.line} in {f.func})" for name, f in own) +
                ", still running: a thread that is no daemon and was never told to stop")
            continue
        user = [f for f in main if not f.library]
        entry = own_call_at(ev.sources[script], user[0].line) if script and user and user[0].file == script \
            and user[0].func == "<module>" else None
        if entry and not any(f.func == entry for f in user[1:]):
            hung[v.rank] = (f"{entry}() had returned (its frame is gone; the main thread is at "
                            f"{script.rsplit('/', 1)[-1]}:{user[0].line}) and the process hung while {entry}()'s "
                            "objects were freed: a destructor waits" +
                            (f" ({', '.join(f'{f.func} at line {f.line}' for f in user[1:])})" if user[1:] else
                             ", in C++ (no Python frame)"))
            continue
        return None
    if not hung:
        return None
    said = "; ".join(f"rank {r}: {why}" for r, why in sorted(hung.items()))
    exited = [v.rank for v in ev.views if v.rank not in hung]
    tail = f" Rank{'s' if len(exited) > 1 else ''} {rank_ranges(exited)} exited." if exited else ""
    if len(hung) == 1 and exited:
        r = next(iter(hung))
        return ev.blame(r, Rule.EXIT_HANG, f"rank {r} ended its work but not its process: {said}.{tail}",
                        [said], Failure.EXIT_WITHOUT_DESTROY)
    return ev.nobody(Rule.EXIT_HANG, f"ranks {rank_ranges(sorted(hung))} ended their work but not their processes, "
                     f"in the same way: {said}.{tail} What they share (the script's teardown) is at fault, not a rank",
                     [said], Failure.EXIT_WITHOUT_DESTROY)


def ddp_segfault(ev: Evidence) -> Verdict | None:
    """Needs: exit records and faulthandler's dump in the logs (the rank shim turns faulthandler on in every rank).
    Concludes, naming nobody: every rank that died crashed with SIGSEGV inside DistributedDataParallel's
    constructor, which torch 2.13 does on gloo when TORCH_DISTRIBUTED_DEBUG=DETAIL is set (in
    c10d::Logger::set_env_variables): the environment, not a rank, is at fault."""
    dead = ev.crashed_alone
    if not dead or not all(v.record.get("signal") == "SIGSEGV" for v in dead):
        return None
    in_ddp = [v for v in dead if any("torch/nn/parallel/distributed.py" in ln and "__init__" in ln
                                     for ln in v.log.splitlines()[-200:])]
    if not in_ddp:
        return None
    user = next((w.user for v in in_ddp if (w := _fatal_where(v)) and w.user), None)
    at = f" at {user.where}" if user else ""
    return ev.nobody(Rule.DDP_SEGFAULT, f"rank{'s' if len(dead) > 1 else ''} {', '.join(str(v.rank) for v in dead)} "
                     f"crashed (SIGSEGV) inside DistributedDataParallel's constructor{at}: torch 2.13 does this on "
                     "gloo when TORCH_DISTRIBUTED_DEBUG=DETAIL is set. Unset it (DETAIL is for collectives "
                     "called before DDP), or check a collective mismatch with DETAIL before wrapping the model",
                     [f"rank {v.rank}: {_signal_text(v.record)}" for v in dead], Failure.DDP_SEGFAULT)


def same_error(ev: Evidence) -> Verdict | None:
    """Needs: every rank's traceback.  Concludes, naming nobody: when every rank raised the same exception at the
    same line of the user's code (each died of it, or was stopped by the launcher just after), the fault is in what
    they all share -- a checkpoint they all load, the configuration, the code -- not in one rank: the rank whose
    exit came first was only the quickest."""
    if len(ev.views) < 2 or not ev.crashed_alone:
        return None
    tbs = [v.traceback for v in ev.views]
    if any(tb is None or tb.user is None or _is_victim_error(tb.exception) for tb in tbs) or \
            len({(tb.exc_type, tb.user.where) for tb in tbs}) != 1:
        return None
    tb = tbs[0]
    return ev.nobody(Rule.SAME_ERROR, f"every rank raised {_short(tb.exception)} {tb.describe()}: the fault is in "
                     "what they all share (a file they all read, the configuration, the code), not in one rank",
                     [f"rank {v.rank}: {t.exception[:300]}" for v, t in zip(ev.views, tbs)][:2] +
                     _frames_ev(ev.views[0], tb), Failure.RANK_ERROR)


def race(ev: Evidence) -> Verdict | None:
    """Needs: exit records, the crashed rank's traceback, the user's source.  Concludes, naming nobody: when the
    only rank that died on its own failed to take something only one process can have, in the user's code (a port:
    "Address already in use", with every rank on one host; a new folder: ``os.makedirs`` without ``exist_ok``,
    "File exists"), not in torch, on a line every rank runs (no ``if rank == 0:`` around it), every rank asked for
    it and whichever came second failed: a race, not a rank."""
    crashed = ev.crashed_alone
    v = crashed[0] if len(crashed) == 1 else None
    tb = v.traceback if v is not None else None
    if tb is None or tb.user is None or ev.world < 2 or tb.user.file not in ev.sources \
            or any("torch/" in f.file for f in tb.frames) or ev.rank_condition(v) is not None \
            or any(f.file in ev.sources and returns_unless_rank(ev.sources[f.file], f.line, ev.flow(f.file))
                   for f in tb.frames if not f.library):
        return None
    if ADDRESS_IN_USE.search(tb.exception) and len({w.record.get("host") for w in ev.views}) == 1:
        what, failure = "bind a port", Failure.PORT_IN_USE
    elif FILE_EXISTS.search(tb.exception):
        what, failure = "create a file or folder that already existed", Failure.RANK_ERROR
    else:
        return None
    return ev.nobody(Rule.RACE, f"rank {v.rank} could not {what} in your code ({_short(tb.exception)} "
                     f"{tb.describe()}): every rank runs that line (it is not under an `if rank == 0:`), so they all "
                     "asked for the same one and whichever came second failed. It is a race, not a rank: another run "
                     "may fail on another rank", [f"rank {v.rank}: {tb.exception[:300]}", *_frames_ev(v, tb)], failure)


def crashed(ev: Evidence) -> Verdict | None:
    """Needs: exit records, and the rank's traceback when it raised.  Concludes: a rank that died on its own
    (non-zero exit or a signal nobody sent it) with no error of the waiting kind is the cause; the others
    then lost their connection to it.  When it died of its own Python exception the failure is that error
    (``rank_error``, with the exception and the line of the user's code), or ``oom_in_collective`` when it
    ran out of memory inside a collective.  A rank that aborted (SIGABRT: gloo's C++ throws when a peer
    vanishes) is named only when no other rank died, since exit records of near-simultaneous deaths can
    come in either order."""
    if not ev.crashed_alone:
        return None
    v = min(ev.crashed_alone, key=lambda v: (v.record.get("signal") == "SIGABRT", v.record.get("end") or 0))
    tb = v.traceback if not v.record.get("signal") or v.raised_at_end() else None
    if tb is not None:
        at = tb.describe()
        if OOM.search(tb.message) and tb.collective:
            return ev.blame(v.rank, Rule.CRASHED, f"rank {v.rank} ran out of memory inside {tb.collective} "
                            f"(at {tb.user.where if tb.user else 'torch'}): {_short(tb.exception)}; the others "
                            "then failed waiting for it", [f"rank {v.rank}: {tb.exception[:300]}", *_frames_ev(v, tb)],
                            Failure.OOM_IN_COLLECTIVE)
        return ev.blame(v.rank, Rule.CRASHED, f"rank {v.rank} raised {_short(tb.exception)} {at}; the others then "
                        "failed waiting for it", [f"rank {v.rank}: {tb.exception[:300]}", *_frames_ev(v, tb)],
                        Failure.RANK_ERROR)
    lines = [f"rank {v.rank}: {_signal_text(v.record)}"] + ([v.error] if v.error else [])
    return ev.blame(v.rank, Rule.CRASHED, f"rank {v.rank} {_signal_text(v.record)} (last seen "
                    f"{v.last_seen(v.record.get('end') or ev.t_fail)}); the others then failed waiting for it", lines)


def wrong_world(ev: Evidence) -> Verdict | None:
    """Needs: the waiting ranks' errors.  Concludes: a rank that waits on the store key of a rank that
    does not exist in this job (``keys: /default_pg/0//cpu//0/2`` with two ranks) was given a larger
    world size (or a wrong rank) than the job's: that rank is the culprit; when every rank does, none differs and
    nobody is named (the world size they share is wrong).  So is a rank that waits on its own
    rank's key: it joined as another rank (``init_process_group(rank=args.rank)`` with an option left at 0), so nobody
    joined as its rank."""
    asked = {v.rank: sorted(r for r in store_key_ranks(v.error) if r >= ev.world) for v in ev.views}
    if ev.world > 1 and all(asked.values()):  # every rank asked for more ranks than the job has: none differs
        ghost = min(g for gs in asked.values() for g in gs)
        return ev.nobody(Rule.WRONG_WORLD, f"every rank waited for rank {ghost} or higher, which no rank of this "
                         f"{ev.world}-rank job is: they all asked for a larger world than the job's, so the setting "
                         "they share is wrong (WORLD_SIZE exported by a config or the environment, a world size "
                         "multiplied by the GPUs per node in a script written for mp.spawn), not one rank",
                         [f"rank {v.rank}: {v.error}" for v in ev.views][:2], Failure.RENDEZVOUS_TIMEOUT)
    for v in ev.views:
        ghosts = asked[v.rank]
        if ghosts:
            at = v.where.describe() if v.where else ""
            return ev.blame(v.rank, Rule.WRONG_WORLD, f"rank {v.rank} waited for rank {ghosts[0]}, which does not "
                            f"exist in this {ev.world}-rank job: its world size (or rank) is not the job's; "
                            f"{at}".rstrip("; "), [f"rank {v.rank}: {v.error}"], Failure.RENDEZVOUS_TIMEOUT)
    for v in ev.views:
        if v.rank in store_key_ranks(v.error):
            at = f" ({v.where.describe()})" if v.where else ""
            return ev.blame(v.rank, Rule.WRONG_WORLD, f"rank {v.rank} waited for the key of rank {v.rank}, its own{at}: "
                            "it joined the process group as another rank, so nobody joined as rank "
                            f"{v.rank}. Pass the launcher's rank (int(os.environ['RANK'])) to init_process_group, or "
                            "none at all (a --rank option left at its default, from an mp.spawn version of the "
                            "script, does this)", [f"rank {v.rank}: {v.error}"], Failure.RENDEZVOUS_TIMEOUT)
    return None


def short_timeout(ev: Evidence) -> Verdict | None:
    """Needs: the waiting ranks' errors.  Concludes: when every rank that timed out gave up after less than a
    second (gloo's ``Timed out waiting 300ms for recv operation``), the timeout is the fault, not the rank that was
    still busy: a value in the wrong unit (``timedelta(milliseconds=300)`` where seconds were meant) or far too
    small.  Nobody is named; the reason says where the other ranks were."""
    waited = {v.rank: ms for v in ev.views if _is_victim_error(v.error) and (ms := timeout_ms(v.error)) is not None}
    if not waited or max(waited.values()) >= SHORT_TIMEOUT_MS:
        return None
    busy = "; ".join(f"rank {v.rank}: {v.last_seen(ev.t_fail)}" for v in ev.views if v.rank not in waited)
    ms = min(waited.values())
    return ev.nobody(Rule.SHORT_TIMEOUT, f"rank{'s' if len(waited) > 1 else ''} {rank_ranges(sorted(waited))} gave up "
                     f"after {ms} ms{f' ({busy})' if busy else ''}: a timeout under a second is shorter than ordinary "
                     "work between two collectives, so the timeout is the fault, not a rank. Look for a value in the "
                     "wrong unit (timedelta(milliseconds=...) where seconds were meant, a config value in seconds read "
                     "as milliseconds) or a timeout set far too small, on init_process_group, new_group or a store",
                     [f"rank {w}: {ev.by_rank[w].error}" for w in sorted(waited)])


def key_never_set(ev: Evidence) -> Verdict | None:
    """Needs: the waiting ranks' errors.  Concludes: when ranks timed out waiting for a store key of the script's own
    (``store.get("vocab")``), not a rank's key, while exactly one rank did not wait for it (it had gone on: into
    DDP's constructor, a collective, or lost its peers there), that rank never set the key it was to set (a path
    that returns before ``store.set``, a key of another name): it is named.  When every rank waited, nobody is
    set apart here (a gate that no rank opens: a counter never reset, a key that changed)."""
    waiting = {v.rank: keys for v in ev.views if (keys := user_store_keys(v.error))}
    others = [v for v in ev.views if v.rank not in waiting]
    key = next(iter(waiting.values()))[0] if waiting else None
    if waiting and not others:
        return ev.nobody(Rule.KEY_NEVER_SET, f"every rank timed out waiting for the store key `{key}`, a key of the "
                         "script's own, and no rank set it: a gate that no rank opens (a counter never reset between "
                         "rounds, a key whose name changed, a rank expected to set it that waits too). Read where the "
                         "key is set; a dist.barrier() does this without a hand-made protocol",
                         [f"rank {r}: {ev.by_rank[r].error}" for r in sorted(waiting)])
    if not waiting or len(others) != 1:
        return None
    v = others[0]
    if v.error and not _is_victim_error(v.error):
        return None  # it failed on its own: its error says more (crashed, own_error)
    at = f" ({v.position.describe()})" if v.position else ""
    who = ", ".join(str(r) for r in sorted(waiting))
    return ev.blame(v.rank, Rule.KEY_NEVER_SET, f"rank{'s' if len(waiting) > 1 else ''} {who} timed out waiting for the store "
                    f"key `{key}`, a key of the script's own, and rank {v.rank} never waited for it: it had gone on"
                    f"{at}. The rank that was to set it did not: a path that returns before `store.set` (a cache found "
                    "on disk, an early exit), or a key set under another name. Set it on every path, or have every "
                    "rank wait at one barrier after it", [f"rank {r}: {ev.by_rank[r].error}" for r in sorted(waiting)])


def mapped_file_shrunk(ev: Evidence) -> Verdict | None:
    """Needs: exit records (a rank killed by SIGBUS), faulthandler's dump of its stack, and the user's source.
    Concludes: mmap(2) raises SIGBUS on a read of a mapped file past its end, "including the case where another
    process has truncated the file"; when the source rewrites a memory-mapped file in place (``np.memmap(path,
    mode="w+")``, which numpy documents as creating or overwriting the file; ``np.save(path, ...)`` of a path it also
    maps with ``np.load(path, mmap_mode="r")``, through Python's open(path, "wb"), which truncates) under a condition
    (in its function, or around a call of it), the rank that ran it shrank the file under its peer's mapping.  With two ranks, the peer of
    the killed rank is named at the rewrite's line; otherwise, or when every rank rewrites it, nobody
    (:func:`nbhelpers.diagnosis.structure.mapped_rewrites`, its catalog ``data/mapped_rewrites.json``)."""
    bus = [v for v in ev.views if v.record.get("signal") == "SIGBUS" or any(
        FATAL.match(ln) and ln.rstrip().endswith("Bus error") for ln in v.log.splitlines())]
    found = [(path, m) for path, text in ev.sources.items() for m in mapped_rewrites(text)]
    if len(bus) != 1 or not found:
        return None
    v, (path, m) = bus[0], found[0]
    says, doc = sigbus_doc()
    at = f" {v.position.describe()}" if v.position else ""   # "at file:line in func"
    name = path.rsplit("/", 1)[-1]
    evidence = [f"rank {v.rank}: killed by SIGBUS{at}", f"{name}:{m.line}: {m.call}",
                f"documented: {m.says} ({m.source})", f"documented: {says} ({doc})"]
    what = (f"rank {v.rank} was killed by SIGBUS{at}, a read of a memory-mapped file past its end (mmap(2): also "
            f"when another process has truncated the file); {m.call} at {name}:{m.line} (in {m.func}) rewrites a "
            "memory-mapped file in place")
    peers = [w for w in ev.views if w.rank != v.rank]
    if m.guard is None or len(peers) != 1:
        return ev.nobody(Rule.MAPPED_FILE_SHRUNK, what + (", on every rank: whichever rewrote it last shrank it "
                         "under the others" if m.guard is None else f", under `{m.guard}` (line {m.guard_line}): "
                         "the rank that ran it shrank the file under the others' mappings"), evidence)
    p = peers[0]
    verdict = ev.blame(p.rank, Rule.MAPPED_FILE_SHRUNK, what + f" under `{m.guard}` (line {m.guard_line}), which rank "
                       f"{v.rank} did not run: rank {p.rank} rewrote the file while rank {v.rank} still mapped it",
                       evidence + [f"{name}:{m.guard_line}: {m.guard}"])
    return replace(verdict, where=f"{path}:{m.line} in {m.func}: {m.call}")


def skipped_call(ev: Evidence) -> Verdict | None:
    """Needs: the ranks' positions (traceback or stack dump), the user's source; a rank that ran its script to the
    end (:meth:`RankView.finished`) and the collective records where written, or ranks that all wait to receive.
    Concludes: a rank skipped, through a conditional exit, a call its peer waits in, and is named with the exit's
    line.  A collective: the finished rank never made the one its peer waited in (its record lacks it) and a
    function on the peer's way to that call returns early under a condition before it (``if not self.exports:
    return`` ahead of a gather).  A send: every rank waits in a point-to-point receive (each waits for the other,
    so none will send), and one rank's loop holds a ``continue`` (``break``, ``return``) under a condition on its own
    values before the send its peer's receive waits for (``if loss is None: continue`` ahead of sending the
    gradient back to the previous pipeline stage): that rank took it (:mod:`nbhelpers.diagnosis.structure`)."""
    return _skipped_collective(ev, Rule.SKIPPED_CALL) or _skipped_send(ev, Rule.SKIPPED_CALL)


def _skipped_send(ev: Evidence, rule: Rule) -> Verdict | None:
    waiting = [v for v in ev.views if not v.finished() and v.where]
    if len(waiting) < 2 or len(waiting) < ev.world or ev.crashed_alone:
        return None

    def user(v):
        return [f for f in reversed(v.where.frames) if not f.library and f.file in ev.sources]

    if not all(any(receives_at(ev.sources[f.file], f.line) for f in user(v)) for v in waiting):
        return None
    found = {}
    for v in waiting:
        hit = next(((f, ss) for f in user(v) if (ss := skipped_send(ev.sources[f.file], f.line, ev.flow(f.file)))),
                   None)
        if hit:
            found[v.rank] = hit
    if len(found) != 1:
        return None
    r, (f, ss) = next(iter(found.items()))
    name = f.file.rsplit("/", 1)[-1]
    peers = ", ".join(str(v.rank) for v in waiting if v.rank != r)
    says, doc = sends_doc()
    v = ev.blame(r, rule, f"every rank waited in a point-to-point receive, each for another (rank {r} "
                 f"{ev.by_rank[r].where.describe()}): nobody will send. In rank {r}'s loop (line {ss.loop_line}) "
                 f"`{ss.guard}` (line {ss.guard_line}) leaves the iteration at line {ss.exit_line} before "
                 f"`{ss.send}` (line {ss.send_line}): rank {r} took it and never sent what rank{'s' if ',' in peers else ''} "
                 f"{peers} waited to receive ({says})",
                 [f"{name}:{ss.guard_line}: {ss.guard}", f"{name}:{ss.exit_line}: leaves the iteration",
                  f"{name}:{ss.send_line}: {ss.send}", f"documented: {doc}"]
                 + [f"rank {w.rank}: {w.error}" for w in waiting if w.error][:2], Failure.COLLECTIVE_TIMEOUT)
    return replace(v, where=f"{f.file}:{ss.exit_line} in the loop at line {ss.loop_line}")


def _skipped_collective(ev: Evidence, rule: Rule) -> Verdict | None:
    done = [v for v in ev.views if v.finished()]
    fd = (ev.record or {}).get("first_disagreement")
    if len(done) != 1 or (ev.record is not None and not (fd and done[0].rank in fd["missing"])):
        return None  # the records, where written, must show the finished rank never reached the call
    f = done[0]
    for w in ev.views:
        if w is f or w.finished() or w in ev.crashed_alone or not (w.where and w.where.collective):
            continue
        for fr in reversed([x for x in w.where.frames if not x.library]):
            ex = early_exit_before(ev.sources[fr.file], fr.line) if fr.file in ev.sources else None
            if ex is None:
                continue
            name = fr.file.rsplit("/", 1)[-1]
            evidence = [f"{name}:{ex.guard_line}: {ex.guard}", f"{name}:{ex.line}: return",
                        f"rank {w.rank}: {w.error or w.where.describe()}"]
            v = ev.blame(f.rank, rule, f"rank {f.rank} ran its script to the end without the collective "
                         f"rank {w.rank} waited in ({w.where.describe()}): {ex.func}() returns at line {ex.line} under "
                         f"`{ex.guard}` (line {ex.guard_line}) before line {fr.line}, and rank {f.rank} took that "
                         "return, a call every rank must make", evidence, Failure.COLLECTIVE_MISMATCH)
            return replace(v, where=f"{fr.file}:{ex.line} in {ex.func}: return")
    return None


def uneven_collectives(ev: Evidence) -> Verdict | None:
    """Needs: exit records and tracebacks; the user's source.  Concludes: when a rank finished its script (exit 0, or
    stopped while shutting down after its last line: :meth:`RankView.finished`) while another then failed inside a
    collective because its peer was gone, the ranks ran different numbers of iterations.  When a loop the rank still
    calling is in can be left early (a ``break`` or ``return`` under an ``if`` that reads a value the loops compute:
    :func:`~nbhelpers.diagnosis.structure.early_stop`), the finished rank took that exit on values of its
    own (an early stop decided per rank) and is named, as the records' rule names a rank that left a loop its peer is
    still in; else the inputs were uneven (one more batch on one rank, no ``join()``) and the rank still calling
    collectives is named, with each rank's last progress line as evidence."""
    done = [v for v in ev.views if v.finished()]
    stuck = [v for v in ev.views if v.crashed and v.lost_peer() and v.where and v.where.collective]
    if not done or not stuck:
        return None
    v = stuck[0]
    progress = [f"rank {w.rank}: {w.progress_line()}" for w in ev.views if w.progress_line()]
    stop = next(((f, s) for f in reversed(v.where.frames) if not f.library and f.file in ev.sources
                  and (s := early_stop(ev.sources[f.file], f.line))), None)
    if stop and len(done) == 1:   # the finished rank left that loop early, on a condition of its own
        f, s = stop
        name = f.file.rsplit("/", 1)[-1]
        w = ev.blame(done[0].rank, Rule.UNEVEN, f"rank {done[0].rank} finished the script while rank {v.rank} still "
                        f"called {v.where.describe()}, which no peer matched; the loop rank {v.rank} is in (`{s.loop}`, "
                        f"line {s.loop_line}) has an early exit at line {s.exit_line} under `{s.guard}` (line "
                        f"{s.guard_line}), a test of a value the loop computes: rank {done[0].rank} took it on "
                        f"values of its own (its loss, its metric, its data) while rank {v.rank}'s did not hold, so "
                        f"rank {done[0].rank} is named. Decide a stop together: all_reduce the flag or the metric, then "
                        "every rank leaves at the same step",
                        progress + [f"{name}:{s.guard_line}: {s.guard}", f"rank {v.rank}: {v.error}"],
                        Failure.COLLECTIVE_MISMATCH)
        return replace(w, where=f"{f.file}:{s.exit_line} in the loop at line {s.loop_line}: {s.guard}")
    return ev.blame(v.rank, Rule.UNEVEN, f"rank{'s' if len(done) > 1 else ''} {', '.join(str(w.rank) for w in done)} "
                    f"finished the script while rank {v.rank} still called {v.where.describe()}, which no peer "
                    "matched: the ranks issued different numbers of collectives (uneven inputs: more batches on "
                    f"rank {v.rank}, or fewer on the others)", progress + [f"rank {v.rank}: {v.error}"],
                    Failure.COLLECTIVE_MISMATCH)


def new_collective(ev: Evidence) -> Verdict | None:
    """Needs: the ranks' collective records (the Flight Recorder entries the rank shim writes: sequence number, op,
    sizes, dtype per collective).  Concludes, when the ranks' positions, their source and their logs named nobody:
    at the first collective the records disagree on, one rank issued a collective no rank had issued before while its
    peers issued one every rank had run before (DDP's broadcast at each forward, a loop's all_reduce), or one rank
    differs from all its peers: that rank left the path every rank shared (a loop left early, a call of its own) and
    is named (:func:`nbhelpers.diagnosis.flightrec.analyse`).  After the rules that read the source and the logs: a
    rank that ran an extra usual collective under a rank condition, or resumed apart, leaves its peer the one with
    the new collective, though the peer is not at fault."""
    fd = ev.new_in_record
    if fd is None:
        return None
    r = fd["culprit"]
    mine = next(g for g in fd["groups"] if r in g["ranks"])
    theirs = "; ".join(f"rank{'s' if len(g['ranks']) > 1 else ''} {rank_ranges(g['ranks'])} {g['desc']}"
                       for g in fd["groups"] if r not in g["ranks"])
    where = ev.by_rank[r].where
    at = f" ({where.describe()})" if where and where.collective else ""
    record = f"record: {fd['torch']}" if fd.get("torch") else f"record: collective #{fd['seq']}"
    return ev.blame(r, Rule.NEW_COLLECTIVE, f"the ranks' collective records part at collective #{fd['seq']} on "
                    f"{fd['pg']}: rank {r} issued {mine['desc']}{at} where {theirs}; {fd['why']}. Rank {r} left the path "
                    "every rank had shared (a loop left early on a condition of its own, a call only it makes)",
                    [record] + [f"rank {v.rank}: {v.error}" for v in ev.views if v.error][:2],
                    Failure.COLLECTIVE_MISMATCH)


def different_collectives(ev: Evidence) -> Verdict | None:
    """Needs: each rank's traceback or stack dump, and the user's source.  Concludes: when the ranks waited
    in different collectives (rank 0 in ``broadcast`` at line 55, rank 1 in ``all_reduce`` at line 60), the
    calls do not pair up; the rank whose call sits inside an ``if`` on the rank is named (the source shows
    the branch), else the rank the logs or a loop point to (:meth:`Evidence.settle`), else nobody, with every
    rank's call and line."""
    where = {v.rank: v.where for v in ev.views if v.where and v.where.collective}
    groups: dict[tuple, list[int]] = {}
    for r, w in sorted(where.items()):
        groups.setdefault((w.collective, w.user.where if w.user else None), []).append(r)
    if len(where) < 2 or len(groups) < 2:
        return None
    calls = "; ".join(f"rank{'s' if len(rs) > 1 else ''} {rank_ranges(rs)}: {where[rs[0]].describe()}"
                      for rs in groups.values())
    evidence = [f"rank{'s' if len(rs) > 1 else ''} {rank_ranges(rs)}: {where[rs[0]].user}"
                for rs in groups.values() if where[rs[0]].user]
    odd = [rs for rs in groups.values() if len(rs) == 1]
    if len(groups) == 2 and len(odd) == 1 and len(where) >= 3:  # all but one rank at one call: the odd one out
        r = odd[0][0]
        return ev.blame(r, Rule.DIFFERENT_COLLECTIVES, f"the ranks waited in different collectives ({calls}): rank "
                        f"{r} alone called {where[r].describe()}, where every other rank waits elsewhere",
                        evidence, Failure.COLLECTIVE_MISMATCH)
    branches = {r: b for r in where if (b := ev.rank_condition(ev.by_rank[r])) and not b[1].startswith("else")}
    if len(branches) == 1:
        r, (line, cond) = next(iter(branches.items()))
        return ev.blame(r, Rule.DIFFERENT_COLLECTIVES, f"the ranks waited in different collectives ({calls}); rank "
                        f"{r}'s call is inside `{cond}` (line {line}): a collective only some ranks call, or call in "
                        "another order", evidence + [f"rank {r}: line {line}: {cond}"], Failure.COLLECTIVE_MISMATCH)
    settled = ev.settle(ev.nobody(Rule.DIFFERENT_COLLECTIVES, f"the ranks waited in different collectives ({calls}): "
                                  "their calls do not pair up. Read each call site: every rank must call the same "
                                  "collectives in the same order", evidence, Failure.COLLECTIVE_MISMATCH), where)
    if settled.culprit is None and ev.new_in_record is not None:
        return None  # nothing here names a rank, the collective records do: new_collective, next
    return settled


def named(ev: Evidence) -> Verdict | None:
    """Needs: the waiting ranks' errors.  Concludes: when they name exactly one rank they waited for (the
    store key of its rank, ``Rank 1 failed to pass monitoredBarrier``), that rank."""
    found: set[int] = set()
    for v in ev.views:
        found |= named_ranks(v.error, ev.world) - {v.rank}
    if len(found) != 1:
        return None
    r = found.pop()
    waiter = next(v for v in ev.views if r in named_ranks(v.error, ev.world))
    return ev.blame(r, Rule.NAMED, f"rank {waiter.rank} timed out waiting for rank {r} "
                    f"(rank {r} was in {ev.by_rank[r].last_seen(ev.t_fail)})", [f"rank {waiter.rank}: {waiter.error}"])


def _behind(ev: Evidence) -> tuple[str, list[RankView]] | None:
    """The stage the first rank failed in and the ranks that had not reached it (some, not all), else None."""
    if ev.first is None:
        return None
    started = ev.by_rank[ev.first].stages_started(ev.t_fail)
    stage = started[-1] if started else None
    behind = [v for v in ev.views if stage and stage not in v.stages_started(ev.t_fail + 0.05)]
    return (stage, behind) if behind and len(behind) < ev.world else None


def unmatched(ev: Evidence) -> Verdict | None:
    """Needs: stage events and stack dumps.  Concludes: a rank waited in a collective inside a stage its peers had
    finished without one: a collective only it calls (a broadcast inside ``if rank == 0:`` checkpoint-loading
    code), whoever timed out first.  Either a rank that had not reached the stage the first rank failed in, waiting
    in a collective of a stage the first had finished (it is named, not the first), or, when every rank had reached
    that stage, the first rank to fail itself.  A collective mismatch, as when the ranks' calls are read from their
    stacks."""
    if ev.first is None:
        return None
    first = ev.by_rank[ev.first]
    first_err = [f"rank {ev.first}: {first.error or _signal_text(first.record)}"]
    found = _behind(ev)
    if found:
        stage, behind = found
        v = behind[0]
        why = _unmatched(v, [first], ev.t_fail)
        if not why:
            return None  # late: it had not reached the stage, and was not waiting in a collective of its own
        return ev.blame(v.rank, Rule.UNMATCHED, why + f"; rank {ev.first} then timed out in {stage}",
                        first_err + ([v.error] if v.error else []) + [_stack_line(w) for w in behind if w.stack])
    others = [v for v in ev.views if v.rank != ev.first]
    why = _unmatched(first, others, ev.t_fail)
    if not why:
        return None
    return ev.blame(ev.first, Rule.UNMATCHED, why, [f"rank {ev.first}: {first.error}"]
                    + [f"rank {v.rank}: {v.error}" for v in others if v.error], Failure.COLLECTIVE_MISMATCH)


def late(ev: Evidence) -> Verdict | None:
    """Needs: stage events.  Concludes: when the first rank failed, the ranks that had not yet reached the
    stage it failed in are late (a straggler, a rank stuck outside the collective, a rank that never
    joined); the first of them is named (:func:`unmatched`, before this rule, takes the late rank that was itself
    waiting in a collective only it calls)."""
    found = _behind(ev)
    if not found:
        return None
    stage, behind = found
    v, first = behind[0], ev.by_rank[ev.first]
    return ev.blame(v.rank, Rule.LATE, f"rank {ev.first} failed in {stage} while rank {v.rank} had not reached it "
                    f"(rank {v.rank} was last seen in {v.last_seen(ev.t_fail)})",
                    [f"rank {ev.first}: {first.error or _signal_text(first.record)}"]
                    + [_stack_line(w) for w in behind if w.stack])


def collective_in_lock(ev: Evidence) -> Verdict | None:
    """Needs: tracebacks or stacks, and the user's source.  Concludes: when a rank's collective sits inside a
    ``with ...lock...:`` block (a file lock around cache building, say), the rank holding the lock waits in the
    collective for peers that wait for the lock: the rank that timed out in it (it held the lock) is named."""
    locked = [v for v in ev.views if v.where and v.where.collective and ev.enclosing(v, LOCK_BLOCK)]
    if not locked:
        return None
    waited = [v for v in locked if v.error and WAITING.search(v.error)] or locked
    v = min(waited, key=lambda v: ev.first_times.get(v.rank, float("inf")))
    line, block = ev.enclosing(v, LOCK_BLOCK)
    return ev.blame(v.rank, Rule.COLLECTIVE_IN_LOCK, f"rank {v.rank} waited in {v.where.describe()} inside "
                    f"`{block}` (line {line}): it held the lock while its peers, waiting for the lock, could not "
                    "reach the collective; it timed out, and only then could the others go on", [
                        f"rank {w.rank}: {w.error}" for w in ev.views if w.error], Failure.COLLECTIVE_TIMEOUT)


def outside_collective(ev: Evidence) -> Verdict | None:
    """Needs: stack dumps (programs without events).  Concludes: when the run timed out, was interrupted or
    the first error is a wait, a rank whose stack is outside torch.distributed while others wait inside it
    is the late one."""
    first_err = ev.by_rank[ev.first].error if ev.first is not None else None
    if ev.status not in ("timeout", "interrupted", "hang") and not _is_victim_error(first_err):
        return None
    outside = [v for v in ev.views if v.rank != ev.first and v.in_distributed() is False]
    inside = [v for v in ev.views if v.in_distributed() or _is_victim_error(v.error)]
    if not outside or not inside:
        return None
    v = outside[0]
    return ev.blame(v.rank, Rule.OUTSIDE_COLLECTIVE, f"rank {v.rank} was not in any collective while "
                    f"{'rank ' + str(ev.first) if ev.first is not None else 'the others'} waited: it was "
                    f"{_stack_line(v).split(': ', 1)[1]}", [f"rank {w.rank}: {w.error}" for w in inside if w.error]
                    + [_stack_line(w) for w in inside[:3] if not w.error and w.stack] + [_stack_line(v)])


def furthest_behind(ev: Evidence) -> Verdict | None:
    """Needs: stage events, a run stopped from outside (timeout, interrupt) before any rank failed.
    Concludes: the rank that had started the fewest stages."""
    if ev.first is not None or ev.status not in ("timeout", "interrupted"):
        return None
    progress = {v.rank: len(v.stages_started(ev.t_fail)) for v in ev.views}
    if len(set(progress.values())) <= 1:
        return None
    r = min(progress, key=progress.get)
    return ev.blame(r, Rule.FURTHEST_BEHIND, f"at the {ev.status}, rank {r} was furthest behind "
                    f"(last seen in {ev.by_rank[r].last_seen(ev.t_fail)})", [_stack_line(ev.by_rank[r])])


def unreachable(ev: Evidence) -> Verdict | None:
    """Needs: logs, and tracebacks or stacks.  Concludes: a rank whose log says it could not connect (wrong port or
    address, firewall, missing interface) is the one to look at; unless every rank was still connecting to the
    store when the job ended: then none reached it (each was given another address or port, or nobody hosts it),
    and the first to give up is not the culprit."""
    for v in ev.views:
        hits = v.unreachable_lines()
        if not hits:
            continue
        if len(ev.views) >= 2 and all(w and any(f.func == "_create_c10d_store" for f in w.frames)
                                      for w in (u.where for u in ev.views)):
            return ev.nobody(Rule.UNREACHABLE, f"no rank reached the rendezvous store: every rank was still "
                             f"connecting to it when rank {v.rank} gave up ({hits[0][:200]}). They were given different "
                             "addresses or ports (a script that sets its own MASTER_PORT or init_method overrides "
                             "torchrun's), or the store's host never started", hits[:1])
        return ev.blame(v.rank, Rule.UNREACHABLE, f"rank {v.rank} could not connect: {hits[0][:200]}", [])
    return None


def own_error(ev: Evidence) -> Verdict | None:
    """Needs: errors.  Concludes: the first rank that failed with an error of its own (not a timeout,
    not a lost peer)."""
    own = [v for v in ev.views if v.error and not v.victim()]
    if not own:
        return None
    v = min(own, key=lambda v: v.first_fail_time or 0)
    tb = v.traceback
    at = f": {_short(tb.exception)} {tb.describe()}" if tb is not None else ""
    return ev.blame(v.rank, Rule.ERROR, f"rank {v.rank} failed with its own error{at}", [v.error]
                    + (_frames_ev(v, tb) if tb is not None else []), Failure.RANK_ERROR)


def nobody_stands_out(ev: Evidence) -> Verdict:
    """Always concludes, naming nobody: every rank was waiting (on each other, or on the network)."""
    where = sorted({v.last_seen(ev.t_fail) for v in ev.views})
    places = ", ".join(w if w.startswith("at ") else f"in {w}" for w in where)  # "at train.py:74 in fit": no call
    return ev.nobody(Rule.UNKNOWN, f"no rank stands out: every rank was {places} "
                     "(all waiting on each other, or on the network); read the stack dumps", [])


RULES: list[Callable[[Evidence], Verdict | None]] = [
    passed, desync_rule, rank_only_collective, size_mismatch, model_mismatch, exit_without_destroy, hung_at_exit,
    ddp_segfault, same_error, race,
    mapped_file_shrunk, crashed, wrong_world, short_timeout, named, key_never_set,
    skipped_call, uneven_collectives, unmatched, late, different_collectives, new_collective, collective_in_lock, outside_collective,
    furthest_behind, unreachable,
    own_error, nobody_stands_out,
]


def find_culprit(views: list[RankView], status: str, stop_time: float | None = None,
                 torchrun_log: str = "", sources: dict[str, str] | None = None, record: dict | None = None) -> Verdict:
    """The verdict of the first rule in :data:`RULES` that concludes."""
    ev = Evidence(views, status, stop_time, torchrun_log, dict(sources or {}), record)
    return next(v for rule in RULES if (v := rule(ev)) is not None)


def _unmatched(v: RankView, others: list[RankView], t_fail: float) -> str | None:
    """Why ``v`` ran a collective the ``others`` never called, or None: ``v`` was waiting inside a collective
    (a timeout error, or its stack in torch.distributed) in a stage every one of ``others`` completed."""
    where = v.current_stage(t_fail + 0.05)
    if where is None or not others or not all(o.completed(where, t_fail + 0.05) for o in others):
        return None
    waiting = (_is_victim_error(v.error) and v.events and v.events[-1]["stage"] == where) or v.in_distributed()
    if not waiting:
        return None
    names = ", ".join(str(o.rank) for o in others)
    return (f"rank {v.rank} was waiting in a collective inside {where}, a stage rank{'s' if len(others) > 1 else ''} "
            f"{names} had finished without one: a collective only rank {v.rank} calls (e.g. inside "
            f"`if rank == {v.rank}:`)")


def sequence(v: RankView) -> list[tuple]:
    """This rank's traced collectives in call order: (call, op, shape) per ``seq``."""
    seen = {}
    for e in v.events:
        if e.get("status") == "running" and isinstance(e.get("seq"), int):
            seen[e["seq"]] = (e.get("call"), e.get("op"), tuple(e.get("shape") or ()))
    return [seen[k] for k in sorted(seen)]


def desync(views: list[RankView]) -> dict | None:
    """The first collective number at which the ranks' traced calls differ: ``seq``, each rank's call
    there (``have``), the ``odd`` rank when one rank differs from a strict majority (else None) and
    the majority (``agree``).  None when the sequences agree (or fewer than two ranks traced)."""
    seqs = {v.rank: sequence(v) for v in views}
    if sum(1 for s in seqs.values() if s) < 2:
        return None
    for i in range(max(len(s) for s in seqs.values())):
        have = {r: s[i] for r, s in seqs.items() if len(s) > i}
        if len(set(have.values())) <= 1:
            continue
        counts: dict[tuple, list[int]] = {}
        for r, fp in have.items():
            counts.setdefault(fp, []).append(r)
        major, agree = max(counts.items(), key=lambda kv: len(kv[1]))
        odd = [r for r in have if have[r] != major]
        single = len(agree) * 2 > len(seqs) and len(odd) == 1
        return {"seq": i + 1, "have": have, "odd": odd[0] if single else None, "agree": agree if single else []}
    return None


def _own_error_before(v: RankView, t: float) -> str | None:
    """The first error of this rank's own (not a timeout, not a lost peer) raised before time ``t``."""
    return next((e["error"] for e in v.events if e.get("status") == "fail" and e.get("error")
                 and e["t"] <= t and not _is_victim_error(e["error"])), None)


def _seq_time(v: RankView, seq: int) -> float:
    """When this rank entered its collective number ``seq``."""
    return next((e["t"] for e in v.events if e.get("seq") == seq and e.get("status") == "running"), float("inf"))


def _fp_text(fp: tuple) -> str:
    call, op, shape = fp
    return f"'{call}' ({op} {list(shape)})"


def _is_victim_error(err: str | None) -> bool:
    return bool(err) and bool(WAITING.search(err) or PEER_GONE.search(err))


def _victim_reason(v: RankView, culprit: int | None) -> str:
    who = f"rank {culprit}" if culprit is not None else "its peers"
    err = v.error or ""
    if PEER_GONE.search(err):
        return f"lost its connection to {who}"
    if WAITING.search(err):
        return f"timed out waiting for {who}"
    if v.record.get("stop_signal"):
        return (f"stopped ({v.record['stop_signal']}) by torchrun or the launcher while in "
                f"{v.last_seen(v.record.get('stop_time', 0))}")
    if v.record.get("returncode") == 0:
        return "finished"
    return err.splitlines()[0][:160] if err else "no error of its own"


def _stack_line(v: RankView) -> str:
    """Where the stack dump shows the rank: the user's own line, and the innermost call it was in."""
    w = stack_frames(v.stack) if v.stack else None
    if w is None:
        return f"rank {v.rank}: no stack"
    inner = w.frames[-1]
    if w.user is None or w.user == inner:
        return f"rank {v.rank} stack: {inner.func} ({inner.where})"
    return f"rank {v.rank} stack: {w.user.func} ({w.user.where}), in {inner.func} ({inner.file.rsplit('/', 1)[-1]}:{inner.line})"


def _where_text(v: RankView) -> str | None:
    """The culprit's position for the verdict: ``file:line in func``, with the source line when known (for a rank
    that died of a signal, from faulthandler's dump of its stack)."""
    return str(p.user) if (p := v.position) else None


def _fatal_where(v: RankView) -> Where | None:
    """The Python stack faulthandler printed when the rank died of a signal: the thread that died ("Current
    thread"), or, when that was a thread of C++'s own (gloo's, which has no Python frame and is not listed), the main
    thread (the one started at a module's top level), not the other threads faulthandler lists first (the rank
    shim's record thread, a DataLoader's pin thread)."""
    lines = v.log.splitlines()
    at = next((i for i, ln in enumerate(lines) if FATAL.match(ln)), None)
    if at is None:
        return None
    threads = [(current, f) for _, current, f in faulthandler_threads("\n".join(lines[at + 1:])) if f]
    chosen = next((f for current, f in threads if current), None) or \
        next((f for _, f in threads if f[-1][2] == "<module>"), None) or next((f for _, f in threads), None)
    return Where("faulthandler", [Frame(file, int(line), func) for file, line, func in reversed(chosen)]) if chosen \
        else None


def _frames_ev(v: RankView, w: Where) -> list[str]:
    return [f"rank {v.rank}: at {w.user}"] if w.user else []


def _short(text: str, n: int = 160) -> str:
    text = re.sub(r"\[[^\]\s]*\.(?:cc|cpp|h):\d+\]\s*|\[enforce fail at \S+\] ", "", text)
    return text if len(text) <= n else text[:n - 1] + "…"


def _headers(lines: list[str], line: int) -> Iterator[int]:
    """The 0-based indexes of the block headers that enclose ``line`` (1-based), innermost first, up to and with the
    enclosing ``def``/``class``."""
    if not 0 < line <= len(lines):
        return
    indent = len(lines[line - 1]) - len(lines[line - 1].lstrip())
    for i in range(line - 2, -1, -1):
        text = lines[i]
        ind = len(text) - len(text.lstrip())
        if not text.strip() or text.lstrip().startswith("#") or ind >= indent:
            continue
        indent = ind
        yield i
        if text.lstrip().startswith(("def ", "class ", "async def ")):
            return


def _enclosing(source: str, line: int, accept: Callable[[list[str], int], str | None]) -> tuple[int, str] | None:
    """Walk the blocks that enclose ``line`` (1-based) of ``source``, innermost first, up to the enclosing
    ``def``; the first header for which ``accept(lines, index)`` gives a text is returned as (its line, text)."""
    lines = source.splitlines()
    return next(((i + 1, found) for i in _headers(lines, line) if (found := accept(lines, i))), None)


LOOP = re.compile(r"^\s*(?:async\s+)?(?:for|while)\b.*:\s*(#.*)?$")
AUTOGRAD_FUNCTION = re.compile(r"^class\s+\w+\s*\((?:[\w.]*\.)?Function\)")  # a custom autograd Function
CONDITION = re.compile(r"^\s*(?:(?:if|elif)\b(?!\s+__name__\s*==).*|else\s*):\s*(#.*)?$")  # not the script's main guard


def loop_left(source: str, inside: int, after: int) -> tuple[int, str] | None:
    """The outermost ``for``/``while`` loop that encloses line ``inside`` of ``source`` and that line ``after`` comes
    after (past its end, in the same function): one rank still in the loop, the other already out of it. As (the
    loop's line, its header)."""
    lines = source.splitlines()
    found = None
    for i in _headers(lines, inside) if 0 < after <= len(lines) else ():
        if LOOP.match(lines[i]):
            ind = len(lines[i]) - len(lines[i].lstrip())
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() and not lines[j].lstrip().startswith("#")
                        and len(lines[j]) - len(lines[j].lstrip()) <= ind), len(lines))
            if after > end:  # 1-based ``after`` past the loop's last line (0-based ``end`` is the first line after it)
                found = (i + 1, lines[i].strip().rstrip(":"))
    return found


def enclosing_block(source: str, line: int, header: re.Pattern) -> tuple[int, str] | None:
    """The innermost block header matching ``header`` that encloses ``line``, as (its line, its text)."""
    return _enclosing(source, line, lambda lines, i: lines[i].strip().rstrip(":") if header.match(lines[i]) else None)


def _enclosing_def(lines: list[str], line: int) -> int | None:
    """The 0-based index of the ``def`` whose body holds ``line`` (1-based) of ``lines``."""
    return next((i for i in _headers(lines, line) if lines[i].lstrip().startswith(("def ", "async def "))), None)


def enclosing_class(source: str, line: int) -> tuple[int, str] | None:
    """The ``class`` whose method holds ``line`` of ``source`` (1-based), as (its line, its header)."""
    lines = source.splitlines()
    d = _enclosing_def(lines, line)
    c = next(iter(_headers(lines, d + 1)), None) if d is not None else None
    return (c + 1, lines[c].strip().rstrip(":")) if c is not None and lines[c].lstrip().startswith("class ") else None


def returns_unless_rank(source: str, line: int, flow=None) -> bool:
    """Whether the function holding ``line`` of ``source`` (1-based) returns early, before that line, under a test of
    a value that differs by rank (``if not self.is_main: return``, read by :class:`~nbhelpers.diagnosis.structure.
    RankFlow`; ``flow``: the project's, read from this file, else the file's own): only the ranks the test lets
    through reach it, as under an ``if rank == 0:``."""
    flow = flow or rank_flow(source)
    return flow is not None and flow.returns_before(line) is not None


def enclosing_rank_branch(source: str, line: int, flow=None) -> tuple[int, str] | None:
    """The innermost ``if``/``elif`` on a value that differs by rank enclosing ``line`` of ``source`` (1-based), as
    (its line, its text); its ``else`` gives ("else of ..." text) (:class:`~nbhelpers.diagnosis.structure.RankFlow`:
    values from the documented rank APIs, followed through the user's own variables, attributes and functions;
    ``flow``: the project's, read from this file, else the file's own)."""
    flow = flow or rank_flow(source)
    return flow.branch(line) if flow is not None else None
