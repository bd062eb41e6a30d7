"""A rank slower than its peers, seen while the job runs: the others wait for it in their collectives.

DDP's gradient all_reduce makes every rank's step as long as the slowest rank's, so per-rank step timers cannot
tell the slow rank from the others.  Where each rank spends its time can: sampled twice a second (the same
py-spy dumps the hang watch reads), a rank slower than its peers spends less of its time *waiting* (inside a
collective call, asleep there: :func:`nbhelpers.diagnosis.hang.position` and py-spy's thread state) and more at
its own work, because its peers wait for it.  That difference survives synchronisation and needs nothing from
the user's script.

:class:`StragglerTracker` is the bookkeeping, pure: per rank, its samples of the last ``window_s`` seconds, each
waiting or not, and where the rank was when not waiting.  Once a whole window has passed since the job's first
collective (and every rank has ``min_samples`` in it), the rank whose waiting share stands ``gap`` or more below
every peer's, while those peers wait at least ``peers_wait`` of their time, for ``hold_s`` seconds, is the
straggler (if it waits at most ``own_wait`` itself), named with its most frequent position outside the collectives (its hot line).  The numbers are chosen on the development runs of
``tests/test_straggler.py`` and ``bench/bench_straggler.py`` (a slow data path, a rank-0 extra step, a DataLoader
without workers, balanced jobs; 2 and 3 ranks): a straggler there waited 0-11 % of its samples where its peers waited
68-100 % (50-78 % with two busy loops beside), named 12-13 s past the first collective; 10 balanced runs named
nobody, and a balanced run beside a notebook's work, whose rank 0 waited 33 %, must not be named either.
"""
from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field

from nbhelpers.diagnosis.hang import Position, position
from nbhelpers.diagnosis.tracebacks import main_thread_active, stack_frames

__all__ = ["Straggler", "StragglerTracker"]


@dataclass
class Straggler:
    """A rank named as slower than its peers: where its time went, and every rank's waiting share."""
    rank: int
    where: str                      # its hot position: "at data.py:88 in collate"
    hot_share: float                # share of its window samples at that position
    shares: dict[int, float]        # rank -> share of its window samples spent waiting in a collective
    peers_wait: dict[int, str]      # peer rank -> where it waited most ("all_reduce at train.py:45 in step")
    named_at: float                 # the sample time it was named at
    samples: int                    # samples per rank in the window

    def text(self) -> str:
        peers = sorted(r for r in self.shares if r != self.rank)
        waits = ", ".join(f"rank {r} {self.shares[r]:.0%}" for r in peers)
        at = next(iter(self.peers_wait.values()), "a collective")
        return (f"rank {self.rank} spends {self.hot_share:.0%} of its time {self.where} and waits "
                f"{self.shares[self.rank]:.0%} of it in collectives; its peers wait for it ({waits} of their time, "
                f"in {at}), over the last {self.samples} samples of each rank")

    def to_dict(self) -> dict:
        return {"rank": self.rank, "where": self.where, "hot_share": round(self.hot_share, 2),
                "shares": {str(r): round(s, 2) for r, s in sorted(self.shares.items())},
                "peers_wait": {str(r): w for r, w in sorted(self.peers_wait.items())}, "samples": self.samples,
                "named_at": self.named_at}


# Collectives of a job's start-up, not of its steps: on a busy machine one rank builds its model seconds after the
# other, which then waits in DDP's constructor; that is no straggler (a healthy job was named one so, beside two other
# jobs on the machine).  Samples there are not kept, and the window starts at the first collective after them.
START_UP = frozenset({"DDP constructor (parameter broadcast)"})


@dataclass
class StragglerTracker:
    """Per rank, its samples of the last ``window_s`` seconds: (time, waiting in a collective, where); see the
    module doc.  Windows and holds are in seconds, not samples: on a busy machine the samples come slower."""
    window_s: float = 10.0    # the samples a verdict reads: the last 10 s of each rank's
    min_samples: int = 6      # ... at least this many of them per rank (a busy machine samples slower)
    gap: float = 0.3          # the straggler waits this much less (share of its samples) than the least-waiting peer
    peers_wait: float = 0.45  # ... while every peer waits at least this share of its samples (real stragglers' peers:
                              # 50-100 %; a balanced job beside a notebook's work: 33 %)
    own_wait: float = 0.15    # ... and it waits at most this share of its own (stragglers measured: 0-11 %)
    hold_s: float = 2.0       # ... and has stood out so for this long
    samples: dict[int, deque] = field(default_factory=dict)
    started: float | None = None   # when a rank was first seen in a collective: the job past its start-up
    standing: tuple[int, float] | None = None  # the rank standing out now, and since when
    named: Straggler | None = None
    history: list[tuple[float, dict[int, float]]] = field(default_factory=list)  # (t, shares) a round, once started

    def add(self, t: float, stacks: dict[int, str]) -> Straggler | None:
        """One round of samples at time ``t`` (rank -> py-spy dump); the straggler the first time one stands out."""
        for r, text in stacks.items():
            p = position(text)
            if p is None or p.collective in START_UP:
                continue
            waiting = p.collective is not None and main_thread_active(text) is False
            if self.started is None and p.collective is not None:
                self.started = t
            if self.started is not None:
                kept = self.samples.setdefault(r, deque())
                kept.append((t, waiting, str(p) if waiting else _working_at(text, p)))
                while kept[0][0] < t - self.window_s:
                    kept.popleft()
        if self.samples:
            self.history.append((t, self.shares()))
        if self.named is None:
            self.named = self._check(t)
            return self.named
        return None

    def shares(self) -> dict[int, float]:
        return {r: sum(w for _, w, _ in s) / len(s) for r, s in self.samples.items() if s}

    def standing_out(self, t: float, full: bool = True) -> Straggler | None:
        """The rank that stands out in the samples kept now (each rank with ``min_samples`` or more, and with
        ``full`` a whole ``window_s`` since the first collective), without the hold; None when no rank does."""
        if len(self.samples) < 2 or any(len(s) < self.min_samples for s in self.samples.values()):
            return None
        if full and (self.started is None or t - self.started < self.window_s):
            return None
        shares = self.shares()
        slow = min(shares, key=shares.get)
        peers = {r: s for r, s in shares.items() if r != slow}
        if min(peers.values()) < max(self.peers_wait, shares[slow] + self.gap) or shares[slow] > self.own_wait:
            return None  # (a rank that still waits a fifth of its time is slowed, as a balanced job's rank was
            # on a loaded machine: 22 % against its peer's 60 %, its DataLoader short of CPU, in make test)
        where, share = self.hot(slow)
        peers_at = {r: Counter(at for _, w, at in self.samples[r] if w).most_common(1)[0][0] for r in peers}
        return Straggler(slow, where, share, shares, peers_at, t, len(self.samples[slow]))

    def _check(self, t: float) -> Straggler | None:
        s = self.standing_out(t)
        if s is None or self.standing is None or self.standing[0] != s.rank:
            self.standing = (s.rank, t) if s else None
        return s if s and t - self.standing[1] >= self.hold_s else None

    def hot(self, r: int) -> tuple[str, float]:
        """Rank ``r``'s most frequent place outside a collective wait, and its share of the samples kept."""
        own = Counter(at for _, w, at in self.samples.get(r, ()) if not w)
        if not own:
            return "(always waiting)", 0.0
        where, n = own.most_common(1)[0]
        return where, n / len(self.samples[r])


def _working_at(dump: str, p: Position) -> str:
    """Where a rank works: its two innermost frames of the user's code (``at data.py:12 in burn, called at
    data.py:37 in __getitem__``), or the collective it is busy in."""
    if p.collective is not None:
        return f"in {p.text}"
    w = stack_frames(dump)
    own = [f for f in (w.frames if w else []) if not f.library][-2:]
    if len(own) < 2:
        return p.text
    inner, outer = own[1], own[0]
    return (f"at {inner.file.rsplit('/', 1)[-1]}:{inner.line} in {inner.func}, called at "
            f"{outer.file.rsplit('/', 1)[-1]}:{outer.line} in {outer.func}")
