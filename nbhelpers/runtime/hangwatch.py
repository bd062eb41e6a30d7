"""Watch a running world for a hang and name the culprit while it still hangs.

Every ``every`` seconds the running ranks' stacks are read with ``py-spy dump --nonblocking`` (the ranks
are not paused; a dump costs about 15 ms of one core) and fed to
:class:`~nbhelpers.diagnosis.hang.HangTracker`.  Once a rank has stayed in one collective call for
``hang_after`` seconds, asleep there, while another rank is elsewhere and not at work (py-spy's thread
state, whether a child of the rank runs, whether the rank moves bytes through its reads and writes:
:mod:`nbhelpers.diagnosis.hang`), the culprit rules read
those same stacks (and the user's source, for the ``if rank == 0:`` branch or the lock around the call)
and name the rank and its line, long before the process-group timeout would end the job.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import psutil

from nbhelpers.diagnosis.api import Verdict
from nbhelpers.diagnosis.culprit import find_culprit
from nbhelpers.diagnosis.hang import Hang, HangTracker
from nbhelpers.diagnosis.straggler import StragglerTracker
from nbhelpers.runtime.runfolder import collective_record, read_sources
from nbhelpers.runtime.stacks import dump_many

__all__ = ["CPU_SHARE", "HangReport", "HangWatch", "IO_BYTES_PER_S", "children_running", "cpu_moving",
           "hang_verdict", "io_moving"]

# A rank that reads or writes at least this many bytes a second (files, sockets, pipes: Linux's rchar + wchar)
# is at work even while py-spy finds its thread asleep: rank 0 uploading a checkpoint at the network's pace
# sleeps in send() for most samples.  A stuck rank moves nothing; NCCL's store checks move ~100 B/s.
IO_BYTES_PER_S = 256 * 1024
CPU_SHARE = 0.2   # a rank that used a fifth of a core or more between two looks was at work (attach)


@dataclass
class HangReport:
    """A hang named live: what the stacks showed, the verdict they gave, and when."""
    hang: Hang
    verdict: Verdict
    named_at: float             # wall-clock time the verdict came
    stacks: dict[int, str]

    @property
    def after_divergence_s(self) -> float:
        """Seconds from the waiting rank entering the call (the ranks diverging) to the culprit named."""
        return self.named_at - self.hang.began

    def text(self) -> str:
        v = self.verdict
        who = f"culprit rank {v.culprit}" + (f" at {v.where}" if v.where else "") if v.culprit is not None \
            else "no single rank stands out"
        return f"hang: {who}: {v.reason} ({self.hang.text()})"

    def to_dict(self) -> dict:
        return {"culprit": self.verdict.culprit, "where": self.verdict.where, "rule": self.verdict.kind,
                "reason": self.verdict.reason, "after_divergence_s": round(self.after_divergence_s, 2),
                **self.hang.to_dict()}


class HangWatch:
    """Samples a :class:`~nbhelpers.runtime.launcher.Run`'s ranks; ``poll()`` returns a report once, at the hang.
    The same samples feed a :class:`~nbhelpers.diagnosis.straggler.StragglerTracker` for the whole run
    (``stragglers.named``: the rank the others wait for, once one stands out)."""

    def __init__(self, run, hang_after: float = 2.0, every: float = 0.5):
        self.run, self.every = run, every
        self.tracker = HangTracker(hang_after)
        self.stragglers = StragglerTracker()
        self.last = 0.0
        self.report: HangReport | None = None
        self.samples = 0
        self.io: dict[int, tuple[float, int]] = {}   # rank -> (when, bytes read + written so far)

    def poll(self) -> HangReport | None:
        """Take a round of samples when one is due; the report the first time a hang shows (else None)."""
        now = time.time()
        if now - self.last < self.every:
            return None
        self.last = now
        records = self.run.records()
        pids = {r: rec["pid"] for r, rec in records.items() if rec.get("pid") and "end" not in rec}
        if len(pids) < 2:
            return None
        stacks = dump_many(pids, nonblocking=True)
        self.samples += 1
        self.stragglers.add(now, stacks)
        if self.report is not None:
            return None
        moving = io_moving(pids, self.io, now)
        self.tracker.add(now, stacks, {r: a or moving.get(r, False) for r, a in children_running(pids).items()})
        hang = self.tracker.hang(now)
        if hang is None:
            return None
        self.run.request_record()  # the ranks' collective records as they stand in the hang
        world = self.run.nproc if getattr(self.run, "nnodes", 1) == 1 else None
        record = collective_record(self.run.log_dir / "fr", world)
        self.report = HangReport(hang, hang_verdict(self.run.views(records, stacks), now, record), time.time(), stacks)
        return self.report


def children_running(pids: dict[int, int]) -> dict[int, bool]:
    """Rank -> whether a child process of it (a DataLoader worker, a compile job) is running right now: the rank
    is at work even while its main thread waits for that child."""
    out = {}
    for r, pid in pids.items():
        try:
            out[r] = any(c.status() == psutil.STATUS_RUNNING for c in psutil.Process(pid).children(recursive=True))
        except psutil.Error:
            out[r] = False
    return out


def _moving(pids: dict, last: dict, now: float, read, per_s: float) -> dict:
    """Key -> whether the counter ``read(process)`` grew by at least ``per_s`` a second since the key's previous
    reading (kept in ``last``, updated here); False at a first reading, or for a process gone or not readable."""
    out = {}
    for k, pid in pids.items():
        try:
            n = read(psutil.Process(pid))
        except (psutil.Error, AttributeError):  # gone, not ours, or a platform without the counter
            out[k] = False
            continue
        t0, n0 = last.get(k, (now, n))
        out[k] = now > t0 and (n - n0) >= per_s * (now - t0)
        last[k] = (now, n)
    return out


def io_moving(pids: dict[int, int], last: dict[int, tuple[float, int]], now: float) -> dict[int, bool]:
    """Rank -> whether it read or wrote at least :data:`IO_BYTES_PER_S` since its previous reading (kept in
    ``last``, updated here); False at a rank's first reading."""
    return _moving(pids, last, now, lambda p: (io := p.io_counters()).read_chars + io.write_chars, IO_BYTES_PER_S)


def cpu_moving(pids: dict, last: dict, now: float, share: float = CPU_SHARE) -> dict:
    """Key -> whether the process used at least ``share`` of a core since its previous reading (kept in ``last``,
    updated here); False at its first reading.  The integral between two looks: a rank that steps through a loop
    can sit at the same collective line in every sample (each look catches it waiting a millisecond for its peer)
    while its CPU time grows; a rank stuck in a gloo wait uses none."""
    return _moving(pids, last, now, lambda p: (t := p.cpu_times()).user + t.system, share)


def hang_verdict(views: list, now: float | None = None, record: dict | None = None) -> Verdict:
    """The culprit rules over ranks that are still running (their stacks, the user's source they point at, and their
    collective records where written)."""
    return find_culprit(views, "hang", now, "", read_sources(views), record)
