"""The torn-checkpoint error from a truncated copy and a full disk; DataLoader workers on a tiny /dev/shm."""
import pytest

from nbhelpers.checkpoint import atomic_save, explain_torn
from nbhelpers.runtime.sandbox import private_mount_unavailable
from nbhelpers.scenarios import shm, torncauses

needs_mount = pytest.mark.skipif(private_mount_unavailable() is not None,
                                 reason=f"private tmpfs mounts unavailable: {private_mount_unavailable()}")


def test_truncated_copy_is_told_apart(runs_dir):
    row = torncauses.truncated_copy(size_mb=4, fraction=0.5)
    assert "central directory" in row["load error"]
    assert row["category"] == "checkpoint_corrupt"
    assert row["verdict"] == "truncated copy" and row["size"] < row["expected"]


def test_explain_torn_sees_a_file_being_written(tmp_path):
    import threading
    import time

    path = tmp_path / "growing.pt"
    stop = threading.Event()

    def writer():
        with open(path, "wb") as fh:
            while not stop.is_set():
                fh.write(b"x" * 4096)
                fh.flush()
                time.sleep(0.01)

    t = threading.Thread(target=writer)
    t.start()
    try:
        time.sleep(0.05)
        assert explain_torn(path, watch_s=0.2)["verdict"] == "being written"
    finally:
        stop.set()
        t.join()
    import torch

    whole = atomic_save({"w": torch.ones(10)}, tmp_path / "whole.pt")
    assert explain_torn(whole, watch_s=0.01)["verdict"] == "whole"


@pytest.mark.integration
@needs_mount
def test_full_disk_cuts_the_save_short(runs_dir):
    row = torncauses.full_disk(size_mb=20, disk_mb=8)
    assert "unexpected pos" in row["save error"] or "write" in row["save error"], row
    assert "central directory" in row["load error"]
    assert row["category"] == "checkpoint_corrupt"
    assert row["verdict"] == "full disk" and row["host dir left clean"]


@pytest.mark.integration
@needs_mount
def test_tiny_dev_shm_fails_dataloader_workers_and_more_shm_fixes_it(runs_dir):
    bad = shm.shm_dataloader(shm_mb=1, batch_size=4, item_mb=2, loader_timeout=5)
    assert bad["status"] == "fail" and "unable to allocate shared memory" in bad["first error line"], bad
    assert bad["classified as"] == "dataloader_shm"
    assert any("/dev/shm has 1 MiB" in w for w in bad["fingerprint warnings"])
    good = shm.shm_dataloader(shm_mb=64, batch_size=4, item_mb=2, loader_timeout=5)
    assert good["status"] == "ok" and good["batches"] == 4, good


@pytest.mark.integration
@needs_mount
def test_unbatched_loader_hangs_until_its_timeout(runs_dir):
    row = shm.shm_dataloader(shm_mb=1, batch_size=None, item_mb=2, loader_timeout=3)
    assert row["status"] == "fail" and "timed out after 3" in row["error"], row
    assert row["seconds"] >= 2.9
    assert "No space left on device" in row["worker stderr"]
    assert row["classified as"] == "dataloader_shm"
