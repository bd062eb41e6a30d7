"""Slow or stuck?  Read a collective-timeout line and do the arithmetic with a bus bandwidth.

    lines = parse_watchdog(pasted_text)            # every timeout record found, any torch wording
    slow_or_stuck(pasted_text, world=8, busbw_gbs=10)   # a Verdict with the arithmetic spelled out

Wordings understood (ranks' prefixes, timestamps and line wraps in the middle of a word tolerated):

* torch >= 2.2:  ``Watchdog caught collective operation timeout: WorkNCCL(SeqNum=56731, OpType=ALLREDUCE,
  NumelIn=467019003, NumelOut=467019003, Timeout(ms)=600000) ran for 600053 milliseconds before timing out.``
* torch 1.10 - 2.1: the same without ``NumelIn/NumelOut`` (``WorkNCCL(SeqNum=.., OpType=.., Timeout(ms)=..)``);
  before that ``WorkNCCL(OpType=.., TensorShape=[..], Timeout(ms)=..)``;
* blocking wait: ``Work WorkNCCL(...) timed out in blocking wait``;
* the watchdog's follow-up ``Exception ... detected by watchdog at work: 1580, last enqueued NCCL work: 1582,
  last completed NCCL work: 1579``;
* gloo: ``Timed out waiting 1800000ms for recv operation to complete`` (no op, no size, no peer).

The verdict compares the timeout with the time the transfer needs at ``busbw_gbs`` (nccl-tests'
bus bandwidth, :mod:`nbhelpers.diagnosis.busbw`).  A timeout hundreds of times longer than the transfer means
no bandwidth problem can explain it: a rank never arrived, or arrived at a different collective.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from nbhelpers.diagnosis.busbw import (
    DTYPE_BYTES,
    bus_factor,
    expected_seconds,
    human,
    normalize_op,
    op_size_bytes,
)

__all__ = ["parse_watchdog", "at_work", "slow_or_stuck", "timeout_ms", "TimeoutLine", "SlowOrStuck",
           "SHORT_TIMEOUT_MS"]

_WORK = re.compile(r"Work(?P<backend>NCCL|XCCL|Gloo|HCCL|MPI)?\((?P<body>[^()]*(?:\([^()]*\)[^()]*)*)\)"
                   r"(?P<tail>\s*(?:ran for (?P<ran>\d+) milliseconds|timed out in blocking wait))")
_FIELD = re.compile(r"(\w+(?:\(ms\))?)=(\[[^\]]*\]|[^,]+)")
_RANK = re.compile(r"\[(?:PG [^\]]*?)?Rank (\d+)\]|\[rank(\d+)\]")
_GLOO = re.compile(r"Timed out waiting (?P<ms>\d+) ?ms for (?P<dir>recv|send) operation to complete")
# the timeout a waiting rank's error gives: gloo's recv/send, a store wait, NCCL's watchdog (Timeout(ms)=...)
TIMEOUT_MS = re.compile(r"Timed out waiting (\d+) ?ms|wait timeout after (\d+) ?ms|Timeout\(ms\)=(\d+)|"
                        r"timed out after (\d+) ?ms", re.I)
SHORT_TIMEOUT_MS = 1000  # under a second: no collective or store wait is meant to give up that soon (the shortest
#                          timeout the workbook's own hang demonstrations use is 3 s)
_AT_WORK = re.compile(r"detected by watchdog at work: (\d+), last enqueued NCCL work: (-?\d+), "
                      r"last completed NCCL work: (-?\d+)")


@dataclass
class TimeoutLine:
    """One timeout record: what the line says (None where that wording does not say it)."""
    kind: str                      # "watchdog", "blocking-wait" or "gloo"
    rank: int | None = None
    seq: int | None = None
    op: str | None = None          # as printed, e.g. ALLREDUCE, _REDUCE_SCATTER_BASE
    numel_in: int | None = None
    numel_out: int | None = None
    shape: str | None = None       # old wording's TensorShape
    dtype: str | None = None
    timeout_ms: int | None = None
    ran_ms: int | None = None
    direction: str | None = None   # gloo: recv/send
    text: str = ""

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "text"}


def at_work(text: str) -> list[tuple[int, int, int]]:
    """The watchdog's "detected by watchdog at work: N, last enqueued NCCL work: N, last completed NCCL work: N"
    lines of ``text``, as (at work, last enqueued, last completed)."""
    return [tuple(int(x) for x in m) for m in _AT_WORK.findall(_unwrap(text))]


def _unwrap(text: str) -> str:
    """Undo terminal wrapping: a record broken across lines (even mid-word) becomes one line."""
    return re.sub(r"\s*\n\s*", lambda m: " " if m.group(0).strip(" \t") == "\n" and " " in m.group(0) else "",
                  text)


def parse_watchdog(text: str) -> list[TimeoutLine]:
    """Every collective-timeout record in ``text`` (a line, a log, several ranks' logs)."""
    flat = _unwrap(text)
    out: list[TimeoutLine] = []
    prev_end = 0
    for m in _WORK.finditer(flat):
        fields = {k: v.strip() for k, v in _FIELD.findall(m.group("body"))}
        before = flat[max(prev_end, m.start() - 400):m.start()]
        ranks = _RANK.findall(before)
        rank = next((int(a or b) for a, b in reversed(ranks)), None)
        num = lambda k: int(fields[k]) if fields.get(k, "").lstrip("-").isdigit() else None  # noqa: E731
        shape = fields.get("TensorShape")
        numel_in = num("NumelIn")
        if numel_in is None and shape:
            dims = [int(d) for d in re.findall(r"\d+", shape)]
            numel_in = 1
            for d in dims:
                numel_in *= d
        out.append(TimeoutLine(
            kind="blocking-wait" if "blocking wait" in m.group("tail") else "watchdog", rank=rank, seq=num("SeqNum"),
            op=fields.get("OpType"), numel_in=numel_in, numel_out=num("NumelOut"), shape=shape,
            dtype=fields.get("dtype") or fields.get("DType") or fields.get("Dtype"),
            timeout_ms=num("Timeout(ms)"), ran_ms=int(m.group("ran")) if m.group("ran") else None,
            text=flat[max(prev_end, m.start() - 160):m.end()].strip()))
        prev_end = m.end()
    for m in _GLOO.finditer(flat):
        before = flat[max(0, m.start() - 200):m.start()]
        ranks = _RANK.findall(before)
        out.append(TimeoutLine(kind="gloo", rank=next((int(a or b) for a, b in reversed(ranks)), None),
                               timeout_ms=int(m.group("ms")), direction=m.group("dir"),
                               text=flat[max(0, m.start() - 120):m.end()].strip()))
    return out


def timeout_ms(text: str | None) -> int | None:
    """The timeout, in milliseconds, that the first timeout message in ``text`` says it gave up after (None: none)."""
    m = TIMEOUT_MS.search(text or "")
    return int(next(g for g in m.groups() if g)) if m else None


@dataclass(repr=False)
class SlowOrStuck:
    verdict: str                   # "stuck", "slow", "suspicious" or "unknown"
    summary: str
    arithmetic: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    expected_s: float | None = None
    timeout_s: float | None = None
    margin: float | None = None    # timeout / expected transfer time
    line: TimeoutLine | None = None

    def __str__(self) -> str:
        return "\n".join([f"{self.verdict.upper()}: {self.summary}", *("  " + a for a in self.arithmetic),
                          *("- " + n for n in self.notes)])

    __repr__ = __str__

    def _repr_markdown_(self) -> str:
        arith = "\n".join(f"    {a}" for a in self.arithmetic)
        notes = "\n".join(f"- {n}" for n in self.notes)
        return f"**{self.verdict.upper()}**: {self.summary}\n\n{arith}\n\n{notes}"


STUCK_MARGIN = 100.0   # timeout this many times the transfer time: no bandwidth problem explains it
SLOW_MARGIN = 3.0      # timeout within this factor of the transfer time: the wire can explain it


def slow_or_stuck(text_or_line, world: int, busbw_gbs: float, dtype: str | None = None) -> SlowOrStuck:
    """Could a wire at ``busbw_gbs`` GB/s (bus bandwidth) have taken this long, or was a rank missing?"""
    if world < 2:
        raise ValueError("a collective timeout needs a world of at least 2 ranks")
    if busbw_gbs <= 0:
        raise ValueError("bus bandwidth must be > 0 GB/s (measure it with nbhelpers.scenarios.sweep, or type your cluster's)")
    lines = [text_or_line] if isinstance(text_or_line, TimeoutLine) else parse_watchdog(str(text_or_line))
    if not lines:
        return SlowOrStuck("unknown", "no collective-timeout record found in the text",
                           notes=["expected e.g. 'Watchdog caught collective operation timeout: WorkNCCL(...)' or "
                                  "gloo's 'Timed out waiting Nms for recv operation to complete'"])
    notes = _cross_rank_notes(lines, text_or_line if isinstance(text_or_line, str) else "")
    line = next((ln for ln in lines if ln.numel_in or ln.numel_out), lines[0])
    timeout_s = line.timeout_ms / 1e3 if line.timeout_ms else None
    arith: list[str] = []
    if line.ran_ms and line.timeout_ms and line.ran_ms > 1.5 * line.timeout_ms:
        notes.append(f"it 'ran for' {line.ran_ms / 1e3:.0f} s against a {timeout_s:.0f} s timeout: the watchdog itself "
                     "noticed late (a CPU-side hang, or an earlier error blocked it)")
    if line.kind == "gloo" or not line.op or not (line.numel_in or line.numel_out):
        what = "a gloo timeout names no op and no size" if line.kind == "gloo" else "this wording gives no element count"
        op = normalize_op(line.op) if line.op else "all_reduce"
        if timeout_s is None:
            return SlowOrStuck("unknown", what + " and no timeout", notes=notes, line=line)
        need = timeout_s * busbw_gbs * 1e9 / bus_factor(op, world)
        arith = [f"to take {timeout_s:g} s at {busbw_gbs:g} GB/s bus bandwidth, one {op} on {world} ranks would "
                 f"have to move size = {timeout_s:g} s x {busbw_gbs:g} GB/s / {bus_factor(op, world):.3f} "
                 f"= {human(need)}"]
        return SlowOrStuck("stuck" if need > 2**40 else "unknown",
                           f"{what}; it would take a {human(need)} tensor to need the whole timeout, "
                           + ("so a missing (or desynchronised) rank is far likelier than a slow wire" if need > 2**40
                              else "compare with the sizes your code really sends"),
                           arith, notes + ["gloo's message does not say which peer it waited for: use "
                                           "monitored_barrier or TORCH_DISTRIBUTED_DEBUG=DETAIL (notebook 03, part 4)"]
                           if line.kind == "gloo" else notes, None, timeout_s, None, line)
    op = normalize_op(line.op)
    dname = dtype or line.dtype
    if dname:
        elem = DTYPE_BYTES.get(str(dname).lower().replace("torch.", ""), 4)
    else:
        elem = 4
        notes.append("the line does not give the dtype: assumed float32 (4 bytes); bf16/fp16 halve the time, "
                     "fp64 doubles it, and neither changes the verdict below unless the margin is near the thresholds")
    size = op_size_bytes(op, line.numel_in, line.numel_out, elem)
    factor = bus_factor(op, world)
    exp = expected_seconds(op, size, world, busbw_gbs)
    numel = line.numel_out if op == "all_gather" else line.numel_in
    arith = [f"size   = {numel:,} elements x {elem} B = {human(size)}  ({line.op}, nccl-tests' size for {op})",
             f"factor = busbw/algbw for {op} on {world} ranks = {factor:.4g}",
             f"time   = size x factor / busbw = {size:,} B x {factor:.4g} / {busbw_gbs:g} GB/s = {_fmt_s(exp)}"]
    if timeout_s is None:
        return SlowOrStuck("unknown", f"the transfer needs {_fmt_s(exp)}; the line gives no timeout", arith, notes,
                           exp, None, None, line)
    margin = timeout_s / exp
    arith.append(f"margin = timeout / time = {timeout_s:g} s / {_fmt_s(exp)} = {margin:,.0f}x")
    if margin >= STUCK_MARGIN:
        verdict, summary = "stuck", (
            f"the transfer needs about {_fmt_s(exp)} but waited {timeout_s:g} s ({margin:,.0f}x longer): no bandwidth "
            "problem explains that. Some rank never entered this collective (a straggler, a crash, a rank that "
            "skipped it or called a different one). Chunking it or raising the timeout changes nothing; find the "
            "rank (notebook 03, part 4).")
    elif margin <= SLOW_MARGIN:
        verdict, summary = "slow", (
            f"the transfer alone needs {_fmt_s(exp)} of a {timeout_s:g} s timeout: at this bandwidth the wire can "
            "explain it. Check the bandwidth you typed against a sweep on the cluster, then raise the timeout "
            "(init_process_group(timeout=...)) or send less per call.")
    else:
        verdict, summary = "suspicious", (
            f"the timeout is {margin:,.1f}x the transfer time: a rank is probably missing, but a link running far "
            "below the bandwidth you typed could also do it. Run the sweep on the cluster's nodes to know.")
    return SlowOrStuck(verdict, summary, arith, notes, exp, timeout_s, margin, line)


def _fmt_s(s: float) -> str:
    return f"{s * 1e3:.3g} ms" if s < 1 else f"{s:.3g} s"


def _cross_rank_notes(lines: list[TimeoutLine], text: str) -> list[str]:
    notes = []
    seqs = {ln.seq for ln in lines if ln.seq is not None}
    if len(seqs) > 1:
        by = {}
        for ln in lines:
            if ln.seq is not None:
                by.setdefault(ln.seq, set()).add(ln.rank)
        notes.append("ranks timed out at different SeqNums (" + ", ".join(
            f"{s}: ranks {sorted(r for r in rs if r is not None)}" for s, rs in sorted(by.items()))
            + "): they are not in the same collective, a desync (one rank skipped or added a collective)")
    ranks = {ln.rank for ln in lines if ln.rank is not None}
    if len(ranks) > 1:
        notes.append(f"timeout records from ranks {sorted(ranks)}: look for the ranks that are NOT in this list; "
                     "the rank that never reported is usually the one everyone waited for")
    for seq, enq, done in {tuple(x) for x in _AT_WORK.findall(_unwrap(text))}:
        if int(enq) > int(seq):
            notes.append(f"watchdog: stuck at work {seq}, last completed {done}, last enqueued {enq}: this rank queued "
                         "more work after the stuck one; it was waiting, not computing")
            break
    return notes
