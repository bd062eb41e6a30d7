"""Attach to a distributed job already running on this node: find its ranks, read their stacks, name the odd one.

    python -m nbhelpers attach            # the one job running here
    python -m nbhelpers attach 12345      # the job of this pid (torchrun's, or any rank's)
    python -m nbhelpers attach --all                   # every job running here, one verdict each
    python -m nbhelpers attach --all --json > node-$(hostname).json
    python -m nbhelpers attach --merge node-*.json     # several nodes: one verdict per job
    python -m nbhelpers attach --profile 20            # a job that runs but slowly: the rank the others wait for

A rank is a process with ``RANK`` (or ``LOCAL_RANK``) in its environment, as torchrun /
``torch.distributed.run``, accelerate, deepspeed and ``srun`` set it; its job is the nearest ancestor
that is one of those launchers (else its parent).  Of the processes carrying one rank's ``RANK``, the
rank is the topmost one (DataLoader workers inherit their rank's environment).  A job's *world* is the store
its ranks rendezvoused at (``MASTER_ADDR:MASTER_PORT``, else torchrun's run id): the same on every node of a
multi-node job and different for two jobs on one node, so ``--merge`` joins each job's nodes and keeps jobs
apart.  Stacks are read with ``py-spy dump --nonblocking``: nothing is stopped or paused.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from nbhelpers.diagnosis.api import Rule, Verdict
from nbhelpers.diagnosis.culprit import RankView
from nbhelpers.diagnosis.hang import Hang, HangTracker, position, rank_ranges
from nbhelpers.diagnosis.straggler import Straggler, StragglerTracker
from nbhelpers.errors import AttachError
from nbhelpers.runtime.hangwatch import children_running, cpu_moving, hang_verdict, io_moving
from nbhelpers.runtime.stacks import dump_many

__all__ = ["Attached", "Jobs", "Profiled", "RankProc", "attach", "attach_commands", "find_jobs", "merge",
           "merge_profiles", "profile", "world_of"]

LAUNCHER = re.compile(r"(?:^|[/\s])(?:torchrun|torch\.distributed\.(?:run|launch)|accelerate(?:\s+launch)?|"
                      r"accelerate\.commands\.launch|deepspeed|deepspeed\.launcher\.\w+|srun|mpirun|mpiexec)(?:\s|$)")


@dataclass
class RankProc:
    """One rank of a running job, as the process table shows it."""
    rank: int
    pid: int
    job_pid: int
    local_rank: int | None = None
    world_size: int | None = None
    host: str = field(default_factory=lambda: os.uname().nodename)
    cmdline: str = ""
    world: str | None = None   # the store its job rendezvoused at (world_of)
    run_dir: str | None = None  # the run folder of a job started by `run` (its rank shim writes collective records there)

    def __repr__(self) -> str:
        return f"<RankProc rank={self.rank} pid={self.pid} job={self.job_pid} {self.host}>"


def _int(v: str | None) -> int | None:
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


def _cmd(p: psutil.Process) -> str:
    try:
        return " ".join(p.cmdline())
    except psutil.Error:
        return ""


def world_of(env: dict) -> str | None:
    """Which world a rank belongs to, from the environment its launcher gave it: the store's address
    (``MASTER_ADDR:MASTER_PORT``; c10d sets it to the rendezvous store, the same on every node), else torchrun's run id."""
    if env.get("MASTER_ADDR") and env.get("MASTER_PORT"):
        return f"{env['MASTER_ADDR']}:{env['MASTER_PORT']}"
    run_id = env.get("TORCHELASTIC_RUN_ID")
    return f"run {run_id}" if run_id and run_id != "none" else None


def _job_of(p: psutil.Process) -> psutil.Process:
    """The nearest ancestor that is a launcher, else the parent (else, for a rank orphaned to init, itself)."""
    try:
        parents = p.parents()
    except psutil.Error:
        return p
    launcher = next((a for a in parents if LAUNCHER.search(_cmd(a))), None)
    return launcher or (parents[0] if parents and parents[0].pid != 1 else p)


def find_jobs() -> dict[int, list[RankProc]]:
    """Every distributed job running on this node that this user may read: job pid -> its ranks by rank."""
    carriers: dict[int, tuple[psutil.Process, int, dict]] = {}
    for p in psutil.process_iter(["pid", "cmdline"]):
        if p.pid == os.getpid():
            continue
        try:
            env = p.environ()
        except (psutil.Error, OSError):
            continue
        rank = _int(env.get("RANK", env.get("LOCAL_RANK")))
        if rank is None:
            continue
        carriers[p.pid] = (p, rank, env)
    jobs: dict[int, dict[int, RankProc]] = {}
    for pid, (p, rank, env) in carriers.items():
        try:
            parent = p.ppid()
        except psutil.Error:
            continue
        if parent in carriers and carriers[parent][1] == rank:
            continue  # a DataLoader worker or another child of the rank: the rank is its topmost carrier
        job = _job_of(p)
        jobs.setdefault(job.pid, {})[rank] = RankProc(rank, pid, job.pid, _int(env.get("LOCAL_RANK")),
                                                     _int(env.get("WORLD_SIZE")), cmdline=_cmd(p),
                                                     world=world_of(env), run_dir=env.get("NBH_RUN_DIR"))
    return {j: [ranks[r] for r in sorted(ranks)] for j, ranks in jobs.items()}


def _pre(text: str) -> str:
    import html

    return "<pre>" + html.escape(text) + "</pre>"


@dataclass
class Attached:
    """A running job's ranks, where each one is, and the verdict over them."""
    job_pid: int | None
    ranks: list[RankProc]
    stacks: dict[int, str]
    verdict: Verdict
    hang: Hang | None = None   # what the looks showed: who waited where, for how long (None: no hang seen)
    facts: dict[int, dict] = field(default_factory=dict)   # rank -> how long it stayed put, at work or not
    collectives: dict | None = None  # the ranks' collective records compared, for a job `run` started (else None)

    @property
    def world(self) -> str | None:
        return next((rp.world for rp in self.ranks if rp.world), None)

    def where(self, rank: int):
        return position(self.stacks.get(rank, ""))

    @property
    def culprit_rank(self) -> int | None:
        return self.verdict.culprit

    def groups(self) -> dict[str, list[int]]:
        """Ranks by where they are (the odd one out stands alone)."""
        out: dict[str, list[int]] = {}
        for rp in self.ranks:
            p = self.where(rp.rank)
            out.setdefault(str(p) if p else "(no stack)", []).append(rp.rank)
        return dict(sorted(out.items(), key=lambda kv: -len(kv[1])))

    def to_dict(self, stacks: bool = True) -> dict:
        rows = []
        for rp in self.ranks:
            p = self.where(rp.rank)
            rows.append({"rank": rp.rank, "pid": rp.pid, "host": rp.host, "local_rank": rp.local_rank,
                         "where": p.line if p else None, "collective": p.collective if p else None,
                         "position": str(p) if p else None, **self.facts.get(rp.rank, {}),
                         **({"stack": self.stacks.get(rp.rank, "")} if stacks else {})})
        return {"job_pid": self.job_pid, "world": self.world, "starting": _starting(self),
                "culprit_rank": self.culprit_rank, "hang": self.hang.to_dict() if self.hang else None,
                "collectives": self.collectives,
                "culprit_where": self.verdict.where,
                "rule": self.verdict.kind, "reason": self.verdict.reason, "evidence": self.verdict.evidence,
                "groups": {k: rank_ranges(v) for k, v in self.groups().items()}, "ranks": rows}

    def text(self) -> str:
        hosts = sorted({rp.host for rp in self.ranks})
        head = (f"job {self.job_pid}" if self.job_pid else "job") + f": {len(self.ranks)} ranks on {', '.join(hosts)}" + \
            (f" (world {self.world})" if self.world else "")
        lines = [head, "where the ranks are:"]
        lines += [f"  rank{'s' if len(rs) > 1 else ''} {rank_ranges(rs)}: {w}" for w, rs in self.groups().items()]
        v = self.verdict
        if self.hang:
            lines.append(f"hang: {self.hang.text()}")
        if self.collectives and not self.collectives["ok"]:
            lines.append(f"record: {self.collectives['verdict'].splitlines()[0]}")
        lines.append(f"culprit: rank {v.culprit}" + (f" at {v.where}" if v.where else "") + f" ({v.kind}): {v.reason}"
                     if v.culprit is not None else f"no single rank stands out: {v.reason}")
        if _starting(self):
            lines.append("note: a rank is still importing modules, so the job is still starting: look again in a "
                         "few seconds, or use --wait")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return _pre(self.text())


@dataclass
class Jobs:
    """Several jobs, each with its own verdict: ``attach --all`` on a node running more than one, or ``--merge``
    of nodes' outputs that hold more than one world."""
    jobs: list[Attached]

    @property
    def culprit_rank(self) -> int | None:
        """The first job's culprit that is named (the CLI's exit status: 1 when any job names one)."""
        return next((j.culprit_rank for j in self.jobs if j.culprit_rank is not None), None)

    def to_dict(self, stacks: bool = True) -> dict:
        return {"host": os.uname().nodename, "jobs": [j.to_dict(stacks) for j in self.jobs]}

    def text(self) -> str:
        return "\n\n".join([f"{len(self.jobs)} jobs", *(j.text() for j in self.jobs)])

    def _repr_html_(self) -> str:
        return _pre(self.text())


def _verdict(ranks: list[RankProc], stacks: dict[int, str], record: dict | None = None) -> Verdict:
    return hang_verdict([RankView(rp.rank, stack=stacks.get(rp.rank, "")) for rp in ranks], record=record)


def _records(ranks: list[RankProc]) -> dict | None:
    """For a job that ``run`` started (its ranks carry ``NBH_RUN_DIR``): ask its rank shims for their collective
    records now and compare them; None for any other job (plain torchrun writes none)."""
    run_dir = next((rp.run_dir for rp in ranks if rp.run_dir), None)
    if run_dir is None or not (Path(run_dir) / "fr").is_dir():
        return None
    from nbhelpers.runtime.runfolder import ask_for_records, collective_record

    fr = Path(run_dir) / "fr"
    ask_for_records(fr, lambda: [rp.rank for rp in ranks if psutil.pid_exists(rp.pid)])
    return collective_record(fr, len(ranks))


def _pick(jobs: dict[int, list[RankProc]], pid: int | None) -> list[int]:
    if not jobs:
        raise AttachError("no distributed job is running on this node (no process with RANK or LOCAL_RANK in its "
                          "environment that this user may read)",
                          "start the job with torchrun (or accelerate, deepspeed, srun); run attach as the job's "
                          "user or as root")
    if pid is None:
        if len(jobs) > 1:
            raise AttachError(f"{len(jobs)} jobs are running here: " + ", ".join(
                f"{j} ({len(r)} ranks)" for j, r in jobs.items()), "give one pid (the launcher's or a rank's), or --all")
        return list(jobs)
    for j, ranks in jobs.items():
        if pid == j or any(rp.pid == pid for rp in ranks):
            return [j]
        try:  # a process inside the job's tree (a shim, a DataLoader worker)
            if any(a.pid == j for a in psutil.Process(pid).parents()):
                return [j]
        except psutil.Error:
            pass
    under = []  # the job's launcher runs under pid (`python -m nbhelpers run`, a shell script, srun)
    for j in jobs:
        try:
            if any(a.pid == pid for a in psutil.Process(j).parents()):
                under.append(j)
        except psutil.Error:
            pass
    if len(under) == 1:
        return under
    if under:
        raise AttachError(f"pid {pid} runs {len(under)} jobs: " + ", ".join(str(j) for j in under),
                          "give one of those pids, or --all")
    raise AttachError(f"pid {pid} is not a distributed job or one of its ranks",
                      "jobs running here: " + ", ".join(str(j) for j in jobs))


LOOK_EVERY = 0.5   # seconds between two looks at the ranks, as run's live hang watch
HANG_AFTER = 2.0   # run's --hang-after default: the same rule names the same hang


def attach(pid: int | None = None, every_job: bool = False, wait: float = 0.0,
           hang_after: float = HANG_AFTER) -> Attached | Jobs:
    """Watch a running job's ranks (the job of ``pid``, else the only one here; ``every_job``: every job here, each
    with its own verdict) without stopping them, the way ``run``'s live hang watch does: a look at their stacks
    every half second, and a culprit named only once a rank has waited ``hang_after`` seconds in one collective
    call while another is elsewhere and not at work (:class:`~nbhelpers.diagnosis.hang.HangTracker`).  One look
    cannot tell a hang from a healthy job caught while one rank waits a millisecond for the other.  Returns at the
    hang, or after ``max(wait, hang_after + LOOK_EVERY)`` seconds with nobody named and why."""
    found = _watch(lambda jobs: list(jobs) if every_job and jobs else _pick(jobs, pid), wait, hang_after)
    return found[0] if len(found) == 1 else Jobs(found)


def _watch(pick, wait: float, hang_after: float) -> list[Attached]:
    deadline = time.monotonic() + max(wait, hang_after + LOOK_EVERY)
    trackers: dict[int, tuple[float, HangTracker]] = {}       # job -> (its first look, its tracker)
    io: dict[tuple[int, int], tuple[float, int]] = {}
    cpu: dict[tuple[int, int], tuple[float, float]] = {}   # CPU time between looks: a loop is no hang (cpu_moving)
    named: dict[int, Attached] = {}                            # job -> the look that named its hang
    while True:
        try:
            jobs = find_jobs()
            chosen = pick(jobs)
        except AttachError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(LOOK_EVERY)
            continue
        pids = {(j, rp.rank): rp.pid for j in chosen if j not in named for rp in jobs[j]}
        stacks, now = dump_many(pids, nonblocking=True), time.time()
        children, moving, busy = children_running(pids), io_moving(pids, io, now), cpu_moving(pids, cpu, now)
        found = []
        for j in chosen:
            if j in named:
                found.append(named[j])
                continue
            st = {rp.rank: stacks[j, rp.rank] for rp in jobs[j]}
            first, tracker = trackers.setdefault(j, (now, HangTracker(hang_after)))
            tracker.add(now, st, {rp.rank: children[j, rp.rank] or moving[j, rp.rank] or busy[j, rp.rank]
                                  for rp in jobs[j]})
            a = Attached(j, jobs[j], st, Verdict(None, Rule.NONE, ""))
            a.hang, a.facts = None if _starting(a) else tracker.hang(now), tracker.facts(now)
            if a.hang:
                a.collectives = _records(jobs[j])
            a.verdict = _verdict(jobs[j], st, a.collectives) if a.hang else \
                Verdict(None, Rule.NONE, f"no hang in the {now - first:.1f} s watched: {tracker.why_not(now)}")
            if a.culprit_rank is not None:
                named[j] = a
            found.append(a)
        watched = min(now - trackers[j][0] for j in chosen if j in trackers) if trackers else 0.0
        # past the deadline, and each job watched long enough to show a hang (on a loaded machine one look of py-spy
        # can take seconds: the window counts from the first look, not from the call)
        if all(j in named for j in chosen) or (time.monotonic() >= deadline and watched >= hang_after + LOOK_EVERY):
            return found
        time.sleep(LOOK_EVERY)


def _starting(found: Attached) -> bool:
    """A rank is still importing modules (py-spy shows frames of ``<frozen importlib._bootstrap>``)."""
    return any("<frozen importlib._bootstrap" in stack for stack in found.stacks.values())


def merge(outputs: Iterable[dict | str | os.PathLike]) -> Attached | Jobs:
    """One verdict per job over several nodes: the ``attach --json`` / ``attach --all --json`` outputs of each
    (dicts, or files holding them).  Jobs are told apart by their world (outputs without one are one job)."""
    worlds: dict[str | None, tuple[list[RankProc], dict[int, str], set, dict[int, dict]]] = {}
    for out in outputs:
        d = out if isinstance(out, dict) else json.loads(Path(out).read_text())
        for job in d["jobs"] if "jobs" in d else [d]:
            ranks, stacks, pids, facts = worlds.setdefault(job.get("world"), ([], {}, set(), {}))
            pids.add(job.get("job_pid"))
            for row in job["ranks"]:
                ranks.append(RankProc(row["rank"], row["pid"], job.get("job_pid") or 0, row.get("local_rank"),
                                      host=row.get("host", "?"), world=job.get("world")))
                stacks[row["rank"]] = row.get("stack", "")
                if "stayed_s" in row:
                    facts[row["rank"]] = {"stayed_s": row["stayed_s"], "at_work": row.get("at_work", False)}
    found = []
    for ranks, stacks, pids, facts in worlds.values():
        ranks.sort(key=lambda rp: rp.rank)
        # what each node watched, judged together; outputs of one look (no facts) by their stacks alone
        tracker = HangTracker.from_facts(stacks, facts, HANG_AFTER) if len(facts) == len(ranks) else None
        hang = tracker.hang(0.0) if tracker else None
        verdict = _verdict(ranks, stacks) if tracker is None or hang else \
            Verdict(None, Rule.NONE, f"no hang in what the nodes watched: {tracker.why_not(0.0)}")
        found.append(Attached(next(iter(pids)) if len(pids) == 1 else None, ranks, stacks, verdict, hang,
                              facts if tracker else {}))
    return found[0] if len(found) == 1 else Jobs(found)


def attach_commands(hosts: Sequence[str], workdir: str = ".", python: str = "python") -> dict[str, str]:
    """The per-node commands that gather every node's ``attach --json`` and the one that merges them: by ssh
    (one per host) and by srun (one step on every node of the Slurm job, beside the running step)."""
    one = f"cd {shlex.quote(workdir)} && {python} -m nbhelpers attach --all --json"
    cmds = {h: f"ssh {shlex.quote(h)} {shlex.quote(one)} > attach-{h}.json" for h in hosts}
    cmds["srun"] = (f"srun --overlap --jobid \"$SLURM_JOB_ID\" --nodes {len(hosts)} --ntasks-per-node 1 "
                    f"bash -c {shlex.quote(one + ' > attach-$(hostname).json')}")
    cmds["merge"] = f"{python} -m nbhelpers attach --merge attach-*.json"
    return cmds


@dataclass
class Profiled:
    """A running job sampled for a while: each rank's share of samples spent waiting in a collective, where the
    rest went, and the rank the others wait for (:mod:`nbhelpers.diagnosis.straggler`), if one stands out."""
    job_pid: int | None
    ranks: list[RankProc]
    tracker: StragglerTracker
    seconds: float

    @property
    def straggler(self) -> Straggler | None:
        return self.tracker.standing_out(time.time(), full=False)

    def rows(self) -> list[dict]:
        shares, rows = self.tracker.shares(), []
        for rp in self.ranks:
            where, share = self.tracker.hot(rp.rank)
            rows.append({"rank": rp.rank, "host": rp.host, "samples": len(self.tracker.samples.get(rp.rank, ())),
                         "waiting": round(shares.get(rp.rank, 0.0), 2), "hot": where, "hot_share": round(share, 2)})
        return rows

    def to_dict(self) -> dict:
        s = self.straggler
        return {"job_pid": self.job_pid, "seconds": self.seconds, "ranks": self.rows(),
                "samples": {str(r): [list(x) for x in d] for r, d in self.tracker.samples.items()},
                "straggler": s and {**s.to_dict(), "text": s.text()}}

    def text(self) -> str:
        head = f"job {self.job_pid}" if self.job_pid else "job"
        lines = [f"{head}: {len(self.ranks)} ranks sampled for {self.seconds:g} s"]
        lines += [f"  rank {r['rank']}: waits {r['waiting']:.0%} in collectives; {r['hot_share']:.0%} {r['hot']}"
                  for r in self.rows()]
        s = self.straggler
        lines.append(f"straggler: {s.text()}" if s else "no rank stands out: the ranks wait for each other alike "
                     "(or too few samples: profile longer)")
        return "\n".join(lines)


MIN_PROFILE_SAMPLES = 10  # per rank, past the job's first collective: 5 s at two samples a second


def profile(pid: int | None = None, seconds: float = 20.0, every_job: bool = False, every: float = 0.5,
            start_wait: float = 60.0) -> Profiled:
    """Sample a running job's ranks every ``every`` seconds (py-spy, nothing paused) for ``seconds`` past its first
    collective, and say where each one's time goes, and which rank, if any, the others wait for.  A job still
    starting is waited for: its ranks to appear (``start_wait``), then its first collective (as long again at
    most).  The job keeps running."""
    deadline = time.monotonic() + start_wait
    while True:
        try:
            jobs = find_jobs()
            chosen = list(jobs) if every_job and jobs else _pick(jobs, pid)
            break
        except AttachError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(every)
    if len(chosen) > 1:
        raise AttachError(f"{len(chosen)} jobs are running here and --profile reads one: " + ", ".join(
            f"{j} ({len(jobs[j])} ranks)" for j in chosen), "give one pid (the launcher's or a rank's)")
    ranks = sorted((rp for j in chosen for rp in jobs[j]), key=lambda rp: rp.rank)
    tracker = StragglerTracker(window_s=seconds + start_wait, min_samples=MIN_PROFILE_SAMPLES)
    begun, give_up = None, time.monotonic() + start_wait + seconds
    while time.monotonic() < give_up and (begun is None or time.monotonic() - begun < seconds):
        t = time.monotonic()
        tracker.add(time.time(), dump_many({rp.rank: rp.pid for rp in ranks}, nonblocking=True))
        if begun is None and tracker.started is not None:
            begun = t
        time.sleep(max(0.0, every - (time.monotonic() - t)))
    return Profiled(chosen[0] if len(chosen) == 1 else None, ranks, tracker, seconds)


def merge_profiles(outputs: Iterable[dict | str | os.PathLike]) -> Profiled:
    """One straggler verdict over several nodes: the ``attach --profile --json`` outputs of each."""
    tracker, ranks, seconds = StragglerTracker(window_s=float("inf"), min_samples=MIN_PROFILE_SAMPLES), [], 0.0
    for out in outputs:
        d = out if isinstance(out, dict) else json.loads(Path(out).read_text())
        seconds = max(seconds, d.get("seconds", 0.0))
        for row in d["ranks"]:
            ranks.append(RankProc(row["rank"], 0, d.get("job_pid") or 0, host=row.get("host", "?")))
        for r, samples in d["samples"].items():
            tracker.samples[int(r)] = deque((t, bool(w), at) for t, w, at in samples)
    tracker.started = min((s[0][0] for s in tracker.samples.values() if s), default=None)
    return Profiled(None, sorted(ranks, key=lambda rp: rp.rank), tracker, seconds)

