"""The /dev/shm shared-memory failure, for real: DataLoader workers on a tiny /dev/shm.

    shm_dataloader(shm_mb=1, batch_size=4)      # fails: unable to allocate shared memory(shm) ... (28)
    shm_dataloader(shm_mb=1, batch_size=None)   # hangs until the DataLoader timeout; the worker's error is on stderr
    shm_dataloader(shm_mb=256, batch_size=4)    # the fix: more shared memory (docker --shm-size), same code

Runs in a private mount namespace with a tmpfs of ``shm_mb`` over /dev/shm (root); the host's
/dev/shm is untouched.  Without root each call returns ``{"skipped": reason}``.
"""
from __future__ import annotations

import re

SHM_LINE = re.compile(r"unable to (allocate|write to file).*shared memory.*|.*No space left on device.*|.*bus error.*",
                      re.I)


def shm_dataloader(shm_mb: int = 1, batch_size: int | None = 4, *, workers: int = 2, item_mb: float = 2.0,
                   loader_timeout: float = 60.0, timeout: float = 120.0) -> dict:
    """Run DataLoader workers with ``/dev/shm`` limited to ``shm_mb``; what they (and the fingerprint) say.

    ``loader_timeout`` is the DataLoader's own ``timeout``: it also bounds the workers' start and first batch,
    so it is long unless the hang itself is the demonstration (``batch_size=None``): a short one would turn a
    slow machine's start into a timeout and hide the shared-memory error."""
    from nbhelpers.runtime.learned import classify
    from nbhelpers.runtime.launcher import run_one
    from nbhelpers.runtime.sandbox import private_mount_unavailable, tmpfs_prefix

    reason = private_mount_unavailable()
    if reason:
        return {"shm_mb": shm_mb, "batch_size": batch_size, "skipped": reason}
    rc, events, out = run_one("shm_loader", ["--batch-size", str(batch_size).lower(), "--workers", str(workers),
                                                "--item-mb", str(item_mb), "--timeout", str(loader_timeout)],
                                 timeout=timeout, prefix=tmpfs_prefix("/dev/shm", f"{shm_mb}m"))
    by = {e["stage"]: e for e in events}
    if "load" not in by:
        from nbhelpers.errors import WorkbookError

        raise WorkbookError(f"the DataLoader run ended early (exit {rc})", "read its output:\n" + out[-2000:])
    load = by["load"]
    error = load.get("error") or ""
    worker_lines = [ln.strip() for ln in out.splitlines() if SHM_LINE.search(ln)]
    found = classify(error + "\n" + "\n".join(worker_lines))
    return {"shm_mb": shm_mb, "batch_size": batch_size, "status": load["status"],
            "seconds": round(load["end"] - load["start"], 2), "batches": load.get("batches"),
            "error": error.splitlines()[-1] if error else "",
            "first error line": next((ln for ln in error.splitlines() if SHM_LINE.search(ln)), error[:200]),
            "worker stderr": worker_lines[-1] if worker_lines else "",
            "classified as": found[0].category if found else None,
            "fingerprint warnings": by.get("fingerprint", {}).get("warnings", []),
            "shm_total": by.get("fingerprint", {}).get("shm_total")}
