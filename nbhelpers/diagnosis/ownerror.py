"""What a rank's own exception says failed: a fact of its traceback, kept over the generic ``rank_error``.

A rank that raised is the culprit (``rank_error``), but its exception often names the failure itself, and then the
run gets that failure's name and advice:

- the exception was raised inside ``torch.load`` (a frame of ``torch/serialization.py``) and is one that a short or
  torn file gives: ``EOFError`` (an empty file: the pickle has nothing to read; a reader that polled for the file
  to *exist* while its writer had just opened it), ``UnpicklingError``, ``BadZipFile``, or the zip reader's
  ``failed finding central directory``: a checkpoint read before it was whole (``checkpoint_corrupt``);
- the exception is a reset or closed connection raised while a DataLoader worker handed a batch over by file
  descriptor (``rebuild_storage_fd``, ``multiprocessing/resource_sharer.py``): the worker died mid-handover, the
  third way torch 2.13 reports a killed worker (beside "is killed by signal" and "exited unexpectedly"), named as
  the second is (``dataloader_shm``: a full ``/dev/shm`` or too many shared descriptors most often, the OOM killer
  too; the report we hold with these frames, pytorch/pytorch#34768, is that);
- the exception's own text is a cause the log classifier knows (``DataLoader worker (pid N) is killed by signal:
  Killed.`` is a killed worker; ``CUDA out of memory`` is memory), not a consequence (a timeout, a lost peer).

Pure: a :class:`~nbhelpers.diagnosis.tracebacks.Where` in, a :class:`~nbhelpers.diagnosis.api.Failure` or None out.
"""
from __future__ import annotations

from nbhelpers.diagnosis.api import Failure
from nbhelpers.diagnosis.categories import CONSEQUENCE
from nbhelpers.diagnosis.tracebacks import Where

__all__ = ["own_failure"]

TORN_READ = {"EOFError", "UnpicklingError", "BadZipFile"}   # what pickle / zipfile raise on a short file
CONNECTION_LOST = {"ConnectionResetError", "ConnectionRefusedError", "BrokenPipeError", "EOFError"}
FD_HANDOVER = ("torch/multiprocessing/reductions.py", "multiprocessing/resource_sharer.py")


def own_failure(tb: Where | None) -> Failure | None:
    """The failure the rank's own exception names, or None when it names none (then it stays ``rank_error``)."""
    if tb is None or not tb.exc_type:
        return None
    name = tb.exc_type.rsplit(".", 1)[-1]
    in_load = any(f.file.replace("\\", "/").endswith("torch/serialization.py") for f in tb.frames)
    if in_load and (name in TORN_READ or "central directory" in tb.message):
        return Failure.CHECKPOINT_CORRUPT
    if name in CONNECTION_LOST and any(f.file.replace("\\", "/").endswith(FD_HANDOVER) for f in tb.frames):
        return Failure.DATALOADER_SHM
    from nbhelpers.diagnosis.classify import classify

    found = classify(f"{tb.exc_type}: {tb.message}".strip().rstrip(":"), model=False)
    if found and found[0].category not in CONSEQUENCE and found[0].category != Failure.RANK_ERROR.value:
        return Failure(found[0].category)
    return None
