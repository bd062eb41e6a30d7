"""DataLoader workers passing batches through /dev/shm (the /dev/shm shared-memory failure).

Run on a tiny /dev/shm in a private mount namespace (see :mod:`nbhelpers.runtime.sandbox`)::

    unshare -m --propagation private sh -c \\
      'mount -t tmpfs -o size=1m tmpfs /dev/shm && exec python -m nbhelpers.workers.shm_loader --batch-size 4'

Events: ``fingerprint`` (the /dev/shm size and the workbook's warnings, as a rank's fingerprint
would show them) and ``load`` (ok with the batch count, or fail with the DataLoader's error).
With ``--batch-size none`` a worker's failure is not reported: the loader waits for ``--timeout``.
"""
from __future__ import annotations

import argparse
import time

from nbhelpers.runtime.events import emit, error_text


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m nbhelpers.workers.shm_loader", description=__doc__.split("\n")[0])
    p.add_argument("--batch-size", default="4", help="an int, or 'none' (no automatic batching)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--item-mb", type=float, default=4.0)
    p.add_argument("--items", type=int, default=16)
    p.add_argument("--timeout", type=float, default=5.0, help="DataLoader timeout, seconds (bounds the hang)")
    args = p.parse_args(argv)
    from nbhelpers.runtime.fingerprint import collect

    fp = collect(with_torch=False)
    emit("fingerprint", "ok", shm_total=fp["shm_total"], shm_free=fp["shm_free"], warnings=fp["warnings"])
    import torch
    from torch.utils.data import DataLoader, Dataset

    n = int(args.item_mb * 2**20 / 4)

    class Tensors(Dataset):
        def __len__(self):
            return args.items

        def __getitem__(self, i):
            return torch.full((n,), float(i))

    bs = None if args.batch_size.lower() == "none" else int(args.batch_size)
    loader = DataLoader(Tensors(), batch_size=bs, num_workers=args.workers, timeout=args.timeout)
    t0 = time.time()
    batches = 0
    try:
        for _ in loader:
            batches += 1
        emit("load", "ok", batches=batches, start=t0, end=time.time(), batch_size=bs)
    except Exception as exc:  # noqa: BLE001 - the DataLoader's message is the measurement
        emit("load", "fail", start=t0, end=time.time(), batches=batches, batch_size=bs,
             error_type=type(exc).__name__, error=error_text(exc))


if __name__ == "__main__":
    main()
