"""Each culprit rule on evidence recorded from real runs (tests/data/runs/, made by its record.py): no processes.

For every recorded run: the rule expected to decide it concludes what the run concluded when it was
recorded, and every rule before it in RULES passes (returns None), so the order of RULES is tested too.
"""
import json
from pathlib import Path

import pytest

from nbhelpers.diagnosis import culprit as C
from nbhelpers.diagnosis.api import Rule
from nbhelpers.diagnosis.remedies import REMEDIES, advice
from nbhelpers.runtime.runfolder import collective_record, read_run_dir, read_sources

RUNS = Path(__file__).resolve().parent / "data" / "runs"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "faulty"
# every set of users' scripts, where the recorded runs' frames point (found by glob: a new set is read at once)
SCRIPT_SETS = [EXAMPLES, *sorted(Path(__file__).resolve().parent.glob("userscripts_*")),
               Path(__file__).resolve().parent / "data" / "exithang"]

DECIDED_BY = {  # recorded run -> the rule that must decide it
    "healthy": C.passed,
    "desync-skip-3": C.desync_rule,
    "desync-shape-2": C.desync_rule,
    "mismatch": C.size_mismatch,
    "exit-abort": C.exit_without_destroy,
    "user-exit-segv": C.exit_without_destroy,   # aborted at exit, then faulthandler crashed: SIGSEGV (see its run.json)
    "user-abort-after-destroy": C.exit_without_destroy,  # the healthy control, aborted in torch's teardown (loaded bench)
    "exit": C.crashed,
    "desync-crash-3-loaded": C.crashed,   # killed itself, stopped by torchrun while still dying (see its run.json)
    "never-join": C.named,
    "stall": C.late,
    "rank0-collective": C.unmatched,
    "wrong-port": C.named,
    # users' own scripts (examples/faulty): no events, only tracebacks, stack dumps and source
    "user-valueerror": C.crashed,
    "user-oom-allgather": C.crashed,
    "user-uneven": C.uneven_collectives,
    "user-wrong-world": C.wrong_world,
    "user-bcast-rank0": C.rank_only_collective,    # `if dist.get_rank() == 0:` around a broadcast
    "user-predict-guard": C.rank_only_collective,  # predict() after `if not state.is_world_process_zero: return`
    "user-metric-rank-zero": C.rank_only_collective,  # a torchmetrics compute() in a @rank_zero_only callback
    "user-mapped-save": C.mapped_file_shrunk,      # rank 0 np.save()s the file rank 1 maps (np.load mmap_mode="r")
    "user-pipe-skip": C.skipped_call,              # both pipeline stages receive: stage 1 `continue`d past its send
    "user-helper-rank-dcp": C.rank_only_collective,  # dcp.save under `if rank == 0:`, rank from a helper module
    "user-super-evaluate": C.rank_only_collective,   # super().evaluate() after `if not is_world_process_zero(): return`
    "user-project-metric": C.rank_only_collective,   # @rank_zero_only calls a metric's compute() of the project's own
    # a dtype of torch's choosing for a constant (`else 0`, torch.zeros(2)) on the rank with no data of its own
    "user-int-recall": C.size_mismatch, "user-empty-domain": C.size_mismatch,
    "user-early-stop-exit": C.uneven_collectives,  # the finished rank left the epoch loop on its own accuracy
    "user-exit-thread": C.hung_at_exit,   # every rank: Python waits at exit for a non-daemon thread of the script's
    "user-exit-del": C.hung_at_exit,      # rank 0: a __del__ joins a thread nobody stopped, after main() returned
    "user-order-swapped": C.different_collectives,
    "user-detail-segfault": C.ddp_segfault,
    "user-loader-hang": C.outside_collective,
    "user-sigkill": C.crashed,
    "user-flock-barrier": C.collective_in_lock,
    # a rank busy in pure Python (py-spy: "Thread N (active+gil)") while the other times out: a second set's script
    "user-busy-rank": C.outside_collective,
    "user-ddp-shapes": C.model_mismatch,   # each rank's vocabulary from its own shard: DDP's shape check
    "user-worker-error": C.crashed,        # a DataLoader worker's error, re-raised in the rank's main process
    "user-same-checkpoint": C.same_error,  # both ranks load one torn checkpoint: the file, not a rank (third set)
    "user-dtype-mismatch": C.size_mismatch,  # one rank's metric tensor int64, the other's float32 (third set)
    # rank 1 raised DDP's unused-parameter error and was stopped while still exiting; rank 0 had aborted first
    "user-stopped-dying": C.crashed,
    "user-eval-ddp-rank0": C.different_collectives,  # the rank-0 branch is in the caller of the waiting method
    "user-own-ports": C.unreachable,  # every rank still connecting to a store nobody hosts: no culprit
    "user-early-stop-local": C.different_collectives,  # rank 1 left the epoch loop on its own early stop
    "user-stopiteration": C.crashed,  # a bare StopIteration (no message): rank 1's shards ran out (fifth set)
    # the ranks disagreed, and one rank's own log says it took a path of its own (Evidence.odd_one_out)
    "user-swallowed-error": C.size_mismatch,      # "skipping batch at step 6 (IndexError: ...)" on rank 1 only
    "user-resume-fallback": C.different_collectives,  # "... but found no rng_state_rank0.pt; epoch counter starts at 0"
    "user-nan-break": C.size_mismatch,            # "[rank 1] non-finite loss at epoch 0 step 10, stopping training"
    # nothing logged; one rank still in a loop its peer had left (Evidence.past_loop): said, nobody named
    "user-extra-key": C.different_collectives,    # rank 1 in reduce_metrics' loop over its keys, rank 0 gone on
    "user-uneven-abort": C.size_mismatch,         # rank 0 in the batch loop, rank 1 past it in the evaluation
    # rank 0 finished, then was stopped while shutting down (its stack dump: no Python frame) when rank 1 lost it
    "user-uneven-finished-stopped": C.uneven_collectives,
    "user-own-rank-zero": C.wrong_world,          # torchrun's rank 1 passes rank=0 (an --rank option): waits on its own key
    # rank 1 in the next epoch's batch loop, rank 0 in a barrier under `if ... is_best:`: no loop settles it
    "user-best-barrier": C.different_collectives,
    # rank 1 in evaluate() under `if self.tokens_seen >= self.next_eval:` (its own count), rank 0 in the next backward
    "user-eval-tokens": C.size_mismatch,
    "user-freeze-after-wrap": C.same_error,  # DDP's reducer error on both ranks: layers frozen after wrapping (eighth set)
    # a store key of the script's own (ninth set): rank 1 waited for "vocab", rank 0 never did (it had a cache)
    "user-store-key": C.key_never_set,
    "user-store-gate": C.key_never_set,  # every rank waited for ".../epoch_sync/gate/1": nobody, and no rank 1 in it
    # rank 0 in a custom autograd Function's backward all_reduce, rank 1 in DDP's: its loss left that term out (tenth set)
    "user-autograd-collective": C.different_collectives,
    "user-resume-master-only": C.different_collectives,  # rank 0 resumed at epoch 4 alone: in the final barrier
    "user-port-race": C.race,  # every rank starts a metrics server on one fixed port: the second bind fails
    "user-makedirs-race": C.race,  # every rank creates the run folder without exist_ok (eleventh set)
    "user-short-timeout": C.short_timeout,  # a group's timeout of 300 ms while rank 0 builds its vocabulary (twelfth set)
    "user-export-guard": C.crashed,  # torch.export's GuardOnDataDependentSymNode on rank 0 (thirteenth set)
    "user-resume-apart": C.size_mismatch,  # rank 1 resumed at step 2200, rank 0 at 2400 (fourteenth set)
    # the ranks' collective records (the rank shim's Flight Recorder entries) and the code's structure decide these
    "user-skipped-gather": C.skipped_call,  # rank 1 returned early from finish(): its record lacks the final gather
    "user-left-loop": C.new_collective,     # accelerate: rank 1's barrier #91 where rank 0 ran DDP's usual broadcast
    # SIGBUS on a memory-mapped file another rank's code rewrote in place (two sets written apart: plain torch, Fabric)
    "user-mapped-rewrite": C.mapped_file_shrunk, "user-mapped-rewrite-fabric": C.mapped_file_shrunk,
    "user-world-from-config": C.wrong_world,  # every rank asked for rank 2 of a 2-rank job: nobody (third framework set)
    "user-own-watchdog": C.different_collectives,  # both ranks stopped by their own faulthandler watchdog, apart
}
EXPECTED_FAILURE = {  # what each user-script run must be called, besides its culprit
    "user-valueerror": (1, "rank_error"), "user-oom-allgather": (1, "oom_in_collective"),
    "user-uneven": (1, "collective_mismatch"), "user-wrong-world": (1, "rendezvous_timeout"),
    "user-bcast-rank0": (0, "collective_mismatch"), "user-order-swapped": (0, "collective_mismatch"),
    "user-detail-segfault": (None, "ddp_segfault"), "user-loader-hang": (1, None), "user-sigkill": (1, None),
    "user-busy-rank": (1, None),
    "user-ddp-shapes": (None, "collective_mismatch"), "user-worker-error": (1, "rank_error"),
    "user-same-checkpoint": (None, "rank_error"),  # the run's category is the classifier's checkpoint_corrupt
    "user-stopped-dying": (1, "rank_error"),  # the run's category is the classifier's collective_mismatch
    "user-eval-ddp-rank0": (0, "collective_mismatch"), "user-own-ports": (None, None),
    "user-stopiteration": (1, "rank_error"),
    "user-early-stop-local": (1, "collective_mismatch"), "user-swallowed-error": (1, None),
    "user-resume-fallback": (0, "collective_mismatch"), "user-nan-break": (1, None),
    "user-extra-key": (None, "collective_mismatch"), "user-uneven-abort": (None, None),
    "user-own-rank-zero": (1, "rendezvous_timeout"), "user-eval-tokens": (None, None),
    "user-freeze-after-wrap": (None, "rank_error"),  # the run's category is the classifier's collective_mismatch
    "user-store-key": (0, None), "user-store-gate": (None, None),
    "user-autograd-collective": (None, "collective_mismatch"), "user-resume-master-only": (0, "collective_mismatch"),
    "user-port-race": (None, "port_in_use"), "user-makedirs-race": (None, "rank_error"), "user-uneven-finished-stopped": (1, "collective_mismatch"),  # None: the classifier names it
    "user-short-timeout": (None, None), "user-export-guard": (0, "rank_error"),
    "user-resume-apart": (1, None),  # the run's category is the classifier's collective_timeout
    "user-skipped-gather": (1, "collective_mismatch"), "user-left-loop": (1, "collective_mismatch"),
    "user-mapped-rewrite": (1, None), "user-mapped-rewrite-fabric": (0, None),  # the classifier's worker_killed
    "user-world-from-config": (None, "rendezvous_timeout"), "user-own-watchdog": (1, "collective_mismatch"),
    "user-predict-guard": (0, "collective_mismatch"), "user-metric-rank-zero": (0, "collective_mismatch"),
    "user-mapped-save": (0, None),  # the classifier's worker_killed
    "user-pipe-skip": (1, "collective_timeout"), "user-helper-rank-dcp": (0, "collective_mismatch"),
    # ranks in different collectives until the timeout: collective_mismatch, as the classifier names that text
    "user-super-evaluate": (0, "collective_mismatch"), "user-project-metric": (0, "collective_mismatch"),
    "user-int-recall": (1, None), "user-empty-domain": (0, None),  # the classifier's collective_mismatch
    "user-early-stop-exit": (0, "collective_mismatch"),
    "user-exit-del": (0, "exit_without_destroy"),
}


def evidence(name: str) -> tuple[C.Evidence, dict]:
    views, torchrun_log = read_run_dir(RUNS / name)
    meta = json.loads((RUNS / name / "run.json").read_text())
    return C.Evidence(views, meta["status"], None, torchrun_log, read_sources(views, SCRIPT_SETS),
                      collective_record(RUNS / name / "fr", len(views))), meta


# runs a later rule decides, the culprit unchanged: run -> the rule's name now (the recording keeps the old one)
RULE_SINCE = {"user-bcast-rank0": "rank_only_collective",   # 2026-12-07: read from the documented condition
              # 2026-12-07: one Rule member per rule function (the rules that shared "late", "mismatch", "named")
              "user-busy-rank": "outside_collective", "user-loader-hang": "outside_collective",
              "user-ddp-shapes": "model_mismatch", "user-store-gate": "key_never_set", "user-store-key": "key_never_set"}


@pytest.mark.parametrize("name", sorted(DECIDED_BY))
def test_the_rule_that_decides_each_recorded_run(name):
    ev, meta = evidence(name)
    rule = DECIDED_BY[name]
    earlier = C.RULES[:C.RULES.index(rule)]
    assert [r.__name__ for r in earlier if r(ev) is not None] == [], "an earlier rule concluded first"
    verdict = rule(ev)
    recorded = meta["recorded_verdict"]
    kind = RULE_SINCE.get(name, recorded["culprit_kind"])
    assert (verdict.culprit, verdict.kind.value) == (recorded["culprit_rank"], kind), verdict
    assert verdict.reason and (verdict.culprit is None or verdict.culprit not in verdict.victims)
    again, _ = evidence(name)
    assert C.find_culprit(again.views, again.status, torchrun_log=again.torchrun_log, sources=again.sources, record=again.record) == verdict


def test_the_lock_holder_is_named_in_a_lock_and_barrier_deadlock():
    ev, _ = evidence("user-flock-barrier")
    holder = next(v.rank for v in ev.views if "building token cache" in v.log)  # the rank that took the lock
    v = C.find_culprit(ev.views, ev.status, torchrun_log=ev.torchrun_log, sources=ev.sources, record=ev.record)
    assert v.culprit == holder and v.kind is Rule.COLLECTIVE_IN_LOCK and "file_lock" in v.reason, v


@pytest.mark.parametrize("name", sorted(EXPECTED_FAILURE))
def test_users_scripts_get_their_culprit_failure_and_line(name):
    ev, meta = evidence(name)
    v = C.find_culprit(ev.views, ev.status, torchrun_log=ev.torchrun_log, sources=ev.sources, record=ev.record)
    culprit, failure = EXPECTED_FAILURE[name]
    assert v.culprit == culprit and (v.failure.value if v.failure else None) == failure, v
    if culprit is not None and name != "user-sigkill":  # SIGKILL leaves no traceback and no stack to read
        assert v.where and any(d in v.where for d in ("examples/faulty/train_", "userscripts_", "data/exithang/")), \
            v.where
        # (the line of the user's code, not torch's)


def test_each_rule_says_what_it_needs_and_concludes():
    for rule in C.RULES:
        doc = rule.__doc__ or ""
        assert "Needs:" in doc or "Always concludes" in doc, rule.__name__
        assert "Concludes" in doc or "concludes" in doc, rule.__name__


def test_no_rule_but_passed_fires_on_a_healthy_run():
    ev, _ = evidence("healthy")
    ev.status = "failed"  # pretend: the evidence itself must not blame anyone
    fired = [r.__name__ for r in C.RULES if r(ev) is not None]
    assert fired == ["nobody_stands_out"], fired


def test_late_names_the_straggler_not_the_rank_torchrun_blames():
    ev, _ = evidence("stall")
    v = C.late(ev)
    assert v.culprit == 1 and v.kind is Rule.LATE and v.first_to_raise == 0
    assert "timed out waiting for rank 1" in v.victims[0] or "rank 1" in v.victims[0]


def test_unmatched_names_the_rank_inside_the_branch():
    ev, _ = evidence("rank0-collective")
    v = C.find_culprit(ev.views, ev.status, torchrun_log=ev.torchrun_log)
    assert v.culprit == 0 and v.kind is Rule.UNMATCHED and "only rank 0 calls" in v.reason


def without_record(ev: C.Evidence) -> C.Evidence:
    """The same run as a launcher without the rank shim's collective records would see it."""
    return C.Evidence(ev.views, ev.status, None, ev.torchrun_log, ev.sources, None)


def test_a_size_mismatch_blames_nobody_and_shows_every_ranks_shapes_from_the_records():
    # the rank gloo aborted wrote its record too (the shim's abort hook): both ranks' sizes, no rerun needed
    ev, _ = evidence("mismatch")
    assert sorted(int(p.stem[4:]) for p in (RUNS / "mismatch" / "fr").glob("rank*.pkl")) == [0, 1]
    v = C.size_mismatch(ev)
    assert v.culprit is None and "TORCH_DISTRIBUTED_DEBUG" not in v.reason, v.reason
    assert "rank 0 ran all_reduce [524288] float32; rank 1 ran all_reduce [1048576] float32" in v.reason
    assert any("doesn't match expected size" in e for e in v.evidence)
    # without records the shapes are unknown: DETAIL makes every rank report them
    assert "TORCH_DISTRIBUTED_DEBUG=DETAIL" in C.size_mismatch(without_record(ev)).reason


def test_a_rank_still_dying_of_its_own_sigkill_when_stopped_is_the_culprit_not_a_size_mismatch():
    # recorded under load: rank 1's record says stop_signal SIGTERM (torchrun's), signal SIGKILL (its own, 9 ms later);
    # rank 0 aborted on the torn message ("Received data size doesn't match expected size")
    ev, _ = evidence("desync-crash-3-loaded")
    one = ev.by_rank[1]
    assert one.record["stop_signal"] == "SIGTERM" and one.record["signal"] == "SIGKILL" and one.crashed
    assert C.size_mismatch(ev) is None and C.crashed(ev).culprit == 1
    # a SIGKILL that comes after the grace period is the stop's own escalation: not a crash
    late = {**one.record, "end": one.record["stop_time"] + 8.5}
    assert not C.RankView(1, one.events, late, one.log, one.stack).crashed


def test_an_abort_at_exit_that_ends_in_sigsegv_is_still_the_missing_destroy():
    ev, _ = evidence("user-exit-segv")
    one = ev.by_rank[1]
    assert one.record["signal"] == "SIGSEGV" and "Fatal Python error: Aborted" in one.log
    verdict = C.find_culprit(ev.views, ev.status, torchrun_log=ev.torchrun_log, sources=ev.sources, record=ev.record)
    assert verdict.culprit == 1 and verdict.kind is Rule.EXIT_WITHOUT_DESTROY, verdict
    # the logs say so too: torchrun's "Signal 11 (SIGSEGV) received by PID" is the abort's consequence
    from nbhelpers.diagnosis.classify import classify_logs
    found = classify_logs({v.rank: v.log for v in ev.views}, ev.torchrun_log)
    assert found[0].category == "exit_without_destroy" and found[1].category == "worker_killed", found
    # a SIGKILL beside the abort is a kill, not the abort's report
    killed = ev.torchrun_log.replace("exitcode  : -11", "exitcode  : -9")
    assert classify_logs({v.rank: v.log for v in ev.views}, killed)[0].category == "worker_killed"
    # a SIGSEGV with no abort before it is a crash
    segv = C.RankView(1, one.events, one.record, one.log.replace("Fatal Python error: Aborted", ""), one.stack)
    assert segv.exit_abort_line() is None


def test_a_dataloader_workers_error_is_the_ranks_own_with_the_workers_line():
    # "zlib.error: Caught error in DataLoader worker process 1." then the worker's own traceback: its line counts
    ev, _ = evidence("user-worker-error")
    v = C.find_culprit(ev.views, ev.status, torchrun_log=ev.torchrun_log, sources=ev.sources, record=ev.record)
    assert v.culprit == 1 and "imgcls_packfile.py:41 in __getitem__" in v.where and "incorrect header check" in v.reason


def test_a_size_abort_by_a_power_of_two_says_it_may_be_a_dtype():
    # lit_shards: rank 1 has no validation shard, so its metric counters stay Python ints (int64) while rank 0's are
    # float32: gloo aborts rank 0 with "8 vs 4" (bytes received vs posted)
    ev = evidence("user-dtype-mismatch")[0]
    v = C.size_mismatch(without_record(ev))
    assert v.culprit is None and "8 bytes received where 4 were expected" in v.reason and "another dtype" in v.reason
    # with the records the dtypes are known, not guessed; and the code says whose dtype is a constant's: rank 1's
    # counters are still the Python ints `{"loss_sum": 0, ...}` of on_validation_epoch_start
    v = C.size_mismatch(ev)
    assert "rank 0 ran all_reduce [3] float32; rank 1 ran all_reduce [3] int64" in v.reason and "bytes" not in v.reason
    assert v.culprit == 1 and "lit_shards.py:67" in v.reason and "`0`" in v.reason, v.reason
    # 1024 vs 1000 bytes (another shape): no dtype note
    assert "dtype" not in C.size_mismatch(evidence("desync-shape-2")[0]).reason


def test_the_same_error_on_every_rank_names_no_rank_but_the_line_they_share():
    # both ranks resumed from one checkpoint that a pre-empted save had cut short; rank 0 exited first and torchrun's
    # Root Cause names it, rank 1 was stopped just after raising the same error
    ev, _ = evidence("user-same-checkpoint")
    assert ev.by_rank[1].record["stop_signal"] == "SIGTERM" and ev.by_rank[1].raised_at_end()
    assert {v.rank for v in ev.crashed_alone} == {0, 1}  # rank 1 was dying of its own error when the stop came
    v = C.same_error(ev)
    assert v.culprit is None and v.kind is Rule.SAME_ERROR and "tabular_trainer.py:139" in v.reason
    assert "central directory" in v.evidence[0] and "central directory" in v.evidence[1]
    assert v.torchrun_note() == "torchrun's 'Root Cause' names rank 0: only the first rank to exit, not a cause by itself"
    # one rank's own error, the other a victim of it: not the same error (the rank that raised is the culprit)
    assert C.same_error(evidence("user-valueerror")[0]) is None


def test_ddps_shape_check_names_no_rank_and_says_the_models_differ():
    ev, _ = evidence("user-ddp-shapes")
    v = C.model_mismatch(ev)
    assert v.culprit is None and "appears not to match sizes" in v.evidence[0] and "each rank's shard" in v.reason


PASTE_FALLS_SHORT = {  # what only a supervised run knows, not the text a user would paste
    "user-detail-segfault": "ddp_segfault is read from the exit records (SIGSEGV in DDP's constructor)",
    "user-uneven": "only the exit records say rank 0 had ended cleanly while rank 1 still called collectives",
    "user-early-stop-exit": "only the exit records say rank 0 had ended cleanly (the text shows a peer gone)",
    "user-exit-del": "only the stack dumps say the ranks had ended main() (the text shows a rank stopped by SIGTERM)",
    "user-exit-thread": "only the stack dumps say the ranks had ended main() (the text shows ranks stopped by SIGTERM)",
    "user-uneven-finished-stopped": "only the stack dump says rank 0 had ended its script when it was stopped",
    "user-skipped-gather": "only the records and the source say rank 1 skipped the gather: the text shows a peer gone",
    "user-own-watchdog": "the text has two faulthandler dumps and two exits of 1; that the ranks waited in different "
                         "collectives is read from those dumps as stacks, which the classifier does not do",
}


@pytest.mark.parametrize("name", sorted(p.name for p in RUNS.iterdir() if p.is_dir()))
def test_doctor_on_a_runs_pasted_output_names_the_runs_own_failure(name):
    # one name per failure: the ranks' output as plain torchrun prints it, pasted into `doctor`, gets the failure the
    # supervised run's verdict gives (its culprit rules, exit records and stacks) wherever the text shows it
    from nbhelpers.diagnosis.categories import run_failure
    from nbhelpers.diagnosis.classify import classify_logs
    from nbhelpers.runtime.learned import classify

    ev, meta = evidence(name)
    v = C.find_culprit(ev.views, ev.status, torchrun_log=ev.torchrun_log, sources=ev.sources, record=ev.record)
    logs = {r.rank: r.log for r in ev.views}
    found = classify_logs(logs, ev.torchrun_log)
    run = run_failure(v.failure, found[0].failure if found else None) if meta["status"] != "ok" else None
    pasted = classify("\n".join(logs[r] for r in sorted(logs)) + "\n" + ev.torchrun_log)
    doctor = pasted[0].category if pasted else None
    if name in PASTE_FALLS_SHORT:
        assert doctor != (run.value if run else None), f"{name} now agrees: drop it from PASTE_FALLS_SHORT"
    else:
        assert doctor == (run.value if run else None), (name, doctor, run)


def test_a_rank_stopped_while_dying_of_its_own_error_counts_as_crashed():
    ev, _ = evidence("user-stopped-dying")
    dying = ev.by_rank[1]
    assert dying.record["signal"] == "SIGTERM" and dying.raised_at_end() and dying.crashed
    # its traceback, not the stop, is the reason (the message runs on for several lines after the exception line)
    v = C.crashed(ev)
    assert v.culprit == 1 and "Expected to have finished reduction" in v.reason and "SIGTERM" not in v.reason
    # ranks stopped while they waited, or after losing a peer, did not raise at the end of their own
    for name in ("stall", "user-loader-hang", "user-valueerror", "rank0-collective"):
        run, _ = evidence(name)
        assert not any(r.raised_at_end() for r in run.views if r.record.get("stop_signal")), name


def test_an_abort_at_exit_says_whether_the_script_destroys_its_process_group():
    # examples/faulty/train_simple.py never calls destroy_process_group(); train_ddp.py does, and still aborted once
    ev, _ = evidence("user-exit-segv")
    assert "never destroyed" in C.exit_without_destroy(ev).reason
    ev, _ = evidence("user-abort-after-destroy")
    assert ev.script() == "examples/faulty/train_ddp.py"
    v = C.exit_without_destroy(ev)
    assert "train_ddp.py does call destroy_process_group()" in v.reason and "never destroyed" not in v.reason


def test_a_rank_condition_in_the_caller_names_the_rank_that_called():
    # shapes_trainer.py: `if self.is_main: metrics = self.evaluate()` in fit(); evaluate() runs the DDP wrapper, whose
    # forward broadcasts the BatchNorm buffers: rank 0 waits there, rank 1 in the epoch's barrier
    ev, _ = evidence("user-eval-ddp-rank0")
    assert ev.by_rank[0].where.user.func == "evaluate"
    line, cond = ev.rank_condition(ev.by_rank[0])
    assert cond == "if self.is_main" and ev.rank_condition(ev.by_rank[1]) is None
    v = C.different_collectives(ev)
    assert v.culprit == 0 and "DDP forward (buffer broadcast)" in v.reason and f"(line {line})" in v.reason


def test_ranks_that_all_still_connect_to_a_store_nobody_hosts_name_no_rank():
    # intent_clf.py: each rank picks its own free port for init_method=tcp://localhost:<port>
    ev, _ = evidence("user-own-ports")
    v = C.unreachable(ev)
    assert v.culprit is None and "no rank reached the rendezvous store" in v.reason and "timed out" in v.evidence[0]
    # a rank that cannot reach a store its peer does host is still named (probe: rank 1 dials a closed port)
    ev, _ = evidence("wrong-port")
    assert C.unreachable(ev).culprit == 1


def test_a_rank_past_a_loop_its_peer_is_still_in_is_said_so():
    # sensor_defects.py: rank 1 reaches the target accuracy on its own validation slice and breaks out of the epoch
    # loop; it waits in the final barrier while rank 0 trains on. Which of the two is "at fault" is a question of
    # intent (an earlier set blames the rank with more batches in the same shape): the loop alone names nobody, but the
    # reason says what happened, and rank 1's own log line about stopping early (rank 0 logged none) names rank 1
    ev, _ = evidence("user-early-stop-local")
    v = C.different_collectives(ev)
    assert "Rank 0 was still in the loop at line 109 (`for epoch in range(args.epochs)`, in <module>) that rank 1 " \
        "had left" in v.reason, v.reason
    assert v.culprit == 1 and ev.odd_one_out == (1, "[rank 1] val_acc 0.935 >= target 0.9, stopping early"), v
    source = ev.sources[ev.by_rank[0].where.user.file]
    assert C.loop_left(source, 116, 145) == (109, "for epoch in range(args.epochs)")
    assert C.loop_left(source, 145, 116) is None and C.loop_left(source, 116, 117) is None


def test_a_bare_stopiteration_is_the_ranks_own_error():
    # stream_lm.py: rank 1's next(data_iter) raises StopIteration with no message; read as "exited with code 1" it
    # had made the run a killed rank
    ev, _ = evidence("user-stopiteration")
    v = C.crashed(ev)
    assert v.culprit == 1 and v.failure.value == "rank_error" and "raised StopIteration at stream_lm.py:127" in v.reason
    assert ev.by_rank[1].raised_at_end()  # its log ends with the bare exception line (no ": message")


@pytest.mark.parametrize("name, odd", [
    ("user-swallowed-error", (1, "skipping batch at step 6 (IndexError: index out of range in self)")),
    ("user-nan-break", (1, "[rank 1] non-finite loss at epoch 0 step 10, stopping training")),
    ("user-resume-fallback", (0, "but found no rng_state_rank0.pt; epoch counter starts at 0")),
    # rank 1 logged nothing of its own: a script that logs on rank 0 only gives nothing to compare with
    ("user-dtype-mismatch", None),
    # each rank logs its own epochs and losses (other numbers, other rank names): nothing set apart
    ("user-abort-after-destroy", None),
    # both ranks print the same C++ stack of a store timeout: no script line, and the same on both
    ("user-own-ports", None),
])
def test_the_one_rank_whose_log_says_it_took_its_own_path(name, odd):
    ev, _ = evidence(name)
    found = ev.odd_one_out
    assert (found is None) if odd is None else (found[0] == odd[0] and found[1].endswith(odd[1])), found


def test_a_ranks_own_lines_end_where_its_failure_begins():
    ev, _ = evidence("wrong-port")
    lines = ev.by_rank[1].own_lines()
    assert lines[-1] == "[vm:1] fault: MASTER_PORT 33801 -> 45875 (nothing listens there)", lines  # C++ stack left out
    ev, _ = evidence("user-resume-fallback")
    assert not any("Warning" in ln or "sched.step()" in ln for v in ev.views for ln in v.own_lines())  # warnings module


def test_a_rank_still_in_a_loop_its_peer_had_left_is_said_and_nobody_named():
    # metric_keys.py (sixth set): only rank 1's metrics dict has a key for truncated batches, so rank 1 is still in
    # reduce_metrics' loop over the keys (one all_reduce more) when rank 0 has gone on to the next batch: the loop is
    # in a function only rank 1 is in
    ev, _ = evidence("user-extra-key")
    assert ev.past_loop(ev.positions) == (1, 0, 101, "for name in sorted(metrics)", "reduce_metrics")
    # housing_regression.py: rank 0 has one batch more; rank 1, aborted by gloo in the evaluation after the loop, is
    # placed by faulthandler's dump (it raised nothing)
    ev, _ = evidence("user-uneven-abort")
    assert ev.by_rank[1].traceback is None and ev.positions[1].user.func == "<module>"
    inside, past, line, header, func = ev.past_loop(ev.positions)
    assert (inside, past, func) == (0, 1, "<module>") and header.startswith("for start in range(0, len(X)")
    # which of the two is at fault the loop cannot tell (on the seventh set, written after this rule, naming the rank
    # inside was wrong twice: a rank resumed at a later epoch, per-rank subsets of different sizes): nobody is named
    v = C.size_mismatch(ev)
    assert v.culprit is None and "Rank 0 was still in the loop at line" in v.reason and "rank 1 fewer" in v.reason, v


def test_a_loop_settles_nothing_when_the_rank_past_it_waits_in_a_conditional_call():
    # seq2seq_callbacks.py (second set): ModelCheckpoint calls dist.barrier() only `if ... and is_best:`, on each
    # rank's own validation loss: rank 0 waits in it while rank 1 is in the next epoch's batch loop. Rank 1 is "still
    # in a loop rank 0 had left" only because rank 0 made a call rank 1 skipped: nobody is named
    ev, _ = evidence("user-best-barrier")
    assert ev.odd_one_out is None and ev.past_loop(ev.positions) is None
    v = C.different_collectives(ev)
    assert v.culprit is None and "on_epoch_end" in v.reason, v
    # what it does say: rank 0's barrier is under a condition rank 1 was not in
    assert "Rank 0's call is under `if (epoch + 1) % self.save_every == 0 and is_best` (line 64" in v.reason, v


def test_a_call_under_a_condition_its_peer_was_not_in_is_said_and_names_nobody():
    # train_lm_tokens.py (seventh set): evaluate() runs when the rank's own token count crosses a mark; rank 1's count
    # crossed it first, so it reduced two floats while rank 0 was in the next batch's gradient all_reduce. Which rank
    # is "wrong" the condition cannot tell (the is_best barrier above is the same shape, and its writer named nobody)
    ev, _ = evidence("user-eval-tokens")
    assert ev.past_loop(ev.positions) is None
    inside, past, line, header, func = ev.branch_apart(ev.positions)
    assert (inside, past, line, func) == (1, 0, 145, "train") and header == "if self.tokens_seen >= self.next_eval"
    v = C.size_mismatch(ev)
    assert v.culprit is None and "under `if self.tokens_seen >= self.next_eval` (line 145" in v.reason, v
    # a rank whose line sits in the same branch as its peer's is not apart: the branch must hold one rank only
    assert ev.branch_apart({0: ev.positions[1], 1: ev.positions[1]}) is None


@pytest.mark.parametrize("name", sorted(n for n in DECIDED_BY if "exitcode" in (RUNS / n / "torchrun.log").read_text()))
def test_exit_records_read_from_torchruns_failure_report_match_the_shims(name):
    # what `doctor DIR --launcher-log` has instead of the workbook's exit records: torchrun's ChildFailedError report
    ev, _ = evidence(name)
    found = C.exit_records(ev.torchrun_log)
    assert found, name
    for r, rec in found.items():
        shim = ev.by_rank[r].record
        if rec.get("stop_signal"):  # torchrun stopped the rank's shim; the rank itself may have been ending already
            assert rec["signal"] == "SIGTERM" and shim["returncode"] != 0, (r, rec, shim)
            continue
        assert rec["returncode"] == shim["returncode"] and rec.get("signal") == shim.get("signal"), (r, rec, shim)


def test_a_rank_stopped_while_shutting_down_after_its_script_had_finished():
    ev, _ = evidence("user-uneven-finished-stopped")
    done = ev.by_rank[0]
    assert done.record["stop_signal"] == "SIGTERM" and done.record["returncode"] == -15 and done.finished()
    # stopped ranks that had not finished: waiting in a collective (frames in the dump), or dying of an error of
    # their own or a lost peer (no frame left, but a traceback in the log)
    # (in exit-abort and user-exit-segv every rank had run its script to the end: the stopped one had finished too)
    # (in user-exit-thread both ranks had ended their script and Python waited at exit for a thread of theirs)
    finished_too = [("user-uneven-finished-stopped", 0), ("exit-abort", 1), ("user-exit-segv", 0),
                    ("user-exit-thread", 0), ("user-exit-thread", 1)]
    stopped = [(name, v) for name in sorted(DECIDED_BY) for v in evidence(name)[0].views
               if v.record.get("stop_signal") and v.stack]
    assert len(stopped) > 20
    assert sorted((name, v.rank) for name, v in stopped if v.finished()) == sorted(finished_too)


def test_ddps_reducer_error_on_every_rank_gets_the_advice_for_parameters_without_gradients():
    # freeze_schedule.py (eighth set): a callback calls requires_grad_(False) on layers after DDP wrapped the model;
    # every rank raises "Expected to have finished reduction in the prior iteration". The run is a collective mismatch
    # (as the corpus's threads with that error are labelled), and its advice says what this error needs
    from nbhelpers.diagnosis.categories import run_failure
    from nbhelpers.diagnosis.classify import classify_logs

    ev, meta = evidence("user-freeze-after-wrap")
    v = C.find_culprit(ev.views, ev.status, torchrun_log=ev.torchrun_log, sources=ev.sources, record=ev.record)
    found = classify_logs({r.rank: r.log for r in ev.views}, ev.torchrun_log)
    failure = run_failure(v.failure, found[0].failure)
    assert v.culprit is None and failure.value == "collective_mismatch" == meta["category"]
    assert any("requires_grad_(False)" in a and "find_unused_parameters=True" in a for a in advice(v.kind, failure))


def test_a_store_key_of_the_scripts_own_is_no_ranks_key():
    # a process group's key of a rank (gloo: /default_pg/0//cpu//0/1) names the rank waited for; a key the script
    # set itself, even one ending in a number (.../epoch_sync/gate/1, epoch 1's gate), does not
    gloo = "torch.distributed.DistStoreError: wait timeout after 10000ms, keys: /default_pg/0//cpu//0/1"
    assert C.store_key_ranks(gloo) == {1} and C.user_store_keys(gloo) == []
    ev, _ = evidence("user-store-gate")
    errors = [v.error for v in ev.views]
    assert all("/default_pg/0//epoch_sync/gate/1" in e for e in errors), errors
    assert all(C.store_key_ranks(e) == set() and C.user_store_keys(e) == ["/default_pg/0//epoch_sync/gate/1"]
               for e in errors)
    assert C.wrong_world(ev) is None and C.named(ev) is None
    v = C.key_never_set(ev)
    assert v.culprit is None and "no rank set it" in v.reason, v


def test_the_one_rank_that_never_waited_for_the_scripts_store_key_is_named():
    # vocab_cache_trainer.py (ninth set): rank 0 loads a cached vocabulary and returns before store.set("vocab");
    # rank 1 times out in store.get while rank 0 is in DDP's constructor, where it loses rank 1
    ev, _ = evidence("user-store-key")
    assert C.user_store_keys(ev.by_rank[1].error) == ["/default_pg/0//vocab"] and not C.user_store_keys(ev.by_rank[0].error)
    v = C.key_never_set(ev)
    assert v.culprit == 0 and "`/default_pg/0//vocab`" in v.reason and "vocab_cache_trainer.py:" in v.reason, v
    # and the log classifier calls it the store's timeout, not a killed worker: rank 0's lost peer follows from it
    from nbhelpers.diagnosis.classify import classify_logs
    assert classify_logs({v.rank: v.log for v in ev.views}, ev.torchrun_log)[0].category == "rendezvous_timeout"


def test_a_collective_in_a_custom_autograd_functions_backward_that_a_peer_never_reached_is_said():
    # supcon_pretrain.py (tenth set): GatherLayer(torch.autograd.Function) all_reduces in its backward; rank 1's loss
    # leaves the contrastive term out when its batch has fewer than 2 labelled rows, so its backward (DDP's
    # all_reduce) never reaches that call. Both ranks sit at the same loss.backward() line: no branch, no loop tells
    ev, _ = evidence("user-autograd-collective")
    where = {v.rank: v.where for v in ev.views}
    assert ev.past_loop(where) is None and ev.branch_apart(where) is None
    assert ev.in_autograd(where) == (0, 1, 48, "class GatherLayer(torch.autograd.Function)")
    v = C.different_collectives(ev)
    assert v.culprit is None and "backward of `class GatherLayer(torch.autograd.Function)` (line 48)" in v.reason, v
    # a backward of a plain class (not an autograd Function) is not one
    assert C.enclosing_class("class Head(nn.Module):\n    def backward(self, g):\n        return g\n", 3) == (
        1, "class Head(nn.Module)") and not C.AUTOGRAD_FUNCTION.match("class Head(nn.Module)")


def test_a_rank_that_alone_resumed_under_a_rank_condition_is_named():
    # train_resume.py (seventh set): only the master loads the checkpoint ("resumed from ... at epoch 4", under
    # `if args.resume and is_master and os.path.exists(ckpt_path):`), so rank 0 runs epochs 4-5 and waits in the final
    # barrier while rank 1, from epoch 0, is still in the epoch loop. The loop alone would name nobody; the resume
    # under a rank condition names rank 0, and the reason quotes its line and the condition
    ev, _ = evidence("user-resume-master-only")
    inside, past, *_ = ev.past_loop(ev.positions)
    assert (inside, past) == (1, 0)
    r, said, line, cond = ev.resumed_alone
    assert (r, line) == (0, 68) and said.startswith("resumed from") and "is_master" in cond
    v = C.find_culprit(ev.views, ev.status, torchrun_log=ev.torchrun_log, sources=ev.sources, record=ev.record)
    assert v.culprit == 0 and "Rank 0 had logged `resumed from" in v.reason and "at epoch 4" in v.reason, v
    assert "only rank 0 resumed" in v.reason and "is_master" in v.reason
    # a resume every rank does, logged on rank 0 only, is not this: the load must sit under the condition too
    source = ev.sources[ev.script()].replace("    ckpt = torch.load(", "    ckpt = torch_load(").replace(
        "    model.load_state_dict(", "    model.set_state(").replace("    optimizer.load_state_dict(", "    optimizer.set(")
    assert C.Evidence(ev.views, ev.status, None, ev.torchrun_log, {**ev.sources, ev.script(): source}).resumed_alone is None


def test_a_port_every_rank_of_a_host_binds_in_the_users_code_is_a_race_not_a_rank():
    # trainer_callbacks.py (second set): LiveMetricsServer binds 0.0.0.0:9187 on every rank (no rank guard); the
    # writer's three runs lost the race on rank 0, the recorded one on rank 1
    import copy


    ev, _ = evidence("user-port-race")
    v = C.race(ev)
    assert v.culprit is None and v.failure.value == "port_in_use" and "trainer_callbacks.py:55" in v.reason, v
    assert "LOCAL_RANK" in " ".join(advice(v.kind, v.failure))
    # ranks on two hosts do not race for one port: the rank that could not bind is named as crashed
    views = copy.deepcopy(ev.views)
    views[0].record["host"] = "node-a"
    other = C.Evidence(views, ev.status, None, ev.torchrun_log, ev.sources)
    assert C.race(other) is None and C.crashed(other).culprit is not None


def test_a_folder_every_rank_creates_without_exist_ok_is_a_race_too():
    # seq_trainer.py (eleventh set): Trainer.__init__ runs os.makedirs(run_dir) on every rank, without exist_ok; the
    # writer's runs lost it on ranks 1, 0, 1
    ev, _ = evidence("user-makedirs-race")
    v = C.race(ev)
    assert v.culprit is None and v.failure.value == "rank_error" and "FileExistsError" in v.reason, v
    assert "seq_trainer.py:" in v.reason and "create a file or folder that already existed" in v.reason


def test_a_function_that_returns_early_on_other_ranks_is_rank_conditional():
    # ckpt_symlink.py (fourth set): save_checkpoint starts `if not self.is_main: return`, and its os.symlink over
    # best.pt fails on rank 0 alone, at its second best epoch: a FileExistsError of one rank's own, not a race
    root = Path(__file__).resolve().parent
    symlink = (root / "userscripts_heldout4" / "ckpt_symlink.py").read_text()
    assert C.returns_unless_rank(symlink, 150)
    # seq_trainer.py (eleventh set): os.makedirs in Trainer.__init__, which every rank runs: no guard before it
    assert not C.returns_unless_rank((root / "userscripts_heldout11" / "seq_trainer.py").read_text(), 60)
    # the rank is what the documented API returns, followed through the file: never a variable's name
    made = "r = dist.get_rank()\n\ndef f():\n    if r != 0:\n        return\n    os.makedirs('x')\n"
    assert C.returns_unless_rank(made, 6)
    assert not C.returns_unless_rank(made.replace("return", "log()"), 6)
    assert not C.returns_unless_rank(made.replace("r = dist.get_rank()", "r = load_setting()"), 6)
    assert not C.returns_unless_rank("def f(rank):\n    if rank != 0:\n        return\n    os.makedirs('x')\n", 4)


def test_a_timeout_under_a_second_is_the_fault_not_the_rank_still_busy():
    # cls_objsync.py (twelfth set): the gloo group for objects gets timedelta(milliseconds=300) where the argument
    # means seconds; rank 1 gives up in broadcast_object_list while rank 0 is still building its vocabulary
    ev, _ = evidence("user-short-timeout")
    v = C.short_timeout(ev)
    assert v.culprit is None and "300 ms" in v.reason and "in build_vocab" in v.reason, v  # where rank 0 was
    assert "wrong unit" in v.reason and "longer timeout is the fix" in advice(v.kind, "collective_timeout")[0]
    # the workbook's own hang demonstrations time out after 3 s: a rank late for those is still named
    assert all(C.short_timeout(evidence(n)[0]) is None for n in ("stall", "user-loader-hang", "user-busy-rank"))


def test_a_pasted_log_that_gave_up_within_a_second_gets_the_same_advice_first():
    # the same run's output pasted into doctor: one verdict, one remedy table
    from nbhelpers.runtime.learned import classify

    ev, _ = evidence("user-short-timeout")
    pasted = classify("\n".join(v.log for v in ev.views))[0]
    assert pasted.category == "collective_timeout" and pasted.short_timeout_ms == 300
    assert pasted.remedies[0] == advice(C.short_timeout(ev).kind, None)[0]
    stall = classify("\n".join(v.log for v in evidence("stall")[0].views))[0]  # 3 s: the usual advice
    assert stall.short_timeout_ms is None and "longer timeout is the fix" not in " ".join(stall.remedies)


def test_ranks_that_resumed_at_different_points_name_the_one_that_resumed_apart():
    # resume_latest.py (fourteenth set): each rank resumes from its own newest snapshot; rank 1's step-2400 file is
    # torn, so it resumes at 2200 while rank 0 resumes at 2400, and gloo aborts rank 0 on the sizes at step 2500
    ev, _ = evidence("user-resume-apart")
    r, mine, theirs = ev.resumed_apart
    assert r == 1 and "at step 2200" in mine and "at step 2400" in theirs
    v = C.size_mismatch(ev)
    assert v.culprit == 1 and "resumed at different points" in v.reason and "earlier point" in v.reason, v
    # a rank that resumed where its peer logged no resume at all is not this (master-only resume: rank 0 alone)
    assert evidence("user-resume-master-only")[0].resumed_apart is None


def test_each_rule_concludes_with_a_rule_name_of_its_own():
    """The JSON's culprit_kind says which rule decided: every function in RULES names one Rule member in its verdicts,
    and no two functions share one."""
    import inspect
    import re

    used = {r.__name__: set(re.findall(r"Rule\.([A-Z_]+)", inspect.getsource(r))) for r in C.RULES}
    assert {name: ms for name, ms in used.items() if len(ms) != 1} == {}
    members = [ms.pop() for ms in used.values()]
    assert len(members) == len(set(members)), members
    assert set(members) <= {m.name for m in Rule}


def test_a_dataloader_workers_reset_connection_is_not_a_lost_peer():
    """Real text (tests/data/logs/loader_worker_fd_reset.rank1.log): the rank's own DataLoader worker died while handing
    a batch over by file descriptor; "Connection reset by peer" there is not gloo's peer gone, so the rank died of its
    own trouble and is named."""
    log = (Path(__file__).parent / "data" / "logs" / "loader_worker_fd_reset.rank1.log").read_text()
    v = C.RankView(1, log=log, record={"returncode": 1, "python_exit": 1})
    assert "Connection reset by peer" in log and not v.lost_peer() and v.crashed
    peer = C.RankView(0, log="RuntimeError: [../gloo/transport/tcp/pair.cc:598] Connection reset by peer [127.0.0.1]:1")
    assert peer.lost_peer()
    assert C.find_culprit([C.RankView(0, log=peer.log, record={"returncode": -15, "stop_signal": "SIGTERM"}), v],
                          "failed").culprit == 1
    # the same death with the traceback whole, ending in ConnectionResetError (both ranks' logs of that run)
    logs = {r: (Path(__file__).parent / "data" / "logs" / f"loader_worker_fd_reset2.rank{r}.log").read_text()
            for r in (0, 1)}
    views = [C.RankView(0, log=logs[0], record={"returncode": 1, "python_exit": 1}),
             C.RankView(1, log=logs[1], record={"returncode": 1, "python_exit": 1})]
    assert views[1].error.startswith("ConnectionResetError") and not views[1].victim() and views[0].victim()
    v = C.find_culprit(views, "failed")
    assert v.culprit == 1 and "ConnectionResetError" in v.reason, v
    # and with nothing printed but CPython's dump of the exception it could not print ("lost sys.stderr")
    lost = (Path(__file__).parent / "data" / "logs" / "loader_worker_lost_stderr.rank1.log").read_text()
    views[1] = C.RankView(1, log=lost, record={"returncode": 1, "python_exit": 1})
    assert "lost sys.stderr" in lost and not views[1].lost_peer() and not views[1].victim()
    assert C.find_culprit(views, "failed").culprit == 1


def test_sigbus_on_a_rewritten_mapped_file_names_the_rewriter_at_its_line_and_the_victims_read():
    # faulthandler lists the rank shim's own thread before the thread that died: the victim's position is the latter
    for name, victim, read in (("user-mapped-rewrite", 0, "memmap_ngram_lm.py:71 in window_batches"),
                               ("user-mapped-rewrite-fabric", 1, "fabric_charlm_memmap.py:92 in <listcomp>")):
        ev, _ = evidence(name)
        assert "Thread 0x" in ev.by_rank[victim].log.split("Current thread", 1)[0]
        assert ev.by_rank[victim].position.describe() == f"at {read}", ev.by_rank[victim].position
        v = C.mapped_file_shrunk(ev)
        assert v.culprit == 1 - victim and f"killed by SIGBUS at {read}" in v.reason and 'mode="w+"' in v.where, v
        assert any("man7.org" in e for e in v.evidence) and advice(v.kind, "worker_killed") == list(REMEDIES[v.kind])


def test_a_rank_its_own_faulthandler_watchdog_stopped_was_waiting_not_crashed():
    # trainer_skip_empty_batch (third framework set): faulthandler.dump_traceback_later(60, exit=True) on every rank;
    # rank 1 skipped a step's backward, and after 60 s each rank's watchdog printed "Timeout (0:01:00)!", every
    # thread's stack, and exited 1: two ranks waiting in different collectives, not two crashes
    ev, _ = evidence("user-own-watchdog")
    for v in ev.views:
        assert v.record["returncode"] == 1 and v.own_watchdog_dump() and not v.crashed, v.record
    assert ev.by_rank[0].where.collective == "backward (DDP's gradient all_reduce)"
    assert ev.by_rank[1].where.collective == "all_gather" and "_get_num_items_in_batch" in str(ev.by_rank[1].where.frames)
    v = C.find_culprit(ev.views, ev.status, torchrun_log=ev.torchrun_log, sources=ev.sources, record=ev.record)
    assert v.culprit == 1 and v.kind is Rule.DIFFERENT_COLLECTIVES, v
    # an exception of the rank's own after such a dump is still its own failure
    one = ev.by_rank[0]
    raised = C.RankView(0, one.events, one.record, one.log + "\nTraceback (most recent call last):\nValueError: x\n")
    assert raised.own_watchdog_dump() is None and raised.crashed


def test_a_rank_whose_script_ended_well_and_torchrun_stopped_in_shutdown_did_not_crash():
    # exit_abort: rank 0 aborts at exit; torchrun's SIGTERM can reach rank 1 so late in its own shutdown that
    # faulthandler is gone (no stack dump, so no stop_signal): its exit record still says its script ended with 0
    ev, _ = evidence("exit-abort")
    one = ev.by_rank[1]
    late = {k: v for k, v in one.record.items() if k not in ("stop_signal", "stop_time", "stack_file")}
    late.update(returncode=-15, signal="SIGTERM", python_exit=0)
    assert not C.RankView(1, one.events, late, one.log, "").crashed
    assert C.RankView(1, one.events, {**late, "python_exit": 1}, one.log, "").crashed  # it had failed itself

