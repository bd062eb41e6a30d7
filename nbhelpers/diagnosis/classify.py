"""Turn a wall of distributed-training log text into a diagnosis, best finding first.

    findings = classify(text)              # or classify_file(path), classify_stream(lines)
    findings[0].category, findings[0].evidence, findings[0].remedies

Rules are data: a category, a lower-case literal *needle* that must occur on the line, an optional
regex that must then match it, and a weight.  Text is scanned in large chunks: one Aho-Corasick
pass (ahocorasick-rs, over bytes) finds every needle at once and only those lines are examined, so a
gigabyte of NCCL INFO chatter streams through without being held in memory.  Scores add up per category with diminishing returns; causes
(an OOM, a killed rank, a torn file, a bad interface) outrank consequences (timeouts, NCCL's
wrapper errors) seen in the same log, so a watchdog timeout on rank 3 after rank 5 was OOM-killed
is reported as the kill.
"""
from __future__ import annotations

import io
import json
import os
import re
from collections import OrderedDict, deque
from pathlib import Path
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from nbhelpers.diagnosis.api import Failure
from nbhelpers.diagnosis.api import Rule as CulpritRule  # classify's own Rule is a row of its rule table
from nbhelpers.diagnosis.categories import CATEGORIES, CONSEQUENCE
from nbhelpers.diagnosis.model import MIN_CONFIDENCE, MIN_FAILURE, SecondOpinion, error_lines, hard_errors
from nbhelpers.diagnosis.remedies import REMEDIES
from nbhelpers.diagnosis.watchdog import SHORT_TIMEOUT_MS, timeout_ms

CHUNK = 4 << 20
TAIL_BYTES = 1 << 16
MAX_EVIDENCE = 4
NOISE = re.compile(r"FutureWarning|DeprecationWarning|UserWarning|is deprecated|will be removed in", re.I)


RULES_FILE = Path(__file__).resolve().parent.parent / "data" / "classify_rules.jsonl"
# what a rule's flags mean (a row of the rules file may carry any of them)
FLAGS = {
    "context": "counts only if the log also holds an error it can explain (a connection or hang error): an interface "
               "list, a rank waiting at the store",
    "alone": "counts only if no other category has a finding: a launcher's report of whatever failed",
    "origin": "an NCCL trace frame (\"net_ib.cc:282 -> 2\") that counts only where the error began: the line before "
              "it is not a frame too",
    "in_warnings": "also fires on a deprecation or user warning line (torch warns some real errors)",
    "hint": "never counts: shown as a hint (:func:`hints`) when the log has no finding",
    "peer_report": "what a rank's peers and its launcher report after it failed with an error of its own (a lost "
                   "connection, torchrun's SIGTERMs, a non-kill exit code): yields to that rank's own exception",
    "peer_gone": "a peer closed the connection: a consequence when a timeout is in the same log (the rank that timed "
                 "out exited and closed it)",
    "teardown_signal": "a launcher's report of a rank's signal other than SIGKILL: an abort at exit "
                       "(exit_without_destroy) is its cause",
    "barrier_wait": "c10d's \"Waiting in store based barrier\", logged every 10 s: three from one rank mean init is stuck",
    "by_code": "not searched for: the engine applies it itself (referred to by its id)",
}


@dataclass(frozen=True, eq=False)
class Rule:
    """A row of ``nbhelpers/data/classify_rules.jsonl``: a line holding ``needle`` (lower case) and matching
    ``pattern`` (a case-insensitive regex, or None) is evidence of ``category`` worth ``weight``; ``flags``
    (:data:`FLAGS`) say when it counts.  The file's rows also hold the samples each must match and where the
    message is printed (:func:`rule_rows`)."""
    id: str
    category: str
    needle: str
    pattern: str | None = None
    weight: float = 3.0
    flags: frozenset = frozenset()
    library: str = ""
    hint_why: str | None = None   # what the line means when it is only a hint, if not its category's usual set-up

    context = property(lambda self: "context" in self.flags)
    alone = property(lambda self: "alone" in self.flags)
    origin = property(lambda self: "origin" in self.flags)
    in_warnings = property(lambda self: "in_warnings" in self.flags)
    hint = property(lambda self: "hint" in self.flags)

    def matches(self, line: str) -> bool:
        return self.pattern is None or _compiled(self.pattern).search(line) is not None


_REGEX: dict[str, re.Pattern] = {}


def _compiled(p: str) -> re.Pattern:
    if p not in _REGEX:
        _REGEX[p] = re.compile(p, re.I)
    return _REGEX[p]


def rule_rows(path: str | os.PathLike = RULES_FILE) -> list[dict]:
    """The rules file as it is written: one dict a rule (id, library, failure, needle, pattern, weight, flags,
    samples, note, from), grouped by the library that prints the message."""
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@dataclass
class _Table:
    rules: list[Rule]
    by_id: dict[str, Rule]
    by_needle: dict[str, list[Rule]]   # the rules searched for, by needle, in file order
    needles: list[str]                 # the automaton's needles: the rules', then CONTEXT_NEEDLES
    automaton: object = None


_TABLE: _Table | None = None


def _table() -> _Table:
    """The rules file, loaded once (a few ms; the automaton is built on the first search, ~20 ms)."""
    global _TABLE
    if _TABLE is None:
        rules = []
        for row in rule_rows():
            flags = frozenset(row["flags"])
            if row["failure"] not in CATEGORIES or row["needle"] != row["needle"].lower() or flags - FLAGS.keys():
                raise ValueError(f"{RULES_FILE.name}: bad row {row['id']}")
            rules.append(Rule(row["id"], row["failure"], row["needle"], row["pattern"], row["weight"], flags,
                              row["library"], row.get("hint_why")))
        by_needle: dict[str, list[Rule]] = {}
        for r in rules:
            if "by_code" not in r.flags:
                by_needle.setdefault(r.needle, []).append(r)
        _TABLE = _Table(rules, {r.id: r for r in rules}, by_needle, [*by_needle, *CONTEXT_NEEDLES, ESCAPED])
    return _TABLE


def __getattr__(name: str):
    if name == "RULES":  # loaded on first use, not at import
        return _table().rules
    raise AttributeError(name)

NCCL_VERSION = re.compile(r"NCCL(?:_VERSION=\"?|\s+version\s+)(\d+\.\d+\.\d+)|^\((\d+), (\d+), (\d+)\)\s*$", re.I)
CONTEXT_NEEDLES = ("nccl version", "nccl_version=", "sequencenumber=", "worker_count=", "seqnum=",
                   "global_rank: ")  # whole-log checks
ESCAPED = "%20"  # the last needle: an error message pasted from a URL or an issue title ("undefined%20symbol:%20ncclX")
# Lightning's "initializing ddp: GLOBAL_RANK: 3, MEMBER: 4/8", one line per process as it joins the process group
MEMBER = re.compile(r"GLOBAL_RANK: (\d+), MEMBER: \d+/(\d+)")
# an exception raised while the ranks meet (init_process_group, the TCPStore, the rendezvous) that says the
# connection to the store failed: the ranks never all met
INIT_FRAME = re.compile(r"init_process_group|TCPStore|_create_c10d_store|rendezvous|_store_based_barrier|new_group")
TIMED_OUT = re.compile(r"timed? ?out|timeout", re.I)
INIT_LOST = re.compile(r"reset by peer|connection refused|broken pipe|connect\(\) timed out|timed out", re.I)
BARRIER_COUNTS = re.compile(r"world_size=(\d+), worker_count=(\d+)")
SEQ_NUMBER = re.compile(r"\[Rank (\d+)\].*SequenceNumber=(\d+)")
# the watchdog's "WorkNCCL(SeqNum=3742816, OpType=REDUCE, NumelIn=..., ...)": ranks timing out at the same sequence
# number of the same process group in different operations, or in one operation whose sizes must agree but with
# different sizes, called different collectives there (a mismatch, not a slow rank)
WORK_OP = re.compile(r"SeqNum=(\d+),\s*OpType=(\w+)(?:,\s*NumelIn=(\d+))?")
SAME_SIZE_OPS = {"ALLREDUCE", "BROADCAST", "REDUCE", "_ALLGATHER_BASE", "_REDUCE_SCATTER_BASE"}  # not all-to-all
PG_ID = re.compile(r"PG ID (\d+)")
# NCCL_DEBUG_SUBSYS=COLL's line for each collective a process enqueues (NCCL and RCCL, enqueue.cc): "host:pid:tid [dev]
# NCCL INFO AllReduce: opCount 28c sendbuff ... count 9984512 datatype 7 op 0 root 0 comm 0x... [nranks=4] ...".
# Every rank of a communicator numbers its collectives alike, so processes at the same opCount of a communicator
# of the same size that called a different operation, count, type, reduction or root called different collectives
# (NCCL does not check; the job hangs or computes garbage).  Send/Recv are left out: their counts differ by peer.
COLL_OP = re.compile(rb"NCCL INFO (AllReduce|Broadcast|Reduce|AllGather|ReduceScatter): opCount (\w+) sendbuff \S+ "
                     rb"recvbuff \S+ count (\d+) datatype (\d+) op (\d+) root (\d+) comm \S+ \[nranks=(\d+)\]")
COLL_PROCESS = re.compile(rb"([A-Za-z0-9_.-]+):(\d+):\d+ \[\d+\] $")  # "host:pid:tid [dev] " before "NCCL INFO"
URL_ESCAPE = re.compile(rb"%(2[0-9A-Fa-f]|3[A-Fa-f])")  # the punctuation a URL escapes: space, quotes, /, :, ;, =
COLL_WINDOW = 20000  # the latest (nranks, opCount) pairs kept: ranks reach one collective at about the same time
RANK_PATTERNS = [re.compile(p) for p in (r"\[rank(\d+)\]", r"\[Rank (\d+)\]", r"\brank\s*:\s*(\d+)",
                                         r"on rank:? (\d+)", r"\[default(\d+)\]:", r"local_rank:\s*(\d+)")]
TRACE_FRAME = re.compile(rb"\.(?:cc|cu|h):\d+ -> \d+")  # NCCL's error trace, one frame a line
NCCL_PREFIX = re.compile(r"^(?:\S+\s+)?([A-Za-z0-9_.-]+):(\d+):(\d+) \[(\d+)\]")
# a stack frame, not a message: C++ ("frame #2: c10::DistNetworkError::..."), Python ('File "x.py", line 3'), gdb
# and backtrace ("#3 0x7f..."), possibly behind a rank prefix
FRAME_LINE = re.compile(r'^\W*(?:\[rank\d+\]:\s*)?(?:frame #\d+:|File "|#\d+\s+0x[0-9a-f]+|\d+\s+0x[0-9a-f]+\s)')
NBH_PREFIX = re.compile(r"\[([A-Za-z0-9_.-]+):(\d+)\]")

# the errors a context (an interface list, a rank waiting at the store, NCCL's IB trace) can explain: connections
# and hangs, not a CUDA, version, checkpoint, /dev/shm or out-of-memory error
CONNECTION = {"rendezvous_timeout", "port_in_use", "collective_timeout", "nccl_system_error", "nccl_internal_or_invalid_usage",
              "network_interface", "infiniband", "worker_killed"}
# exceptions that report a failure elsewhere (torchrun's, mp.spawn's, c10d's wrappers) or an interruption
NOT_OWN = re.compile(r"(?:^|\.)(?:ChildFailedError|ProcessExitedException|ProcessRaisedException|SignalException|"
                     r"KeyboardInterrupt|SystemExit|Dist\w*Error|\w*Timeout\w*|CalledProcessError|RayTaskError\w*|"
                     r"Connection\w*Error|BrokenPipeError)$")  # a lost connection is what peers see
CAUGHT_IN_WORKER = re.compile(r"^Caught \w+ in (?:DataLoader worker process|replica) \d+")
# c10d logs "Waiting in store based barrier ..." every 10 s while ranks are missing (rules flagged barrier_wait): one
# per rank is normal while a big job assembles, the same rank waiting three times or more means init has been stuck
# 30 s or longer (_findings applies STUCK_BARRIER)
WAITER = re.compile(r"for rank: (\d+), key: (\S+)")
STUCK_AFTER = 3
# What is a consequence of what, beyond the categories that always are (CONSEQUENCE, the categories' cause=False):
# (category, flag, beside, cause): when every counted rule of `category` carries `flag` and the log also holds one of
# `beside`, `category` is reported after the others, and `cause` (if any) is no longer a consequence.
REPORTS = [
    # only "connection closed by peer": a rank that timed out (in a collective, or waiting for a store key) and
    # exited closes its peers' connections: the lost peer follows from the timeout, it is not a killed rank (notebook 04)
    ("worker_killed", "peer_gone", {"collective_timeout", "rendezvous_timeout"}, None),
    # a rank that aborted at exit ("terminate called without an active exception") is reported by torchrun as
    # "Signal 6 (SIGABRT)" or, when faulthandler crashed dumping it, "Signal 11 (SIGSEGV) received by PID": the abort
    # at exit is the cause, the signal its report
    ("worker_killed", "teardown_signal", {"exit_without_destroy"}, "exit_without_destroy"),
]
OVERCOUNT, STUCK_BARRIER = "torch.store-barrier-overcount", "torch.store-barrier-stuck"  # rules the engine applies


@dataclass
class Evidence:
    line: int          # 1-based line number in the input
    text: str
    rank: int | None = None
    host: str | None = None

    def __str__(self) -> str:
        where = "".join(f" {k}={v}" for k, v in (("rank", self.rank), ("host", self.host)) if v is not None)
        return f"line {self.line}{where}: {self.text}"


@dataclass
class Finding:
    category: str
    confidence: float
    score: float
    evidence: list[Evidence] = field(default_factory=list)
    by: str = "rules"       # "model": the learned second opinion (no rule fired)

    @property
    def failure(self) -> Failure:
        return Failure(self.category)

    @property
    def title(self) -> str:
        return CATEGORIES[self.category].title

    @property
    def explanation(self) -> str:
        return CATEGORIES[self.category].explanation

    @property
    def short_timeout_ms(self) -> int | None:
        """The timeout an evidence line gives, when it is under a second (``Timed out waiting 300ms``): then the
        timeout's value or unit is the fault, not a rank (as the run's ``short_timeout`` rule says)."""
        found = [ms for e in self.evidence if (ms := timeout_ms(e.text)) is not None]
        return min(found) if found and max(found) < SHORT_TIMEOUT_MS else None

    @property
    def remedies(self) -> list[str]:
        short = list(REMEDIES[CulpritRule.SHORT_TIMEOUT]) if self.short_timeout_ms is not None else []
        return short + list(CATEGORIES[self.category].remedies)

    @property
    def is_cause(self) -> bool:
        return self.category not in CONSEQUENCE

    def to_dict(self) -> dict:
        return {"category": self.category, "by": self.by, "title": self.title, "confidence": round(self.confidence, 2),
                "score": round(self.score, 2), "explanation": self.explanation, "remedies": self.remedies,
                "evidence": [{"line": e.line, "rank": e.rank, "host": e.host, "text": e.text} for e in self.evidence]}

    def candidate(self) -> dict:
        """The short form shown as one of the log's top 2: category, confidence, by."""
        return {"category": self.category, "confidence": round(self.confidence, 2), "by": self.by}

    def __repr__(self) -> str:
        return f"<Finding {self.category} conf={self.confidence:.2f} evidence={len(self.evidence)} lines>"


def _evidence(st: "_State", category: str) -> list[Evidence]:
    """A finding's evidence: the messages first, then (room left) the stack frames that matched."""
    return (st.evidence.get(category, []) + st.frames.get(category, []))[:MAX_EVIDENCE]


def _where(line: str) -> tuple[int | None, str | None]:
    host = None
    m = NCCL_PREFIX.search(line)
    if m:
        host = m.group(1)
    m2 = NBH_PREFIX.search(line)
    if m2 and not m:
        return int(m2.group(2)), m2.group(1)
    for p in RANK_PATTERNS:
        m3 = p.search(line)
        if m3:
            return int(m3.group(1)), host
    return None, host


class _State:
    def __init__(self):
        self.hits: dict[str, dict[Rule, int]] = {}
        self.evidence: dict[str, list[Evidence]] = {}
        self.frames: dict[str, list[Evidence]] = {}  # evidence on stack frames: shown after the messages
        self.first_line: dict[str, int] = {}
        self.nccl_versions: dict[str, int] = {}
        self.seq_numbers: dict[int, int] = {}
        self.seq_line: int | None = None
        self.work_ops: dict[tuple[str, int], dict[str, int]] = {}   # (pg, seq) -> {op: first line}
        self.work_sizes: dict[tuple[str, int, str], dict[int, set[int]]] = {}  # (pg, seq, op) -> {rank: {numel}}
        self.coll_ops: OrderedDict[tuple[bytes, bytes], dict] = OrderedDict()  # (nranks, opCount) -> {process: (op, line)}
        self.coll_seen: OrderedDict[tuple[bytes, bytes], set] = OrderedDict()  # (nranks, opCount) -> {collective}
        self.coll_prev: tuple[bytes, int] = (b"", 0)  # the chunk before, and the line it started after
        self.coll_split: tuple[int, str, list[str]] | None = None  # the first opCount where processes disagree
        self.waits: dict[tuple[str, str], int] = {}
        self.members: dict[int, list[int]] = {}  # Lightning's global rank -> the lines that announced it
        self.world: int | None = None
        self.lines = 0
        self.tail = b""        # the last bytes seen: what the model reads when no rule fires

    def tail_text(self) -> tuple[str, int]:
        """The last bytes seen, as text, and the line number of its first line."""
        text = self.tail.decode(errors="replace")
        return text, self.lines - text.count("\n") + 1

    def add(self, rule: Rule, lineno: int, line: str) -> None:
        per = self.hits.setdefault(rule.category, {})
        per[rule] = per.get(rule, 0) + 1
        if "barrier_wait" in rule.flags:
            who = WAITER.search(line)
            who = who.groups() if who else ("?", "?")
            self.waits[who] = self.waits.get(who, 0) + 1
        self.first_line.setdefault(rule.category, lineno)
        ev = (self.frames if FRAME_LINE.match(line) else self.evidence).setdefault(rule.category, [])
        if len(ev) < MAX_EVIDENCE and not any(e.line == lineno for e in ev):
            rank, host = _where(line)
            ev.append(Evidence(lineno, line.strip()[:500], rank, host))


def _automaton(table: _Table):
    """One Aho-Corasick automaton (ahocorasick-rs, in Rust) over the UTF-8 bytes of every needle: a DFA, the
    fastest of its kinds here (builds in ~20 ms; 1.1-2x the default's speed on NCCL logs)."""
    if table.automaton is None:
        import ahocorasick_rs

        table.automaton = ahocorasick_rs.BytesAhoCorasick([n.encode() for n in table.needles],
                                                          implementation=ahocorasick_rs.Implementation.DFA)
    return table.automaton


def _needles_in(chunk: bytes) -> tuple[bytes, list, int]:
    """``chunk`` (URL escapes undone if it has any), every needle found in it (index, start, end) and how many lines
    it holds.  bytes.lower() changes ASCII only, so every needle (ASCII) is found and every offset stays put.  The
    search releases the GIL: chunks can be searched in threads."""
    table = _table()
    automaton, escaped = _automaton(table), len(table.needles) - 1
    found = automaton.find_matches_as_indexes(chunk.lower(), overlapping=True)
    if any(i == escaped for i, _, _ in found):
        chunk = URL_ESCAPE.sub(lambda m: bytes([int(m.group(1), 16)]), chunk)
        found = [f for f in automaton.find_matches_as_indexes(chunk.lower(), overlapping=True) if f[0] != escaped]
    return chunk, found, chunk.count(b"\n")


def _scan(chunk: bytes, base: int, st: _State, needles: list | None = None, lines: int | None = None) -> None:
    """Test the rules of every needle in ``chunk`` (whole lines of UTF-8; numbering starts after ``base``);
    ``needles`` and ``lines``: what :func:`_needles_in` found there, if it was already searched."""
    table = _table()
    if needles is None:
        chunk, needles, lines = _needles_in(chunk)
    found: dict[int, set[int]] = {}   # line start -> indexes of the needles on it
    last_start, last_end = -1, -1
    for idx, at, _ in needles:
        if at >= last_end:  # a new line: locate it once
            last_start = chunk.rfind(b"\n", 0, at) + 1
            last_end = chunk.find(b"\n", at)
            last_end = len(chunk) if last_end < 0 else last_end
        found.setdefault(last_start, set()).add(idx)
    lineno, pos = base + 1, 0
    for start in sorted(found):
        lineno += chunk.count(b"\n", pos, start)
        pos = start
        end = chunk.find(b"\n", start)
        line = (chunk[start:] if end < 0 else chunk[start:end]).decode("utf-8", "replace")
        for needle in (table.needles[i] for i in sorted(found[start])):  # table order: ties resolve the same every run
            if needle in CONTEXT_NEEDLES:
                _context(needle, line, lineno, st)
                continue
            for rule in table.by_needle[needle]:
                if rule.matches(line) and (rule.in_warnings or not NOISE.search(line)) and \
                        not (rule.origin and start and TRACE_FRAME.search(chunk, chunk.rfind(b"\n", 0, start - 1) + 1, start)):
                    st.add(rule, lineno, line)
    if st.coll_split is None and b": opCount " in chunk:
        _coll_check(chunk, base, st)
    st.lines = base + lines


def _context(needle: str, line: str, lineno: int, st: _State) -> None:
    if needle == "worker_count=":  # more workers than the world has: stale store keys from an earlier group
        m = BARRIER_COUNTS.search(line)
        if m and int(m.group(2)) > int(m.group(1)):
            st.add(_table().by_id[OVERCOUNT], lineno, line)
        return
    if needle == "seqnum=":
        m, pg = WORK_OP.search(line), PG_ID.search(line)
        if m:
            key, op = (pg.group(1) if pg else "", int(m.group(1))), m.group(2).upper()
            st.work_ops.setdefault(key, {}).setdefault(op, lineno)
            rank = _where(line)[0]
            if m.group(3) and op in SAME_SIZE_OPS and rank is not None:
                st.work_sizes.setdefault((*key, op), {}).setdefault(rank, set()).add(int(m.group(3)))
        return
    if needle == "global_rank: ":
        m = MEMBER.search(line)
        if m:
            st.members.setdefault(int(m.group(1)), []).append(lineno)
            st.world = int(m.group(2))
        return
    if needle == "sequencenumber=":
        m = SEQ_NUMBER.search(line)
        if m:
            st.seq_numbers[int(m.group(1))] = int(m.group(2))
            st.seq_line = st.seq_line or lineno
        return
    m = NCCL_VERSION.search(line)
    if m:
        st.nccl_versions.setdefault(m.group(1) or ".".join(m.group(2, 3, 4)), lineno)


REDUCING, ROOTED = {b"AllReduce", b"Reduce", b"ReduceScatter"}, {b"Broadcast", b"Reduce"}


def _what(op: bytes, count: bytes, dtype: bytes, redop: bytes, root: bytes) -> tuple:
    """What must agree across processes at one opCount: the reduction only where there is one, the root likewise."""
    return op, count, dtype, redop if op in REDUCING else b"", root if op in ROOTED else b""


def _coll_check(chunk: bytes, base: int, st: _State) -> None:
    """A COLL log is all collectives, so first the cheap question: do the distinct collectives of this chunk give some
    (nranks, opCount) two different ones?  Only then :func:`_coll_ops` on this chunk and the one before it, which
    knows which process called which (a process with two communicators of one size reuses opCounts)."""
    seen, window, split = st.coll_seen, COLL_WINDOW, False
    for op, count_, count, dtype, redop, root, nranks in set(COLL_OP.findall(chunk)):
        what = _what(op, count, dtype, redop, root)
        known = seen.get((nranks, count_))
        if known is None:
            seen[(nranks, count_)] = {what}
            if len(seen) > window:
                seen.popitem(last=False)
        elif what not in known:
            known.add(what)
            split = True
    prev, prev_base = st.coll_prev
    st.coll_prev = (chunk, base)
    if split:
        st.coll_ops.clear()
        if prev:
            _coll_ops(prev, prev_base, st)
        if st.coll_split is None:
            _coll_ops(chunk, base, st)


def _coll_ops(chunk: bytes, base: int, st: _State) -> None:
    """NCCL's COLL lines in ``chunk``: note each process's collective at each opCount, and the first disagreement.
    Kept in bytes (decoded only for the report): a COLL log is all such lines."""
    lineno, pos = base + 1, 0
    ops, window = st.coll_ops, COLL_WINDOW
    for m in COLL_OP.finditer(chunk):
        at = m.start()
        start = chunk.rfind(b"\n", 0, at) + 1
        who = COLL_PROCESS.search(chunk, max(start, at - 120), at)
        if not who:
            continue
        lineno += chunk.count(b"\n", pos, start)
        pos = start
        op, count_, count, dtype, redop, root, nranks = m.groups()
        what = _what(op, count, dtype, redop, root)
        proc = who.group(1, 2)
        seen = ops.get((nranks, count_))
        if seen is None:
            ops[(nranks, count_)] = {proc: (what, lineno)}
            if len(ops) > window:
                ops.popitem(last=False)
            continue
        if proc in seen:  # a second communicator of this size in the process: its opCounts say nothing here
            if seen[proc][0] != what:
                seen[proc] = (None, lineno)
            continue
        first = next(iter(seen.values()))
        seen[proc] = (what, lineno)
        if first[0] == what:
            continue
        kinds = {w: n for w, n in seen.values() if w is not None}
        if len(kinds) >= 2:
            shown = [f"{w[0].decode()} count {w[1].decode()} datatype {w[2].decode()}" +
                     (f" root {w[4].decode()}" if w[4] else "") for w in kinds]
            st.coll_split = (min(kinds.values()), count_.decode(), sorted(shown))
            return


def _own_error(text: str, first: int, in_user_code: bool = False) -> Evidence | None:
    """The first exception a rank raised of its own in ``text`` (its lines numbered from ``first``): a Python
    traceback ending in an error that no rule knows (no NCCL, connection, timeout, checkpoint... message) and that
    is not a launcher's or c10d's report of a failure elsewhere: "ValueError: labels must be in [0, 10)".  With
    ``in_user_code``, only one raised through a frame of the user's own code, and not a DataLoader worker's error
    whose own traceback was cut off ("Caught RuntimeError in DataLoader worker process 0." and nothing after)."""
    from nbhelpers.diagnosis.tracebacks import exceptions

    lines = text.splitlines()
    for rank, i, where in exceptions(text):
        if NOT_OWN.search(where.exc_type or ""):
            continue
        if in_user_code and (where.user is None or CAUGHT_IN_WORKER.search(where.message)):
            continue
        line = lines[i]
        st = _State()
        _scan((line + "\n").encode("utf-8", "replace"), 0, st)
        if st.hits:
            continue
        at = f" ({where.describe()})" if where.user else ""
        return Evidence(first + i, line.strip()[:480] + at, rank)
    return None


def _split_calls(st: _State, whole_log) -> None:
    """A collective timed out; did the ranks' last tracebacks end in different collectives (rank 0 in a broadcast,
    rank 1 in backward's gradient all_reduce)?  Then they were not in the same call: a collective one rank skipped
    or added (a rank whose peer gave up first fails in the call it had reached, which with the same code is the same
    one)."""
    from nbhelpers.diagnosis.tracebacks import exceptions

    text, first = st.tail_text()
    last = {rank: (i, where) for rank, i, where in exceptions(text) if rank is not None}
    calls = {r: w.collective for r, (_, w) in last.items() if w.collective and not w.collective.startswith("wait")}
    timed = [r for r in sorted(calls) if TIMED_OUT.search(last[r][1].message)]
    if len(set(calls.values())) >= 2 and timed:
        desc = ", ".join(f"rank {r} in {c}" for r, c in sorted(calls.items()))
        whole_log("collective_mismatch", first + last[timed[0]][0], f"the ranks' tracebacks end in different "
                  f"collectives ({desc}) and rank {timed[0]} timed out: they were not in the same call", timed[0])


def _unmet(st: _State, whole_log) -> None:
    """No rule fired; did the ranks fail to meet?  Two processes announcing the same global rank (Lightning's
    "GLOBAL_RANK: 0, MEMBER: 1/8" twice: both nodes were given ranks 0-3), a log that ends while fewer than the world
    have announced themselves, or an exception from init_process_group / the TCPStore that lost its connection."""
    twice = next((r for r, at in sorted(st.members.items()) if len(at) >= 2), None)
    text, first = st.tail_text()
    last = text.rstrip().rsplit("\n", 1)[-1]
    if twice is not None:
        whole_log("rendezvous_timeout", st.members[twice][1], f"two processes joined as global rank {twice} of "
                  f"{st.world}: the launcher gave two nodes the same ranks, so ranks up to {st.world - 1} never all meet")
    elif st.world and 2 <= len(st.members) < st.world and MEMBER.search(last):
        whole_log("rendezvous_timeout", max(at[-1] for at in st.members.values()), f"the log ends with "
                  f"{len(st.members)} of {st.world} processes joined: the others never came")
    elif b"Traceback" in st.tail and INIT_FRAME.search(text):
        from nbhelpers.diagnosis.tracebacks import exceptions

        lines = text.splitlines()
        for rank, i, where in exceptions(text):
            if INIT_LOST.search(lines[i]) and any(INIT_FRAME.search(f"{f.func} {f.code}") for f in where.frames):
                whole_log("rendezvous_timeout", first + i, f"{lines[i].strip()[:400]} (raised while the ranks met: "
                          f"{where.describe()})", rank)
                return


def _chunks(source: Iterable[str | bytes]) -> Iterator[bytes]:
    """Whole lines of UTF-8 in blocks of about CHUNK bytes, whatever the pieces' sizes and types; the last ends in a
    newline."""
    buf: list[bytes] = []
    size = 0
    for piece in source:
        data = piece.encode("utf-8", "surrogatepass") if isinstance(piece, str) else piece
        buf.append(data)
        size += len(data)
        if size >= CHUNK:
            block = b"".join(buf)
            cut = block.rfind(b"\n") + 1
            if cut == 0:
                continue
            yield block[:cut]
            buf, size = [block[cut:]], len(block) - cut
    rest = b"".join(buf)
    if rest:
        yield rest if rest.endswith(b"\n") else rest + b"\n"


def classify_stream(source: Iterable[str | bytes], model: SecondOpinion | None = None) -> list[Finding]:
    """Classify text arriving in pieces (str or UTF-8 bytes); memory stays bounded by the chunk size.
    With ``model``, the learned second opinion answers when no rule fires."""
    return _classify_chunks(_chunks(source), model)


def _classify_chunks(chunks: Iterable[bytes], model: SecondOpinion | None) -> list[Finding]:
    st = _State()
    for chunk, needles, lines in _searched(chunks):
        _scan(chunk, st.lines, st, needles, lines)
        st.tail = (st.tail + chunk[-TAIL_BYTES:])[-TAIL_BYTES:]
    return _findings(st) or (_second_opinion(st, model) if model else [])


def _searched(chunks: Iterable[bytes]) -> Iterator[tuple[bytes, list, int]]:
    """:func:`_needles_in` of each chunk, in order.  A text of one chunk is searched here; a longer one on two
    threads, up to three chunks ahead of the rules."""
    it = iter(chunks)
    first = next(it, None)
    if first is None:
        return
    second = next(it, None)
    if second is None:
        yield _needles_in(first)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2, thread_name_prefix="classify") as pool:
        ahead = deque([pool.submit(_needles_in, first), pool.submit(_needles_in, second)])
        for chunk in it:
            ahead.append(pool.submit(_needles_in, chunk))
            yield ahead.popleft().result()
        while ahead:
            yield ahead.popleft().result()


def _second_opinion(st: _State, model: SecondOpinion) -> list[Finding]:
    """No rule fired: the learned model's top label, when it is a failure and confident enough."""
    text, first = st.tail_text()
    if not hard_errors(text):  # info and warning chatter is never a failure by itself
        return []
    label, p = model.predict(text, 1)[0]
    if label == "healthy" or p < MIN_CONFIDENCE or model.failure_probability(text) < MIN_FAILURE:
        return []
    lines = error_lines(text, MAX_EVIDENCE)
    numbered = {ln: i for i, ln in enumerate(text.splitlines(), first)}
    ev = [Evidence(next((n for t, n in numbered.items() if ln in t), st.lines), ln) for ln in lines]
    return [Finding(label, p, 0.0, ev, by="model")]


def top2_text(candidates: list[dict]) -> str:
    """``[Finding.candidate(), ...]`` as one line: "collective_timeout 0.82, worker_killed 0.58"."""
    return ", ".join(f"{c['category']} {c['confidence']:.2f}" for c in candidates[:2])


# What a context rule's lines mean when no error came with them: set-up that is harmless in a healthy run and the
# usual cause when the same job hangs or fails (shown as a hint, never as a finding).
HINT_WHY = {
    "network_interface": "NCCL or Gloo picked an address other hosts may not reach (loopback, a container bridge or "
                         "veth, a link-local address: IPv6 fe80:: or 169.254.x.x). Harmless when every rank is on "
                         "this host; if ranks on several hosts hang or fail at start-up, this is the first thing to fix.",
    "rendezvous_timeout": "Ranks were still waiting for their peers to join. Normal for a while at start-up; if it "
                          "repeats until a timeout, a rank never joined.",
    "infiniband": "NCCL's InfiniBand transport returned an error code here; the error line itself is not in this "
                  "text (paste the lines above the trace).",
}


def hints(text: str) -> list[dict]:
    """Set-up lines worth a look that are not a failure by themselves (an interface other hosts cannot reach, ranks
    waiting to join): the categories only context rules found, each with its lines, what they mean and what to do.
    The classifier counts them only next to an error they explain; with no error they are hints."""
    st = _State()
    _scan((text if text.endswith("\n") else text + "\n").encode(), 0, st)
    found = {f.category for f in _findings(st)}
    why = {c: next((r.hint_why for r in h if r.hint_why), None) for c, h in st.hits.items()}
    return [{"category": c, "title": CATEGORIES[c].title, "why": why[c] or HINT_WHY.get(c, CATEGORIES[c].explanation),
             "evidence": [str(e) for e in _evidence(st, c)], "remedy": CATEGORIES[c].remedies[0]}
            for c, h in st.hits.items() if c not in found and all(r.context or r.hint for r in h)]


def second_opinion(text: str, model: SecondOpinion) -> dict:
    """What to say when nothing is confident: the model's two likeliest labels with their probabilities, the
    lines that look like the error, the closest known cases (id, source, label), set-up lines worth a look
    (:func:`hints`), and what to run next (first what to try if the likeliest label is right)."""
    top2 = model.predict(text, 2)
    likely = [f"if it is {CATEGORIES[c].title.lower()} ({p:.2f}): {CATEGORIES[c].remedies[0]}"
              for c, p in top2[:1] if c in CATEGORIES]
    return {"top2": top2, "error_lines": error_lines(text), "closest": model.closest(text),
            "hints": hints(text),
            "next": likely + ["python -m nbhelpers run --nproc N train.py: the culprit rank and line from a real run "
                              "(notebook 06)", "the staged probe on the same nodes: which stage fails (notebook 01)",
                              "TORCH_DISTRIBUTED_DEBUG=DETAIL for a collective mismatch (not with DDP on gloo)",
                              "NCCL_DEBUG=INFO for NCCL errors (notebook 02)"]}


def classify(text: str, model: SecondOpinion | None = None) -> list[Finding]:
    """The findings in ``text``, best first; with ``model`` (:mod:`nbhelpers.runtime.learned`), it answers where no
    rule fires."""
    return classify_stream([text], model)


def classify_file(path: str | os.PathLike, model: SecondOpinion | None = None) -> list[Finding]:
    with open(path, "rb") as fh:
        return _classify_chunks(_file_chunks(fh), model)


def _file_chunks(fh) -> Iterator[bytes]:
    """Whole lines of a binary file in blocks of about CHUNK bytes (one copy less than :func:`_chunks`)."""
    while data := fh.read(CHUNK):
        if not data.endswith(b"\n"):
            data += fh.readline()
        yield data if data.endswith(b"\n") else data + b"\n"


def classify_logs(logs: dict[int, str], extra: str = "", model: SecondOpinion | None = None) -> list[Finding]:
    """Classify per-rank logs together (each line tagged with its rank), plus e.g. torchrun's own log.  The rules
    only, by default: a run the workbook watched has its culprit rules, which read more than the text."""
    buf = io.StringIO()
    for rank, text in logs.items():
        tag = f"[rank{rank}]"
        for line in text.splitlines():
            buf.write(line + "\n" if line.startswith(tag) else f"{tag}: {line}\n")
    buf.write(extra)
    return classify(buf.getvalue(), model)


def _score(hits: dict[Rule, int]) -> float:
    return sum(r.weight * (1 + 0.25 * min(n - 1, 4)) for r, n in hits.items())


def _findings(st: _State) -> list[Finding]:
    if max(st.waits.values(), default=0) >= STUCK_AFTER:
        st.hits["rendezvous_timeout"][_table().by_id[STUCK_BARRIER]] = 1
    # the categories of real errors
    real = {c for c, h in st.hits.items() if any(not (r.context or r.alone or r.hint) for r in h)}
    anchored, explained = bool(real), bool(real & CONNECTION)

    def counted(c: str, r: Rule) -> bool:
        # context rules (interface lists, ...) count only next to a real error they can explain, not next to a report
        # of one; a launcher's report of some failure ("alone") counts only where no other category has a real error
        return (explained or not r.context) and not (r.alone and real - {c}) and not r.hint

    scores = {c: _score({r: n for r, n in h.items() if counted(c, r)}) for c, h in st.hits.items()}

    def whole_log(category: str, line: int, text: str, rank: int | None = None) -> None:  # of the whole log, worth 7
        scores[category] = scores.get(category, 0) + 7
        st.evidence.setdefault(category, []).insert(0, Evidence(line, text, rank))
        st.first_line.setdefault(category, line)

    if anchored and len(st.nccl_versions) >= 2:
        whole_log("version_mismatch", min(st.nccl_versions.values()),
                  f"two NCCL versions in one job: {', '.join(sorted(st.nccl_versions))}")
    if len(set(st.seq_numbers.values())) >= 2:
        desc = ", ".join(f"rank {r}: {s}" for r, s in sorted(st.seq_numbers.items()))
        whole_log("collective_mismatch", st.seq_line or 1, f"ranks are at different collective sequence numbers ({desc})")
    split = next(((seq, ops) for (_, seq), ops in st.work_ops.items() if len(ops) >= 2), None)
    if split:
        seq, ops = split
        whole_log("collective_mismatch", min(ops.values()), f"ranks timed out at the same collective (SeqNum={seq}) in "
                  f"different operations: {', '.join(sorted(ops))}")
    sized = next(((pg, seq, op, sizes) for (pg, seq, op), by_rank in st.work_sizes.items()
                  if len(sizes := {next(iter(n)) for n in by_rank.values() if len(n) == 1}) >= 2), None)
    if sized and not split:  # each rank one size, and the ranks disagree (a rank with several may be in several groups)
        pg, seq, op, sizes = sized
        whole_log("collective_mismatch", st.work_ops[(pg, seq)][op], f"ranks timed out in the same {op} (SeqNum={seq}) "
                  f"with different sizes: NumelIn {', '.join(map(str, sorted(sizes)))}")
    if st.coll_split:
        line, count_, shown = st.coll_split
        whole_log("collective_mismatch", line, f"processes called different collectives at NCCL opCount {count_}: "
                  f"{'; '.join(shown)}")
    if "collective_timeout" in scores and b"Traceback" in st.tail:
        _split_calls(st, whole_log)
    scores = {c: s for c, s in scores.items() if s > 0}
    # only what peers and launchers report after a rank failed: a rank's own exception in the log is the cause
    reported = [c for c in scores if c not in CONSEQUENCE and not (
        c == "worker_killed" and all("peer_report" in r.flags for r in st.hits[c] if counted(c, r)))]
    own = None
    if scores and not reported and b"Traceback" in st.tail:
        own = _own_error(*st.tail_text())
        if own:
            whole_log("rank_error", own.line, own.text, own.rank)
    if not scores:
        _unmet(st, whole_log)
        scores = {c: s for c, s in scores.items() if s > 0}
    if not scores and b"Traceback" in st.tail:  # no rule knows it, but a rank raised it in the user's own code
        own = _own_error(*st.tail_text(), in_user_code=True)
        if own:
            whole_log("rank_error", own.line, own.text, own.rank)
    if not scores:
        return []
    # a category that only "alone" rules found (a launcher's report of whatever failed) yields to any other finding
    lone = {c for c in scores if c in st.hits and all(r.alone for r in st.hits[c])}
    if len(lone) < len(scores):
        scores = {c: s for c, s in scores.items() if c not in lone}
    consequences = set(CONSEQUENCE)
    if own:  # the peers' lost connections and the launcher's report follow from the rank's own error
        consequences.add("worker_killed")
    for category, flag, beside, cause in REPORTS:
        found = [r for r in st.hits.get(category, {}) if counted(category, r)]
        if found and scores.keys() & beside and all(flag in r.flags for r in found):
            consequences.add(category)
            consequences.discard(cause)
    strong_cause = any(s >= 4 and c not in consequences for c, s in scores.items())

    def rank_key(c: str) -> tuple:  # a well-evidenced cause comes before every consequence, however loud
        return (strong_cause and c in consequences, -scores[c], st.first_line.get(c, 0))

    order = sorted(scores, key=rank_key)
    top = scores[order[0]]
    out = []
    for i, c in enumerate(order):
        s = scores[c]
        conf = min(0.97, 0.35 + 0.06 * s)
        rivals = [scores[o] for o in order[1:] if not (strong_cause and o in consequences)]
        if i == 0 and rivals:  # a cause is not made less sure by the louder timeouts it explains
            conf *= 0.75 + 0.25 * min(1.0, (top - rivals[0]) / top + 0.5)
        elif i > 0:
            conf *= 0.6
        out.append(Finding(c, conf, s, _evidence(st, c)))
    return out
