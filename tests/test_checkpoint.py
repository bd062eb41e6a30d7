"""nbhelpers.checkpoint for real: torn files, rotation, manifest, stale temps, and a writer SIGKILLed mid-save."""
import json
import subprocess
import sys

import pytest
import torch

from nbhelpers import checkpoint as ck
from nbhelpers.scenarios.ckptrace import sigkill_test


def state(step=1, n=200_000):
    return {"step": step, "w": torch.full((n,), float(step))}


def test_atomic_save_round_trip_leaves_no_temp(tmp_path):
    p = ck.atomic_save(state(3), tmp_path / "c.pt")
    assert ck.has_end_record(p)
    assert ck.safe_load(p)["step"] == 3
    assert [x.name for x in tmp_path.iterdir()] == ["c.pt"]


@pytest.mark.parametrize("frac", [0.0, 0.001, 0.5, 0.9999])
def test_truncated_copy_is_detected_and_explained(tmp_path, frac):
    whole = ck.atomic_save(state(), tmp_path / "whole.pt")
    data = whole.read_bytes()
    cut = tmp_path / "cut.pt"
    cut.write_bytes(data[:int(len(data) * frac)])
    assert not ck.has_end_record(cut)
    with pytest.raises(Exception):
        torch.load(cut)  # torch's own error (EOFError, OSError, central directory ...)
    with pytest.raises(ck.CheckpointError, match="no zip end record"):
        ck.safe_load(cut)


def test_failed_save_leaves_nothing(tmp_path):
    class Unpicklable:
        def __reduce__(self):
            raise TypeError("cannot pickle this")

    with pytest.raises(TypeError):
        ck.atomic_save({"x": Unpicklable()}, tmp_path / "c.pt")
    assert list(tmp_path.iterdir()) == []


def test_keep_last_k_and_manifest(tmp_path):
    mgr = ck.CheckpointManager(tmp_path, keep=2)
    for step in range(1, 6):
        mgr.save(state(step), step)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-00000004.pt", "ckpt-00000005.pt", "manifest.json"]
    entries = json.loads((tmp_path / "manifest.json").read_text())["checkpoints"]
    assert [e["step"] for e in entries] == [4, 5]
    assert entries[-1]["sha256"] == ck.sha256_file(tmp_path / "ckpt-00000005.pt")
    loaded, entry = mgr.load_latest()
    assert loaded["step"] == 5 and entry["step"] == 5


def test_corrupt_latest_falls_back_to_the_previous(tmp_path):
    mgr = ck.CheckpointManager(tmp_path, keep=3)
    for step in (1, 2):
        mgr.save(state(step), step)
    newest = tmp_path / "ckpt-00000002.pt"
    data = bytearray(newest.read_bytes())
    data[len(data) // 2] ^= 0xFF  # bit rot in the middle: the end record is still there
    newest.write_bytes(bytes(data))
    assert ck.has_end_record(newest)
    loaded, entry = mgr.load_latest()
    assert entry["step"] == 1 and loaded["step"] == 1
    newest.unlink()
    mgr.manifest_path.unlink()  # no manifest: the files are scanned
    assert mgr.load_latest()[1]["step"] == 1
    (tmp_path / "ckpt-00000001.pt").write_bytes(b"")
    with pytest.raises(ck.CheckpointError, match="no loadable checkpoint"):
        mgr.load_latest()


def test_resaving_a_step_keeps_it_loadable(tmp_path):
    mgr = ck.CheckpointManager(tmp_path, keep=1)
    mgr.save(state(7), 7)
    mgr.save(state(8), 7)
    assert mgr.load_latest()[0]["step"] == 8


@pytest.mark.integration
def test_stale_temps_are_removed_live_ones_kept(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        host = ck._host()
        stale = tmp_path / f".ckpt-00000009.pt.tmp-{host}-{dead_pid}-deadbeef"
        busy = tmp_path / f".ckpt-00000010.pt.tmp-{host}-{live.pid}-cafef00d"
        stale.write_bytes(b"half")
        busy.write_bytes(b"being written")
        mgr = ck.CheckpointManager(tmp_path, keep=2)
        mgr.save(state(1), 1)
        assert not stale.exists() and busy.exists()
        stale.write_bytes(b"half")
        mgr.load_latest()
        assert not stale.exists() and busy.exists()
    finally:
        live.kill()
        live.wait()


@pytest.mark.integration
def test_sigkill_mid_save_never_loses_the_latest(runs_dir):
    df = sigkill_test(kills=20, size_mb=4, mode="safe", quiet=True)
    s = df.summary
    assert s["kills"] >= 20
    assert s["unloadable"] == 0, df[df["problem"] != ""]
    assert s["temp_left_after_load"] == 0
    assert s["mid_write"] >= 1, "no kill landed during a save: the test proved nothing"
    assert (df["loaded step"] >= df["last acked step"].fillna(0)).all()


@pytest.mark.integration
def test_plain_torch_save_does_lose_it(runs_dir):
    df = sigkill_test(kills=6, size_mb=2, mode="plain", quiet=True)
    assert df.summary["unloadable"] >= 1, df
    assert not any(p.name.startswith("killtest") for p in runs_dir.iterdir()) if runs_dir.exists() else True
