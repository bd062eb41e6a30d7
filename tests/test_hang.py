"""The live hang tracker and the verdict over many ranks' stacks, on py-spy dumps that real runs recorded."""
import time
from pathlib import Path

from nbhelpers.diagnosis import hang as H
from nbhelpers.diagnosis.culprit import RankView, find_culprit

RUNS = Path(__file__).parent / "data" / "runs"
IN_ALL_REDUCE = (RUNS / "desync-skip-3" / "rank1.stack.txt").read_text()   # waiting in all_reduce (desync.py:73)
SLEEPING = (RUNS / "stall" / "rank1.stack.txt").read_text()                # stalled in probe.py's inject, no collective
IN_LOADER = (RUNS / "user-loader-hang" / "rank1.stack.txt").read_text()    # a DataLoader that never returns
GONE = "Error: Failed to find python version from target process\n"        # what py-spy says of a process that left


def test_a_dump_gives_the_collective_and_the_users_line():
    p = H.position(IN_ALL_REDUCE)
    assert p.collective == "all_reduce" and p.line == "nbhelpers/workers/desync.py:73", p
    q = H.position(IN_LOADER)
    assert q.collective is None and q.line.startswith("examples/faulty/train_sharded_files.py:"), q
    path, line = q.line.split(":")
    assert "in enumerate(loader)" in (Path(__file__).resolve().parent.parent / path).read_text().splitlines()[int(line) - 1]
    assert H.position(GONE) is None


def feed(tracker, t0, seconds, stacks, every=0.5):
    t = t0
    while t <= t0 + seconds + 1e-9:
        tracker.add(t, stacks)
        t += every
    return t - every


def test_a_rank_waiting_while_another_is_elsewhere_is_a_hang_after_hang_after_seconds():
    tr = H.HangTracker(hang_after=2.0)
    t = feed(tr, 100.0, 1.5, {0: IN_ALL_REDUCE, 1: IN_LOADER})
    assert tr.hang(t) is None  # 1.5 s: a slow step, not yet a hang
    assert tr.why_not(t) == "no rank stayed 2 s in one collective call: the ranks are moving"
    t = feed(tr, t + 0.5, 0.5, {0: IN_ALL_REDUCE, 1: IN_LOADER})
    h = tr.hang(t)
    assert h is not None and set(h.waiting) == {0} and set(h.elsewhere) == {1}
    assert h.began == 100.0 and h.waited_s >= 2.0
    assert "rank 0 in all_reduce at desync.py:73" in h.text() and "rank 1 at train_sharded_files.py:85" in h.text()


def test_every_rank_at_the_same_call_is_no_hang_of_a_rank_here():
    tr = H.HangTracker(hang_after=2.0)
    t = feed(tr, 0.0, 5.0, {0: IN_ALL_REDUCE, 1: IN_ALL_REDUCE})
    assert tr.hang(t) is None
    assert tr.why_not(t).startswith("ranks 0-1 in all_reduce at desync.py:73 in __call__: every rank here waits in the same call")


def test_a_rank_that_moves_on_starts_its_clock_again():
    tr = H.HangTracker(hang_after=2.0)
    for i in range(10):  # rank 0 alternates between the all_reduce and its data loading: a working loop
        tr.add(i * 0.5, {0: IN_ALL_REDUCE if i % 2 else IN_LOADER, 1: SLEEPING})
    assert tr.hang(4.5) is None


def test_two_ranks_stuck_at_different_calls_is_a_hang():
    tr = H.HangTracker(hang_after=1.0)
    stuck_elsewhere = IN_ALL_REDUCE.replace("desync.py:73)", "desync.py:80)")
    t = feed(tr, 0.0, 1.0, {0: IN_ALL_REDUCE, 1: stuck_elsewhere})
    assert tr.hang(t) is not None and set(tr.hang(t).waiting) == {0, 1}


def test_rank_ranges():
    assert H.rank_ranges([5, 0, 1, 2, 7, 8]) == "0-2, 5, 7-8" and H.rank_ranges([3]) == "3"


def test_the_verdict_over_1024_ranks_stacks_names_the_odd_rank_fast():
    # 1023 ranks waiting in all_reduce and one stalled outside any collective (real dumps, copied)
    views = [RankView(r, stack=SLEEPING if r == 777 else IN_ALL_REDUCE) for r in range(1024)]
    t = time.perf_counter()
    v = find_culprit(views, "hang")
    took = time.perf_counter() - t
    assert v.culprit == 777 and v.kind == "outside_collective", v
    assert took < 30  # the bench holds the target (under 5 s); this only catches a quadratic blow-up
    # the same with the odd rank in another collective: the odd one out by majority
    other = IN_ALL_REDUCE.replace("all_reduce (torch/distributed/distributed_c10d.py:3252)",
                                  "broadcast (torch/distributed/distributed_c10d.py:2790)").replace(
                                  "desync.py:73)", "desync.py:80)")
    views = [RankView(r, stack=other if r == 5 else IN_ALL_REDUCE) for r in range(1024)]
    v = find_culprit(views, "hang")
    assert v.culprit == 5 and v.kind == "different_collectives", v
    assert "ranks 0-4, 6-1023: all_reduce" in v.reason and len(v.reason) < 400, v.reason


BUSY = (RUNS / "user-busy-rank" / "rank1.stack.txt").read_text()  # py-spy: (active+gil), in build_shard_stats


def test_a_rank_elsewhere_that_is_working_makes_a_pause_not_a_hang():
    tr = H.HangTracker(hang_after=2.0)
    t = feed(tr, 0.0, 6.0, {0: IN_ALL_REDUCE, 1: BUSY})   # rank 1 computes while rank 0 waits: rank 0 evaluating
    assert tr.hang(t) is None
    assert tr.why_not(t) == ("rank 0 in all_reduce at desync.py:73 in __call__, while rank 1 elsewhere is at work: "
                             "a pause or a straggler so far, not a hang")
    t = feed(tr, t + 0.5, 2.0, {0: IN_ALL_REDUCE, 1: IN_LOADER})  # rank 1 now sleeps in its DataLoader: stuck
    h = tr.hang(t)
    assert h is not None and set(h.waiting) == {0} and set(h.elsewhere) == {1}


def test_a_rank_whose_children_run_is_working():
    tr = H.HangTracker(hang_after=2.0)
    t = 0.0
    while t <= 4.0:  # rank 1's main thread sleeps in its DataLoader, whose worker process runs
        tr.add(t, {0: IN_ALL_REDUCE, 1: IN_LOADER}, working={1: True})
        t += 0.5
    assert tr.hang(t - 0.5) is None


def test_a_waiting_rank_at_work_is_not_waiting_until_spin_after():
    tr = H.HangTracker(hang_after=2.0, spin_after=5.0)
    t = 0.0
    while t <= 9.0:  # rank 0 at a collective call but on the CPU (a DDP constructor's own work, a CUDA spin-wait)
        tr.add(t, {0: IN_ALL_REDUCE, 1: IN_LOADER}, working={0: True})
        t += 0.5
    assert tr.hang(9.0) is None
    assert tr.why_not(9.0).endswith("at work there (CUDA may spin while it waits): not called a hang before 10 s")
    tr.add(10.0, {0: IN_ALL_REDUCE, 1: IN_LOADER}, working={0: True})
    assert tr.hang(10.0) is not None  # 5 x hang_after at one call: waiting, whatever the CPU says


def test_facts_of_trackers_on_two_nodes_judge_the_job_together():
    # node 0 holds rank 0, node 1 rank 1: neither alone can tell a hang (one rank each); their facts together can
    nodes = [H.HangTracker(hang_after=2.0), H.HangTracker(hang_after=2.0)]
    stacks = {0: IN_ALL_REDUCE, 1: IN_LOADER}
    for r, tr in enumerate(nodes):
        feed(tr, 50.0 + r, 4.0, {r: stacks[r]})   # the nodes' clocks differ: only durations travel
    assert all(tr.hang(55.0 + r) is None for r, tr in enumerate(nodes))
    facts = {r: tr.facts(55.0 + r)[r] for r, tr in enumerate(nodes)}
    assert facts == {0: {"stayed_s": 5.0, "at_work": False}, 1: {"stayed_s": 5.0, "at_work": False}}
    h = H.HangTracker.from_facts(stacks, facts).hang(0.0)
    assert h is not None and set(h.waiting) == {0} and set(h.elsewhere) == {1} and h.waited_s == 5.0
    # the same positions with rank 1 at work on its node: a pause, as one tracker over both ranks would say
    busy = H.HangTracker(hang_after=2.0)
    t = 0.0
    while t <= 4.0:
        busy.add(t, {1: BUSY})
        t += 0.5
    facts[1] = busy.facts(4.0)[1]
    assert facts[1]["at_work"] is True
    both = H.HangTracker.from_facts({0: IN_ALL_REDUCE, 1: BUSY}, facts)
    assert both.hang(0.0) is None and "while rank 1 elsewhere is at work" in both.why_not(0.0)
