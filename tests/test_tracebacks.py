"""Where a rank was, read from the traceback and the py-spy dump that real runs of users' scripts left."""
from pathlib import Path

from nbhelpers.diagnosis.culprit import enclosing_rank_branch
from nbhelpers.diagnosis.tracebacks import (
    Frame,
    exceptions,
    last_traceback,
    stack_frames,
    where_from,
)

RUNS = Path(__file__).resolve().parent / "data" / "runs"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "faulty"


def log(run: str, rank: int) -> str:
    return (RUNS / run / f"rank{rank}.log").read_text()


def test_a_rank_prefixed_traceback_gives_exception_user_line_and_collective():
    w = last_traceback(log("user-oom-allgather", 1))
    assert w.exc_type == "RuntimeError" and "can't allocate memory" in w.message
    assert w.user.file.endswith("train_eval_gather.py") and w.user.line == 71 and w.user.func == "evaluate"
    assert w.user.code == "dist.all_gather(all_logits, logits)"
    assert w.collective == "all_gather"


def test_an_exception_of_the_users_own_has_no_collective():
    w = last_traceback(log("user-valueerror", 1))
    assert w.exc_type == "ValueError" and w.collective is None
    assert w.user.file.endswith("train_label_check.py") and w.user.func == "collate"


def test_ddps_gradient_all_reduce_and_a_store_wait_are_named():
    assert last_traceback(log("user-uneven", 1)).collective == "backward (DDP's gradient all_reduce)"
    assert last_traceback(log("user-wrong-world", 1)).collective == "init_process_group"


def test_a_py_spy_dump_gives_the_main_threads_user_frame():
    dump = (RUNS / "user-loader-hang" / "rank1.stack.txt").read_text()
    w = stack_frames(dump)
    assert w.source == "stack" and w.collective is None
    assert w.user.file.endswith("train_sharded_files.py") and w.frames[-1].library
    assert where_from(log("user-loader-hang", 1), dump).source == "stack"


def test_py_spys_own_error_is_no_stack():
    assert stack_frames("Error: Failed to find python interpreter\n0: No such file or directory (os error 2)\n") is None
    assert last_traceback("no traceback here\n") is None


def test_library_frames_are_told_from_the_users():
    assert Frame("/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", 1, "f").library
    assert Frame("selectors.py", 415, "select").library and Frame("torch/utils/data/dataloader.py", 1, "f").library
    assert not Frame("train.py", 3, "main").library and not Frame("/home/u/proj/train.py", 3, "main").library


def test_the_rank_branch_around_a_line_is_found_in_real_source():
    finetune = (EXAMPLES / "train_finetune.py").read_text()
    line, cond = enclosing_rank_branch(finetune, 55)
    assert cond == "if self.global_rank == 0" and line == 50
    early = (EXAMPLES / "train_early_stop.py").read_text()
    assert enclosing_rank_branch(early, 52)[1] == "if is_main_process()"
    assert enclosing_rank_branch(early, 56)[1].startswith("else of `if is_main_process()")
    assert enclosing_rank_branch(finetune, 60) is None  # _run_batch: no rank branch


def test_every_traceback_of_interleaved_ranks_is_kept_apart_by_its_prefix():
    r0, r1 = log("user-valueerror", 0).splitlines(), log("user-valueerror", 1).splitlines()
    mixed = [ln for pair in zip(r0, r1) for ln in pair] + r0[len(r1):] + r1[len(r0):]
    found = {rank: (mixed[i], w) for rank, i, w in exceptions("\n".join(mixed))}
    assert set(found) == {0, 1}
    assert found[1][1].exc_type == "ValueError" and found[1][0].startswith("[rank1]: ValueError")
    assert found[1][1].user.func == "collate" and "Connection closed by peer" in found[0][1].message


def test_a_py_spy_dump_of_a_rank_busy_in_python_holding_the_gil_is_read():
    # py-spy marks the thread "(active+gil)" when it is running Python: the rank that is computing, not waiting
    dump = (RUNS / "user-busy-rank" / "rank1.stack.txt").read_text()
    assert '(active+gil): "MainThread"' in dump
    w = stack_frames(dump)
    assert w.collective is None and w.user.func == "build_shard_stats" and w.user.file.endswith("recsys_twotower.py")


def test_a_traceback_closes_with_its_exception_whatever_the_class_is_called():
    # torch.export on rank 0 (thirteenth set's export_model.py): the class ends in neither Error nor Exception
    tb = last_traceback(log("user-export-guard", 0))
    assert tb.exc_type == "torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode"
    assert tb.message.startswith("Could not guard on data-dependent expression") and tb.user.line == 74
    assert [w.exc_type for _, _, w in exceptions(log("user-export-guard", 0))][-1] == tb.exc_type
    # a bare word at the margin is not a class: another process's line printed into the traceback is skipped
    lines = log("user-export-guard", 0).splitlines()
    at = max(i for i, ln in enumerate(lines) if "GuardOnDataDependentSymNode:" in ln)
    assert last_traceback("\n".join(lines[:at] + ["Loss: 0.41"] + lines[at:])).exc_type == tb.exc_type


def test_mp_spawns_bare_exception_wrapper_is_not_the_ranks_error():
    # torch < 1.10's mp.spawn re-raised a rank's error as a bare "Exception: " followed by "-- Process N terminated
    # with the following error:" and that rank's own traceback (real text pasted in lkeab/BCNet#53)
    import json

    corpus = Path(__file__).resolve().parent.parent / "nbhelpers" / "data" / "corpus" / "train.jsonl"
    text = next(r["log"] for r in map(json.loads, corpus.read_text().splitlines()) if r["id"] == "lkeab/BCNet#53")
    assert "\nException: \n" in text
    assert all(w.exc_type != "Exception" for _, _, w in exceptions(text))


def test_every_thread_of_a_py_spy_dump():
    from nbhelpers.diagnosis.tracebacks import spy_threads

    dump = (Path(__file__).parent / "data" / "runs" / "user-exit-thread" / "rank0.stack.txt").read_text()
    threads = dict(spy_threads(dump))
    assert threads["MainThread"][-1].func == "_shutdown"      # Python waits at exit for its threads
    assert [(f.func, f.line) for f in threads["uploader"] if not f.library] == [("_run", 23)]
