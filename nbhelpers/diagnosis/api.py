"""The verdict model: one name per failure, one name per culprit rule, and the Verdict itself.

Every layer speaks these names: the classifier's categories and the verdict's failure are
:class:`Failure` members, the culprit rule that named a rank is a :class:`Rule`, and the advice for
both comes from one table (:data:`nbhelpers.diagnosis.remedies.REMEDIES`).  Both enums are ``str``
subclasses, so ``Failure.COLLECTIVE_TIMEOUT == "collective_timeout"`` and JSON carries the plain name.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

__all__ = ["Failure", "Rule", "Verdict"]


class Failure(str, Enum):
    """What went wrong: the classifier's category and the verdict's failure, one name each."""
    RENDEZVOUS_TIMEOUT = "rendezvous_timeout"
    PORT_IN_USE = "port_in_use"
    COLLECTIVE_TIMEOUT = "collective_timeout"
    COLLECTIVE_MISMATCH = "collective_mismatch"
    NCCL_UNHANDLED_CUDA_ERROR = "nccl_unhandled_cuda_error"
    NCCL_SYSTEM_ERROR = "nccl_system_error"
    NCCL_INTERNAL_OR_INVALID_USAGE = "nccl_internal_or_invalid_usage"
    NETWORK_INTERFACE = "network_interface"
    INFINIBAND = "infiniband"
    CHECKPOINT_CORRUPT = "checkpoint_corrupt"
    DATALOADER_SHM = "dataloader_shm"
    OOM_IN_COLLECTIVE = "oom_in_collective"
    WORKER_KILLED = "worker_killed"
    VERSION_MISMATCH = "version_mismatch"
    EXIT_WITHOUT_DESTROY = "exit_without_destroy"
    RANK_ERROR = "rank_error"              # a rank's own Python exception, the most common failure of all
    DDP_SEGFAULT = "ddp_segfault"          # DDP's constructor segfaults (gloo + TORCH_DISTRIBUTED_DEBUG=DETAIL)
    TOO_MANY_RANKS = "too_many_ranks"      # more ranks on a node than GPUs it lets them see

    def __str__(self) -> str:
        return self.value


class Rule(str, Enum):
    """How the culprit was found: the rule of :mod:`nbhelpers.diagnosis.culprit` that fired (see its RULES)."""
    NONE = "none"                   # the run passed
    DESYNC = "desync"               # traced collective sequences disagree
    MISMATCH = "mismatch"           # a rank aborted on a size mismatch: not necessarily the one at fault
    MODEL_MISMATCH = "model_mismatch"  # DDP refused a model whose parameters differ from rank 0's
    EXIT_WITHOUT_DESTROY = "exit_without_destroy"  # aborted in Python's shutdown, group never destroyed
    EXIT_HANG = "exit_hang"         # ended its script but its process never ended: waits in teardown
    DDP_SEGFAULT = "ddp_segfault"   # every rank crashed in DDP's constructor: the environment, not a rank
    SAME_ERROR = "same_error"       # every rank raised the same error at the same line: what they share is at fault
    RACE = "race"                   # every rank takes the same exclusive thing (a port, a new folder): a race, not a rank
    MAPPED_FILE_SHRUNK = "mapped_file_shrunk"  # SIGBUS reading a mapped file that a peer's code rewrote in place
    CRASHED = "crashed"             # died on its own (signal, exit code, its own exception) before the others failed
    WRONG_WORLD = "wrong_world"     # waited for a rank that does not exist: its world size or rank is wrong
    SHORT_TIMEOUT = "short_timeout"  # gave up after less than a second: the timeout's value (or unit) is the fault
    NAMED = "named"                 # a waiting rank's error names whom it waited for
    KEY_NEVER_SET = "key_never_set"  # ranks waited for a store key of the script's own that a rank never set
    SKIPPED_CALL = "skipped_call"   # a conditional exit skipped a call a peer waits in (a collective, a send)
    UNEVEN = "uneven"               # kept calling collectives after a peer had finished (uneven inputs)
    LATE = "late"                   # had not reached the stage the others failed in
    OUTSIDE_COLLECTIVE = "outside_collective"  # outside any collective while the others waited in one
    FURTHEST_BEHIND = "furthest_behind"        # stopped from outside: the rank that had started the fewest stages
    UNMATCHED = "unmatched"         # waited in a collective no other rank calls
    NEW_COLLECTIVE = "new_collective"  # the collective records: it alone issued a collective no rank had before
    DIFFERENT_COLLECTIVES = "different_collectives"  # ranks waited in different calls; the rank-conditional one named
    COLLECTIVE_IN_LOCK = "collective_in_lock"        # a collective inside a lock: the holder waits for ranks that wait
    RANK_ONLY_COLLECTIVE = "rank_only_collective"    # a documented collective under a documented rank-zero condition
    UNREACHABLE = "unreachable"     # could not connect to the store or a peer
    ERROR = "error"                 # raised an error of its own
    UNKNOWN = "unknown"             # no rank stands out

    def __str__(self) -> str:
        return self.value


@dataclass
class Verdict:
    """Which rank caused a failed run (``culprit``), by which rule, why, and what the others suffered."""
    culprit: int | None
    kind: Rule
    reason: str
    evidence: list[str] = field(default_factory=list)
    victims: dict[int, str] = field(default_factory=dict)
    first_to_raise: int | None = None
    torchrun_blamed: int | None = None
    failure: Failure | None = None       # what went wrong, when the rule knows better than the log classifier
    where: str | None = None             # the culprit's line of user code (``train.py:45 in train: loss.backward()``)

    def __post_init__(self):
        self.kind = Rule(self.kind)
        self.failure = None if self.failure is None else Failure(self.failure)

    def __repr__(self) -> str:
        who = "no culprit" if self.culprit is None else f"culprit rank {self.culprit} ({self.kind})"
        return f"<Verdict {who}: {self.reason}>"

    def torchrun_note(self) -> str | None:
        """What torchrun's "Root Cause" rank was, when it is not this verdict's culprit (None when it is)."""
        if self.torchrun_blamed is None or self.torchrun_blamed == self.culprit:
            return None
        what = "a victim" if self.culprit is not None else "only the first rank to exit, not a cause by itself"
        return f"torchrun's 'Root Cause' names rank {self.torchrun_blamed}: {what}"

    def to_dict(self) -> dict:
        return {"culprit_rank": self.culprit, "culprit_kind": self.kind.value, "culprit_where": self.where,
                "reason": self.reason,
                "evidence": list(self.evidence), "victims": {str(k): v for k, v in self.victims.items()},
                "first_to_raise": self.first_to_raise, "torchrun_blamed": self.torchrun_blamed}
