"""A hang seen while it happens: ranks sampled by their stacks, and the moment one waits while another is elsewhere.

A training job that hangs prints nothing: its ranks sit in a collective (``all_reduce`` in DDP's backward,
a ``barrier``) for peers that are somewhere else (a DataLoader that never returns, a ``broadcast`` only
rank 0 calls, a lock).  The process-group timeout (30 minutes by default for gloo, 10 for NCCL) ends it
much later.  Sampling each rank's stack every half second tells it at once: a rank that stays at the same
collective call for ``hang_after`` seconds while another rank is not there is waiting for it.

Time alone cannot tell a stuck rank from a working one: on a slow or busy machine a rank stays seconds in a
DDP constructor, and a rank 0 that evaluates or writes a checkpoint keeps its peers at a barrier for as
long.  So each sample also says whether the rank was *working*: py-spy's thread state (``active``: on a
CPU or waiting for one, whatever the machine's speed; ``idle``: asleep in the kernel, as a gloo wait is),
or a child process of it running (its DataLoader workers), or bytes moving through its reads and writes (a
checkpoint written to a slow network mount sleeps in ``write()``; Linux counts those bytes, though not a socket's
``send``/``recv``, so an upload through a socket longer than ``hang_after`` still looks stuck).  A rank counts as waiting only while it sleeps
there (or after :attr:`HangTracker.spin_after` times ``hang_after``: CUDA synchronisation may spin while it
waits), and a rank elsewhere that worked in most recent samples is a pause or a straggler, not a hang.

:class:`HangTracker` is that bookkeeping, pure (stacks in, a :class:`Hang` out); the launcher feeds it
py-spy dumps of the running ranks, and the culprit rules read the same dumps for the verdict.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from nbhelpers.diagnosis.tracebacks import main_thread_active, stack_frames

__all__ = ["Hang", "HangTracker", "Position", "position", "rank_ranges"]


@dataclass(frozen=True)
class Position:
    """Where one rank's main thread was in one stack sample: the collective it was in (or None) and the
    innermost line of the user's code."""
    collective: str | None
    line: str | None          # file:line of the user's innermost frame
    text: str                 # "all_reduce at train.py:45 in step"

    def __str__(self) -> str:
        return self.text


def position(stack: str) -> Position | None:
    """The position a py-spy dump shows, or None when it holds no Python stack (the process is gone, or
    py-spy could not read it)."""
    w = stack_frames(stack)
    if w is None:
        return None
    return Position(w.collective, w.user.where if w.user else None, w.describe())


def rank_ranges(ranks) -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``"0-2, 5, 7-8"``: a thousand ranks in a line."""
    out, rs = [], sorted(ranks)
    i = 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        out.append(str(rs[i]) if i == j else f"{rs[i]}-{rs[j]}")
        i = j + 1
    return ", ".join(out)


@dataclass
class Hang:
    """Ranks that have waited at one collective call for ``waited_s`` while others were elsewhere."""
    began: float                            # when the waiting rank(s) entered the call (first sample there)
    seen: float                             # the sample that showed it
    waiting: dict[int, Position]            # rank -> the collective call it stays at
    elsewhere: dict[int, Position | None]   # rank -> where it is instead (None: no stack)

    @property
    def waited_s(self) -> float:
        return self.seen - self.began

    def text(self) -> str:
        groups: dict[str, list[int]] = {}
        for r, p in self.waiting.items():
            groups.setdefault(str(p), []).append(r)
        wait = "; ".join(f"rank{'s' if len(rs) > 1 else ''} {rank_ranges(rs)} in {p}" for p, rs in groups.items())
        other: dict[str, list[int]] = {}
        for r, p in self.elsewhere.items():
            other.setdefault(str(p) if p else "(no stack)", []).append(r)
        away = "; ".join(f"rank{'s' if len(rs) > 1 else ''} {rank_ranges(rs)} {p}" for p, rs in other.items())
        return f"waiting {self.waited_s:.1f} s: {wait}; elsewhere: {away}"

    def to_dict(self) -> dict:
        return {"waited_s": round(self.waited_s, 2), "waiting": {str(r): str(p) for r, p in self.waiting.items()},
                "elsewhere": {str(r): str(p) if p else None for r, p in self.elsewhere.items()}}


@dataclass
class HangTracker:
    """Per rank, its position and since when it has been there, and whether it was working, from stack samples
    taken over time."""
    hang_after: float = 2.0
    spin_after: float = 5.0   # a rank that stays at one collective this many times hang_after is waiting, busy or not
    busy_share: float = 0.5   # working: active in at least this share of the samples of a window
    since: dict[int, tuple[Position | None, float]] = field(default_factory=dict)
    active: dict[int, list[tuple[float, bool]]] = field(default_factory=dict)

    def add(self, t: float, stacks: dict[int, str], working: dict[int, bool] | None = None) -> None:
        """One round of samples taken at time ``t``: rank -> py-spy dump text; ``working``: rank -> True where
        something else showed the rank at work (a child process running)."""
        keep = t - self.spin_after * self.hang_after
        for r, text in stacks.items():
            p = position(text)
            old = self.since.get(r)
            if old is None or old[0] != p or p is None:
                self.since[r] = (p, t)
            seen = self.active.setdefault(r, [])
            seen.append((t, bool(main_thread_active(text)) or bool((working or {}).get(r))))
            while seen and seen[0][0] < keep:
                seen.pop(0)

    def working(self, r: int, start: float) -> bool:
        """Whether rank ``r`` was working in most of its samples since ``start``."""
        window = [a for t, a in self.active.get(r, []) if t >= start]
        return bool(window) and sum(window) >= self.busy_share * len(window)

    def hang(self, t: float) -> Hang | None:
        """The hang at time ``t``, or None: some rank has stayed in one collective call for ``hang_after``
        seconds, asleep there, while another rank is not at that call (outside any collective, or at another
        one) and has not been working for the last ``hang_after`` seconds."""
        waiting = {r: p for r, (p, t0) in self.since.items() if p and p.collective and (
            t - t0 >= self.spin_after * self.hang_after or (t - t0 >= self.hang_after and not self.working(r, t0)))}
        if not waiting:
            return None
        elsewhere = {r: p for r, (p, _t0) in self.since.items() if r not in waiting}
        if not elsewhere and len(set(waiting.values())) < 2:
            return None  # every rank at the same call: waiting on the network or a node not sampled, not on a rank here
        if elsewhere and all(p in set(waiting.values()) for p in elsewhere.values()):
            return None  # the others are at the same call, only just arrived: the world is in it together
        if any(self.working(r, t - self.hang_after) for r in elsewhere):
            return None  # a rank elsewhere is at work (evaluating, saving, loading data): a pause, not a hang
        began = min(self.since[r][1] for r in waiting)
        return Hang(began, t, waiting, elsewhere)

    def facts(self, t: float) -> dict[int, dict]:
        """What the samples showed of each rank at time ``t``, as plain data another tracker can take up
        (:meth:`from_facts`): how long it has stayed where it is, and whether it was at work meanwhile (over its
        stay, or the last ``hang_after`` seconds if it arrived later)."""
        return {r: {"stayed_s": round(t - t0, 2), "at_work": self.working(r, min(t0, t - self.hang_after))}
                for r, (_p, t0) in self.since.items()}

    @classmethod
    def from_facts(cls, stacks: dict[int, str], facts: dict[int, dict], hang_after: float = 2.0) -> HangTracker:
        """A tracker that holds the facts several trackers saw (one per node, :meth:`facts`) at a common time 0:
        its :meth:`hang` and :meth:`why_not` at time 0 judge the ranks of all of them together."""
        tracker = cls(hang_after)
        for r, fact in facts.items():
            tracker.since[r] = (position(stacks.get(r, "")), -float(fact["stayed_s"]))
            tracker.active[r] = [(0.0, bool(fact["at_work"]))]
        return tracker

    def why_not(self, t: float) -> str:
        """Why :meth:`hang` finds none at time ``t``, in a sentence (a verdict that names nobody)."""
        long = {r: p for r, (p, t0) in self.since.items() if p and p.collective and t - t0 >= self.hang_after}
        if not long:
            return f"no rank stayed {self.hang_after:g} s in one collective call: the ranks are moving"
        where = "; ".join(f"rank{'s' if len(rs) > 1 else ''} {rank_ranges(rs)} in {p}"
                          for p, rs in _by_position(long).items())
        elsewhere = {r: p for r, (p, _t0) in self.since.items() if r not in long}
        busy = [r for r in elsewhere if self.working(r, t - self.hang_after)]
        if busy:
            return (f"{where}, while rank{'s' if len(busy) > 1 else ''} {rank_ranges(busy)} elsewhere "
                    f"{'are' if len(busy) > 1 else 'is'} at work: a pause or a straggler so far, not a hang")
        if not elsewhere and len(set(long.values())) < 2:
            return f"{where}: every rank here waits in the same call, for the network or for a rank not on this node"
        if elsewhere and all(p in set(long.values()) for p in elsewhere.values()):
            return f"{where}: the others have just arrived at the same call"
        return f"{where}, at work there (CUDA may spin while it waits): not called a hang before " \
               f"{self.spin_after * self.hang_after:g} s"


def _by_position(ranks: dict[int, Position]) -> dict[Position, list[int]]:
    out: dict[Position, list[int]] = {}
    for r, p in sorted(ranks.items()):
        out.setdefault(p, []).append(r)
    return out
