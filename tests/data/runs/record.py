"""Record the evidence that tests/test_culprit.py feeds to each culprit rule, from real runs.

    .venv/bin/python tests/data/runs/record.py [NAME ...]

Each run below is started for real through the workbook's launcher (torchrun, gloo, 2 or 3 ranks on
this CPU); what its ranks left (rank logs with their events, exit records, stack dumps, torchrun's
log) is copied into tests/data/runs/<NAME>/ with a ``run.json`` saying how it was made and what the
verdict was then.  Nothing here is typed by hand: rerun it to refresh the fixtures.
"""
from __future__ import annotations

import contextlib
import json
import platform
import re
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from nbhelpers.runtime.launcher import launch  # noqa: E402


def probe(fault, **kw):
    from nbhelpers.scenarios.probe import probe as run_probe

    return lambda: run_probe(2, timeout=3.0, size_mb=2.0, fault=fault, live=False, **kw)


def user(script, *args, folder="examples/faulty", timeout=120):
    """A realistic training script of examples/faulty (see its FAULTS.md), or of another set of them, supervised as
    a user would (``timeout``: run's own, for a job that does not end by itself)."""
    from nbhelpers.scenarios.supervise import example, supervise

    FOLDERS[script] = folder

    def run():
        path = example(script, TMP / script, HERE.parents[2] / folder)
        with contextlib.chdir(path.parent):  # as a user starts it: from its folder (its data/ is relative)
            return supervise(str(path), list(args), nproc=2, timeout=timeout, live=False)
    return run


FOLDERS: dict[str, str] = {}  # script -> the folder of its set, as the tests find it


def desync(name, nproc):
    from nbhelpers.scenarios.desync import desync_scenario

    return lambda: desync_scenario(name, nproc=nproc, timeout=3.0, live=False)


RUNS = {
    "healthy": (probe(None), "the staged probe on 2 ranks, no fault"),
    "stall": (probe("stall", stall=20.0), "probe: rank 1 sleeps 20 s before the large all_reduce (pg timeout 3 s)"),
    "never-join": (probe("never-join", stall=20.0), "probe: rank 1 never calls init_process_group"),
    "exit": (probe("exit"), "probe: rank 1 exits (code 3) before the large all_reduce"),
    "wrong-port": (probe("wrong-port"), "probe: rank 1 connects to a closed port"),
    "mismatch": (probe("mismatch"), "probe: rank 1 sends a tensor of another size (no DETAIL): gloo aborts"),
    "desync-skip-3": (desync("skip", 3), "3 ranks: rank 1 skips one all_reduce"),
    "desync-shape-2": (desync("shape", 2), "2 ranks: rank 1 all_reduces a tensor of another shape"),
    "exit-abort": (lambda: launch("exit_abort", nproc=2, timeout=60, live=False),
                   "rank 0 ends with an undrained async all_reduce and no destroy_process_group"),
    "rank0-collective": (lambda: __import__("nbhelpers.scenarios.ckptrace", fromlist=["x"]).rank0_collective(
        timeout=3.0, live=False), "rank 0 calls broadcast inside `if rank == 0:`; rank 1 goes on to all_reduce"),
    "user-valueerror": (user("train_label_check"), "collate raises ValueError on a label only rank 1's shard has"),
    "user-oom-allgather": (user("train_eval_gather"), "rank 1 runs out of memory inside dist.all_gather"),
    "user-uneven": (user("train_manual_shard"), "hand sharding gives rank 1 one batch more per epoch, no join()"),
    "user-wrong-world": (user("train_resume_state"), "rank 1 passes world_size=3 from a stale state file"),
    "user-bcast-rank0": (user("train_finetune"), "dist.broadcast inside `if self.global_rank == 0:`"),
    "user-order-swapped": (user("train_early_stop"), "broadcast/all_reduce order differs in an is_main_process() branch"),
    "user-detail-segfault": (user("train_debug_detail"), "TORCH_DISTRIBUTED_DEBUG=DETAIL with DDP on gloo"),
    "user-loader-hang": (user("train_sharded_files"), "rank 1's DataLoader worker waits for a shard never written"),
    "user-sigkill": (user("train_cached_features"), "rank 1 SIGKILLed mid-epoch by a memory guard"),
    "user-flock-barrier": (user("train_token_cache"), "dist.barrier() inside an fcntl file lock"),
    "user-busy-rank": (user("recsys_twotower", folder="tests/userscripts_heldout2"),
                       "rank 1 builds its shard's stats cache in pure Python (~25 s) before its first all_reduce"),
    "user-ddp-shapes": (user("train_intent_lightning", folder="tests/userscripts_heldout2"),
                        "each rank builds its vocabulary from its own shard: DDP's constructor sees other shapes"),
    "user-worker-error": (user("imgcls_packfile", folder="tests/userscripts_heldout2"),
                          "a DataLoader worker of rank 1 fails to decompress a corrupt sample only rank 1 reads"),
    "user-same-checkpoint": (user("tabular_trainer", folder="tests/userscripts_heldout3"),
                             "both ranks resume from the same checkpoint, cut short by a pre-empted save"),
    "user-dtype-mismatch": (user("lit_shards", folder="tests/userscripts_heldout3"),
                            "rank 1 has no validation shard: its metric tensor is int64, rank 0's float32"),
    "user-eval-ddp-rank0": (user("shapes_trainer", folder="tests/userscripts_heldout4"),
                            "rank 0 validates through the DDP wrapper (a buffer broadcast) under `if self.is_main:`"),
    "user-own-ports": (user("intent_clf", folder="tests/userscripts_heldout4"),
                       "each rank picks its own free port for init_method=tcp://: nobody hosts a store they share"),
    "user-early-stop-local": (user("sensor_defects", folder="tests/userscripts_heldout4"),
                              "rank 1 reaches its own target accuracy, breaks out of the epoch loop, waits at the end"),
    "user-stopiteration": (user("stream_lm", folder="tests/userscripts_heldout5"),
                           "rank 1's shards run out before the steps computed from the whole manifest: StopIteration"),
    "user-swallowed-error": (user("lit_ema", folder="tests/userscripts_heldout5"),
                             "rank 1 swallows an IndexError and skips a backward: gloo aborts on the sizes"),
    "user-resume-fallback": (user("resume_ema_lit", folder="tests/userscripts_heldout5"),
                             "rank 0 finds no rng state of its own and restarts at epoch 0; rank 1 resumes at epoch 4"),
    "user-nan-break": (user("train_regression", folder="tests/userscripts_heldout2"),
                       "rank 1 breaks out of training on a NaN loss and goes on to a final all_reduce"),
    "user-extra-key": (user("metric_keys", folder="tests/userscripts_heldout6"),
                       "only rank 1's metrics have a key for truncated batches: one all_reduce more in its loop over keys"),
    "user-uneven-abort": (user("housing_regression", folder="tests/userscripts_heldout"),
                          "rank 0 has one batch more; rank 1, in the final evaluation, aborts on gloo's sizes"),
    "user-own-rank-zero": (user("train_regressor", folder="tests/userscripts_heldout7"),
                           "init_process_group(rank=args.rank) with --rank left at 0: both processes join as rank 0"),
    "user-best-barrier": (user("seq2seq_callbacks", folder="tests/userscripts_heldout2"),
                          "dist.barrier() only when a rank's own validation loss improved: rank 0 alone in it"),
    "user-eval-tokens": (user("train_lm_tokens", folder="tests/userscripts_heldout7"),
                         "evaluation when a rank's own token count crosses a mark: rank 1 evaluates while rank 0 trains"),
    "user-freeze-after-wrap": (user("freeze_schedule", folder="tests/userscripts_heldout8"),
                               "a callback freezes layers after DDP wrapped the model: DDP's reducer error on every rank"),
    "user-store-key": (user("vocab_cache_trainer", folder="tests/userscripts_heldout9"),
                       "rank 0 finds a cached vocabulary and never sets the store key rank 1 waits for"),
    "user-store-gate": (user("store_epoch_sync", folder="tests/userscripts_heldout9"),
                        "a hand-made epoch gate on the store, its counter never reset: every rank waits for epoch 1's key"),
    "user-autograd-collective": (user("supcon_pretrain", folder="tests/userscripts_heldout10"),
                                 "a custom autograd Function all_reduces in backward; rank 1's loss leaves its term out"),
    "user-resume-master-only": (user("train_resume", folder="tests/userscripts_heldout7"),
                                "only rank 0 loads the checkpoint and starts at epoch 4; rank 1 starts at epoch 0"),
    "user-port-race": (user("trainer_callbacks", folder="tests/userscripts_heldout2"),
                       "a metrics HTTP server on a fixed port, started on every rank: the second bind fails"),
    "user-makedirs-race": (user("seq_trainer", folder="tests/userscripts_heldout11"),
                           "os.makedirs(run_dir) without exist_ok on every rank: the second one raises FileExistsError"),
    "user-short-timeout": (user("cls_objsync", folder="tests/userscripts_heldout12"),
                           "a gloo group for objects made with timedelta(milliseconds=300) where 300 s was meant"),
    "user-export-guard": (user("export_model", folder="tests/userscripts_heldout13"),
                          "torch.export on rank 0 fails on a data-dependent branch (GuardOnDataDependentSymNode)"),
    "user-resume-apart": (user("resume_latest", folder="tests/userscripts_heldout14"),
                          "each rank resumes from its own latest snapshot; rank 1's newest is torn, so it resumes earlier"),
    "user-skipped-gather": (user("multitask_load_forecast", folder="tests/userscripts_heldout17"),
                            "rank 1 returns early from finish() and skips the final all_gather_object on a subgroup"),
    "user-mapped-rewrite": (user("memmap_ngram_lm", folder="tests/userscripts_heldout17"),
                            "rank 1 rewrites a memory-mapped token cache shorter (np.memmap mode w+); rank 0 dies of SIGBUS"),
    "user-mapped-rewrite-fabric": (user("fabric_charlm_memmap", folder="tests/userscripts_frameworks2"),
                                   "Fabric: rank 0 rebuilds train.bin smaller each epoch; rank 1 dies of SIGBUS"),
    "user-world-from-config": (user("accel_env_config_world_size", folder="tests/userscripts_frameworks3"),
                               "accelerate: the run config exports WORLD_SIZE=4 on every rank of a 2-rank job"),
    "user-own-watchdog": (user("trainer_skip_empty_batch", folder="tests/userscripts_frameworks3"),
                          "HF Trainer: rank 1 skips a step's backward; both ranks' own faulthandler watchdog "
                          "(dump_traceback_later(60, exit=True)) stops them, each in a different collective"),
    "user-left-loop": (user("acc_credit_early_stop", folder="tests/userscripts_frameworks2"),
                       "accelerate: rank 1 stops early on its own loss and waits in the final barrier; rank 0 trains on"),
    "user-predict-guard": (user("hf_review_gpt2_cls", folder="tests/userscripts_frameworks4"),
                           "HF Trainer: a callback returns early unless state.is_world_process_zero, then calls "
                           "trainer.predict() (it gathers): gloo aborts a rank on the sizes"),
    "user-metric-rank-zero": (user("pl_wafer_defects", folder="tests/userscripts_frameworks4"),
                              "Lightning: a @rank_zero_only callback calls a torchmetrics metric's compute() (it syncs)"),
    "user-mapped-save": (user("acc_vibration_cnn", folder="tests/userscripts_frameworks4"),
                         "accelerate: rank 0 np.save()s the cache rank 1 has np.load(mmap_mode='r')-ed, shorter; "
                         "rank 1 dies of SIGBUS"),
    "user-pipe-skip": (user("b_pipe_semisup", folder="tests/userscripts_heldout19"),
                       "a 2-stage pipeline over batch_isend_irecv: stage 1 `continue`s past a batch with no usable "
                       "rows without sending the gradient back; both ranks wait to receive"),
    "user-helper-rank-dcp": (user("a_tabular_fsdp_best", folder="tests/userscripts_heldout19"),
                             "FSDP2: dcp.save inside a method called under `if rank == 0:`, the rank from a helper "
                             "module's setup(); gloo aborts a rank on the sizes"),
    "user-super-evaluate": (user("f_trainer_focal", folder="tests/userscripts_frameworks5"),
                            "HF Trainer subclass: evaluate() returns {} unless is_world_process_zero(), then "
                            "super().evaluate(); rank 0 gathers alone"),
    "user-project-metric": (user("p_diabetes_regressor", folder="tests/userscripts_heldout20"),
                            "a @rank_zero_only report calls compute() of a metric class in the project's own "
                            "mlcore/metrics.py, which all_reduces; rank 1 waits in the final barrier"),
    "user-int-recall": (user("f_lit_pairs", folder="tests/userscripts_frameworks5"),
                        "Lightning: `tp / pos if pos else 0` per batch; rank 1 has no positives, so torch.tensor of "
                        "its recalls is int64 where rank 0's is float32; gloo aborts rank 0 in the all_gather"),
    "user-empty-domain": (user("p_contrastive_domains", folder="tests/userscripts_heldout20"),
                          "a per-domain loss tracker of the project's own returns torch.zeros(2) (float32) for an "
                          "empty domain, float64 from numpy otherwise; rank 0 has no rows of one domain"),
    "user-early-stop-exit": (user("f_acc_tabular", folder="tests/userscripts_frameworks5"),
                             "accelerate: an early stop on each rank's own dev accuracy; rank 0 breaks, saves and "
                             "exits while rank 1 starts another epoch (its DataLoader's broadcast)"),
    "user-exit-thread": (user("train_uploader", folder="tests/data/exithang", timeout=30),
                         "every rank's checkpoint uploader thread (not a daemon) waits on its queue forever: Python "
                         "waits for it at exit, on every rank"),
    "user-exit-del": (user("train_writer_del", folder="tests/data/exithang", timeout=30),
                      "rank 0's metrics writer joins its thread in __del__ when main() returns; the thread waits on "
                      "its queue forever; rank 1 exits"),
}
TMP: Path  # where the user scripts run from, made in __main__ and removed when recording ends


def record(name: str) -> None:
    make, what = RUNS[name]
    res = make()
    out = HERE / name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    for f in res.log_dir.iterdir():
        if f.name.startswith("rank") or f.name == "torchrun.log":
            shutil.copy(f, out / f.name)
    if any((res.log_dir / "fr").glob("rank*.pkl")):  # the ranks' collective records (the rank shim's)
        (out / "fr").mkdir()
        for f in (res.log_dir / "fr").glob("rank*.pkl"):
            shutil.copy(f, out / "fr" / f.name)
    (out / "run.json").write_text(json.dumps({
        "what": what, "status": res.status, "recorded_verdict": res.verdict.to_dict(), "category": res.category,
        "torch": __import__("torch").__version__, "python": platform.python_version(), "machine": platform.machine(),
    }, indent=1) + "\n")
    if name.startswith("user-"):  # the scripts' paths as the tests find them (examples/faulty, ...)
        for f in (f for f in out.iterdir() if f.is_file()):
            f.write_text(re.sub(re.escape(str(TMP)) + r"/(\w+)", lambda m: FOLDERS[m.group(1)], f.read_text(errors="replace")))
    print(f"{name}: {res.status}, culprit {res.culprit} ({res.verdict.kind}), category {res.category}")


if __name__ == "__main__":
    TMP = Path(tempfile.mkdtemp(prefix="nbh-record-"))
    try:
        for n in sys.argv[1:] or RUNS:
            record(n)
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
