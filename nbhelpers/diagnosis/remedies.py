"""What to do: one table for every failure and every culprit rule, and the one function that picks
the advice for a run, so the notebook, the CLI and the report give the same advice for the same run.

Each remedy names the notebook that shows it.  A rule's remedy says what to do about the culprit the
rule named (find out why that rank was late, move the collective out of the branch); a failure's
remedies say what to do about the failure the logs show.
"""
from __future__ import annotations

from nbhelpers.diagnosis.api import Failure, Rule

__all__ = ["COMPLETE", "REMEDIES", "advice"]

START_UP = (
    "A short process-group timeout also bounds init_process_group and the first collectives, so on a slow or busy "
    "machine it strikes during start-up (DistStoreError: wait timeout): start with a long one, and shorten it once "
    "every rank has passed a first barrier (torch.distributed.distributed_c10d._set_pg_timeout), as the workbook's "
    "own demonstrations do.")

REMEDIES: dict[Failure | Rule, tuple[str, ...]] = {
    Failure.RENDEZVOUS_TIMEOUT: (
        "Find the rank that did not join: the store key or 'N/M clients joined' says how many came; its own log and "
        "stack say why (notebook 01, fault 'never-join').",
        "Check that every node uses the same MASTER_ADDR/MASTER_PORT (or --rdzv-endpoint) and can reach it: "
        "notebook 05's port and route checks.",
        "Only then consider a longer init timeout (init_process_group(timeout=...)); it rarely cures this. "
        + START_UP),
    Failure.PORT_IN_USE: (
        "Pick a free port (torchrun --rdzv-endpoint host:0 / --standalone, or MASTER_PORT) per job; notebook 01's "
        "launcher checks the port before launching.",
        "Look for leftover processes of an earlier run (`ss -ltnp | grep PORT`) and stop them."),
    Failure.COLLECTIVE_TIMEOUT: (
        "Find the rank that was not in the collective: compare per-rank sequence numbers, use monitored_barrier or "
        "TORCH_DISTRIBUTED_DEBUG=DETAIL (notebook 03), and read the stacks of the living ranks (notebook 01).",
        "Check whether the size could really take that long: 'slow or stuck?' in notebook 03 (a 600 s timeout "
        "on a few GB means stuck, not slow).",
        "Do not rely on NCCL_TIMEOUT (it does not exist) or signal.alarm; set init_process_group(timeout=...). "
        + START_UP),
    Failure.COLLECTIVE_MISMATCH: (
        "Run with TORCH_DISTRIBUTED_DEBUG=DETAIL to get the first mismatching collective and the ranks (notebook 03); "
        "not with DDP on gloo, whose constructor crashes under DETAIL in torch 2.13: compare the ranks' tracebacks "
        "instead (python -m nbhelpers run). On NCCL, NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL logs every rank's "
        "collectives with their opCount and count: doctor names the first opCount where the ranks disagree.",
        "Look for data-dependent control flow: a rank that skips a collective, variable-length tensors in "
        "all_gather, a collective inside `if rank == 0:` (notebooks 03, 04).",
        "DDP's 'Expected to have finished reduction in the prior iteration' (or 'did not receive grad'): parameters "
        "got no gradient in a step, so DDP's gradient all_reduce never completed: a branch of the model some batches "
        "skip, or layers frozen (requires_grad_(False)) after the model was wrapped. Freeze before wrapping (or wrap "
        "again), make every parameter take part in the loss, or pass find_unused_parameters=True; the parameter "
        "indices it lists (names under TORCH_DISTRIBUTED_DEBUG=INFO) say which."),
    Failure.NCCL_UNHANDLED_CUDA_ERROR: (
        "Rerun with NCCL_DEBUG=INFO (and CUDA_LAUNCH_BLOCKING=1 while debugging) to see the failing CUDA call "
        "(notebook 02).",
        "Check the driver, CUDA build and GPU architecture agree (`nvidia-smi`, torch.version.cuda, the fingerprint "
        "in notebook 01)."),
    Failure.NCCL_SYSTEM_ERROR: (
        "Rerun with NCCL_DEBUG=INFO to see which system call failed (notebook 02).",
        "If it is shared memory: give the container more /dev/shm (`--shm-size`, `--ipc=host`) rather than "
        "disabling transports (notebook 04).",
        "If a peer closed the connection: that peer's own log holds the cause."),
    Failure.NCCL_INTERNAL_OR_INVALID_USAGE: (
        "Make each rank use its own GPU: torch.cuda.set_device(LOCAL_RANK) before init (notebook 01).",
        "Rerun with NCCL_DEBUG=INFO (or WARN) to get the 'Last error' line (notebook 02).",
        "Check the other ranks' logs for an out-of-memory or crash that NCCL wraps as internal."),
    Failure.NETWORK_INTERFACE: (
        "Set GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME to the interface that routes between nodes (notebook 05 shows "
        "which one each library would pick).",
        "Make the hostname resolve to a routable address, not 127.0.x.x (/etc/hosts)."),
    Failure.INFINIBAND: (
        "Check the links (`ibstat`, `ibv_devinfo`) and NCCL_IB_HCA / NCCL_IB_GID_INDEX; look for a peer that died "
        "first (notebook 05).",
        "NCCL_IB_DISABLE=1 is a debugging step to confirm IB is at fault, not a fix (notebook 02)."),
    Failure.CHECKPOINT_CORRUPT: (
        "If ranks load what rank 0 is saving: save to a temp file and os.replace, then barrier, then load "
        "(notebook 04 measures each fix).",
        "Otherwise compare the file size with the source, re-download or re-copy, and check free disk space."),
    Failure.DATALOADER_SHM: (
        "Give the container more shared memory: `docker run --shm-size=16g` or `--ipc=host` (notebook 04).",
        "Short term: fewer workers or smaller batches; num_workers=0 only to confirm. A worker that only 'exited "
        "unexpectedly' (no bus error) may have been killed instead: look in `dmesg` for the OOM killer."),
    Failure.OOM_IN_COLLECTIVE: (
        "Find the rank with 'out of memory' first: its memory use is the cause (notebook 01's stage timeline shows "
        "where it failed).",
        "Leave headroom for NCCL buffers (lower the batch, shard more, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True);"
        " chunking a huge collective reduces peak memory (notebook 03)."),
    Failure.WORKER_KILLED: (
        "Check `dmesg` / `journalctl -k` for the OOM killer and host memory (notebook 01 names the killed rank).",
        "Reduce host memory per rank (DataLoader workers, pinned memory, loading checkpoints on every rank)."),
    Failure.VERSION_MISMATCH: (
        "Compare versions across nodes and libraries: the fingerprint (notebook 01) shows torch, CUDA and NCCL "
        "per rank.",
        "Remove or stop preloading a conflicting system libnccl (LD_LIBRARY_PATH, LD_PRELOAD); install a torch build "
        "for this GPU architecture and driver."),
    Failure.TOO_MANY_RANKS: (
        "Start at most as many ranks per node as it has visible GPUs: `--nproc-per-node` equal to "
        "`python -c 'import torch; print(torch.cuda.device_count())'` on that node, after CUDA_VISIBLE_DEVICES "
        "(notebook 01's fingerprint shows the GPUs each rank sees).",
        "Check CUDA_VISIBLE_DEVICES on every node (a Slurm or container setting may hide GPUs); the device of each rank "
        "is `torch.cuda.set_device(int(os.environ['LOCAL_RANK']))`, not the global RANK.",
        "Reinstalling drivers, CUDA or torch does not help: the index is out of range, not the software."),
    Failure.EXIT_WITHOUT_DESTROY: (
        "Call dist.destroy_process_group() at the end of every rank, in a `finally:` so that it runs after an "
        "error too (pytorch/pytorch#190489).",
        "Wait on async collectives (`work.wait()`) before the script ends.",
        "A longer timeout or a restart does not help: nothing hung, and the same run may pass next time."),

    Failure.RANK_ERROR: (
        "Read the culprit rank's traceback: its exception and the line of your code are the cause; the other ranks' "
        "timeouts and lost connections are consequences. Fix that error (often data that only one rank's shard "
        "holds) and the rest follows.",
        "Make a rank that must give up tell the others first (all_reduce an error flag each step), so the job ends at "
        "once with the real error instead of a timeout (notebook 03).",
        "End every rank with dist.destroy_process_group() in a `finally:`, so an error exits cleanly."),
    Failure.DDP_SEGFAULT: (
        "Unset TORCH_DISTRIBUTED_DEBUG (or set it to INFO): with DETAIL, torch 2.13's DDP constructor crashes on "
        "gloo. Use DETAIL only to check collectives called before DDP is built (notebook 02).",
        "To find a collective mismatch inside DDP's training step, compare the ranks' tracebacks or stack dumps "
        "(python -m nbhelpers run) instead."),
    Rule.DDP_SEGFAULT: (
        "Nothing in your script is wrong at that line: remove TORCH_DISTRIBUTED_DEBUG=DETAIL from the environment "
        "(and from the script's os.environ) and run again.",),
    Rule.WRONG_WORLD: (
        "That rank's world size (or rank) is not the job's: take them from the environment torchrun sets "
        "(init_process_group() with no world_size/rank, or int(os.environ['WORLD_SIZE'])), never from a config "
        "file or saved state that may come from another job.",),
    Rule.UNEVEN: (
        "Give every rank the same number of iterations. Uneven inputs: the same number of batches on every rank "
        "(DistributedSampler with drop_last=True, or padding; shards of equal length), or, when they are uneven on "
        "purpose, DDP's `with model.join():` (torch.distributed.algorithms.Join) so finished ranks shadow the "
        "collectives of the others. An early stop: decide it together (all_reduce the metric or the flag first), so "
        "every rank leaves the loop at the same step.",),
    Rule.MAPPED_FILE_SHRUNK: (
        "Never rewrite a file in place while another rank maps it: write the new data to a new file (a temporary "
        "name, then os.replace, which leaves the old file whole for mappings that still use it), then let every "
        "rank open the new one after a barrier; or give each epoch's data its own file name.",),
    Rule.SKIPPED_CALL: (
        "Every rank must make the call that rank skipped, the collective or the send its peer waits to receive: move "
        "the early `return` or `continue` after it (let every rank gather, then return on the ranks with nothing more "
        "to do; send a zero gradient back for a batch it skips), or decide the condition from values every rank "
        "shares. End every rank with dist.destroy_process_group(). A longer timeout only makes the wait last longer.",),
    Rule.NEW_COLLECTIVE: (
        "Make every rank issue the same collectives in the same order: a stop (early stopping, a NaN check, a step "
        "budget) or a branch decided on one rank's own values must be decided together first (all_reduce the flag "
        "or the metric, then every rank breaks at the same step).",
        "`python -m nbhelpers doctor --fr DIR` prints the ranks' collective records side by side (the run folder's "
        "fr/).",),
    Rule.DIFFERENT_COLLECTIVES: (
        "Every rank must call the same collectives in the same order. Move the collective out of the rank-conditional "
        "branch (call it on every rank, with src=0 for a broadcast), or make every branch call the same sequence.",
        "TORCH_DISTRIBUTED_DEBUG=DETAIL reports the first mismatch at once for collectives called outside DDP "
        "(notebook 03).",),
    Rule.RANK_ONLY_COLLECTIVE: (
        "Call it on every rank and keep only the rank-0 work under the condition: `metrics = trainer.evaluate()` on "
        "every process, then `if state.is_world_process_zero: print(...)`; `self.log(..., sync_dist=True)` on every "
        "rank (or `rank_zero_only=True` without sync_dist); `accelerator.wait_for_everyone()` outside "
        "`if accelerator.is_main_process:`. A longer timeout only makes the hang last longer.",),
    Rule.COLLECTIVE_IN_LOCK: (
        "Never call a collective while holding a lock other ranks need: build the cache under the lock, release "
        "it, then call the collective (or let one rank build it between two barriers, with no lock).",),
    Rule.LATE: (
        "Find out why that rank is late: its stack dump shows where it was. Data loading, a rank-0-only "
        "step (checkpointing, evaluation, logging) or an `if rank == ...` branch are the usual places. A longer "
        "timeout only makes the hang last longer.",),
    Rule.OUTSIDE_COLLECTIVE: (
        "That rank was doing something else while the others waited in a collective: its stack dump shows where "
        "(a DataLoader that never returns, a file it waits for, a rank-0-only step). Make that step finish, or let "
        "every rank wait for it at one barrier. A longer timeout only makes the hang last longer.",),
    Rule.FURTHEST_BEHIND: (
        "The run was stopped before any rank failed; that rank had done the least. Its stack dump shows where it "
        "was: slow data, a rank-only step, or a wait of its own.",),
    Rule.SHORT_TIMEOUT: (
        "Give the timeout in seconds or minutes: init_process_group(timeout=timedelta(minutes=10)) and the same on "
        "every new_group and store you create (a separate gloo group for objects has its own). Check the unit where "
        "the value comes from (an argument documented in seconds passed as milliseconds). Here a longer timeout is "
        "the fix: the ranks were not stuck, only given less time than a step takes. " + START_UP,),
    Rule.NAMED: (
        "That rank never reached init_process_group (or reached it elsewhere): check it started, that every "
        "rank got the same MASTER_ADDR/MASTER_PORT, and what it was doing (its stack dump).",),
    Rule.KEY_NEVER_SET: (
        "Set the store key on every path of the rank that owns it (also when it finds a cache on disk or returns "
        "early), or replace the hand-made key protocol with a dist.barrier() every rank reaches.",),
    Rule.SAME_ERROR: (
        "Every rank failed the same way at the same line, so no rank is to blame: fix what they all share (the file "
        "they read, the configuration, the code). A restart of the same job fails the same way.",),
    Rule.RACE: (
        "Every rank runs the line that takes it, so they all ask for the same port or create the same folder: do it on "
        "one rank per host (`if int(os.environ['LOCAL_RANK']) == 0:`, then dist.barrier() before the others use it), "
        "or make it per rank (port + LOCAL_RANK, a folder per rank), or let it exist (os.makedirs(..., exist_ok=True); "
        "bind port 0 and log the port the system chose).",),
    Rule.CRASHED: (
        "Read that rank's own log: its error, exit code or signal is the cause. SIGKILL usually means the "
        "OOM killer (check `dmesg`); SIGABRT/SIGSEGV a C++ failure. The other ranks' errors are consequences.",),
    Rule.UNREACHABLE: (
        "A rank that cannot reach the rendezvous store or a peer: check MASTER_ADDR/MASTER_PORT (and any "
        "init_method or port the script sets itself: it overrides torchrun's) are the same on every rank, the "
        "firewall, and the interface (GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME); notebook 05.",),
    Rule.UNMATCHED: (
        "That rank calls a collective the others never call, typically inside `if rank == 0:` (loading or "
        "saving a checkpoint, logging, evaluation). Every rank must call every collective in the same order: "
        "move it out of the branch. A longer timeout only makes the hang last longer (notebook 04).",),
    Rule.DESYNC: (
        "That rank left the common sequence of collectives: it skipped one, called one the others did not "
        "(an `if rank == 0:` around code that communicates), or sent another shape. Make every rank make the "
        "same calls in the same order; when a rank must skip, agree on it first with a small all_reduce of "
        "an error flag (notebook 03). TORCH_DISTRIBUTED_DEBUG=DETAIL reports mismatches at once.",),
    Rule.MISMATCH: (
        "The ranks called a collective with different sizes (or different collectives). Rerun with "
        "TORCH_DISTRIBUTED_DEBUG=DETAIL: every rank then raises an error that names the shapes and ranks "
        "instead of one rank aborting (notebooks 02 and 03).",),
    Rule.MODEL_MISMATCH: (
        "Build the model from the same data on every rank: a vocabulary, label set or config computed from each "
        "rank's own shard differs between ranks. Compute it once (rank 0) and broadcast_object_list it, or read it "
        "from one shared file.",),
    Rule.EXIT_HANG: (
        "Let the process end: a thread of your own that may still run at exit must be a daemon "
        "(threading.Thread(daemon=True)) or be told to stop and joined before the script ends (put the sentinel on "
        "its queue); join DataLoader workers and executors (shutdown()) and close what holds a process, then call "
        "dist.barrier() and dist.destroy_process_group() as the last lines of main().",
        "If it still hangs in a destructor with no Python frame, `py-spy dump --native --pid PID` shows which C++ "
        "teardown waits (a process group whose peer is gone, a library's thread pool).",),
    Rule.EXIT_WITHOUT_DESTROY: (
        "Nothing hung and no step failed: the rank aborted while Python shut down because the script never "
        "called dist.destroy_process_group(). Wait on async collectives (`work.wait()`), then call "
        "dist.destroy_process_group() at the end of every rank, in a `finally:`. A longer timeout or a "
        "restart does not fix it; a restart may only pass by chance.",
        "If the script already calls it: dist.barrier(), then drop the DDP model and the last collective's tensors "
        "(del them, gc.collect()) before destroy_process_group(); torch's teardown can still abort now and then.",),
    Rule.ERROR: (
        "That rank raised an error of its own; fix it and the rest follows.",),
    Rule.UNKNOWN: (
        "No rank stands out: all were waiting in the same stage. Compare the stack dumps, then suspect the "
        "network (notebook 05) or a collective mismatch (notebook 03).",),
}


# Rules that find the exact cause and its line: their remedy is the whole advice.  The failure's general remedies
# would only send the reader looking for what the rule already found (DETAIL to find the mismatch, "find the rank
# that was not in the collective"), or contradict it (a short timeout's fix is a longer timeout).
COMPLETE = frozenset({Rule.EXIT_HANG, Rule.RANK_ONLY_COLLECTIVE, Rule.COLLECTIVE_IN_LOCK, Rule.SHORT_TIMEOUT, Rule.RACE,
                      Rule.KEY_NEVER_SET, Rule.WRONG_WORLD, Rule.UNEVEN, Rule.EXIT_WITHOUT_DESTROY,
                      Rule.SKIPPED_CALL, Rule.NEW_COLLECTIVE, Rule.MAPPED_FILE_SHRUNK})


def advice(rule: Rule | str | None, failure: Failure | str | None) -> list[str]:
    """The remedies for a failed run: the culprit rule's first (it is about this run's culprit), then the
    failure's (unless the rule's is complete: :data:`COMPLETE`); nothing for a run that passed."""
    rule = Rule(rule) if rule else Rule.NONE
    found = list(REMEDIES.get(rule, ())) if rule is not Rule.NONE else []
    if rule in COMPLETE:
        return found
    if failure:
        found += [r for r in REMEDIES[Failure(failure)] if r not in found]
    if not found and rule is not Rule.NONE:
        found = list(REMEDIES[Rule.UNKNOWN])
    return found
