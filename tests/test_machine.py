"""Machine claims between real processes: a measurement waits for running worlds and holds new ones back."""
import subprocess
import sys
import time

import pytest
from conftest import REPO

from nbhelpers.runtime import machine

HOLD = ("import sys, time\nfrom nbhelpers.runtime import machine\n"
        "with machine.{kind}():\n    print('held', time.time(), flush=True)\n    time.sleep(float(sys.argv[1]))\n"
        "print('released', time.time(), flush=True)\n")


@pytest.fixture
def lock(tmp_path, monkeypatch):
    path = tmp_path / "machine.lock"
    monkeypatch.setenv(machine.ENV, str(path))
    return path


def holder(kind: str, seconds: float) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", HOLD.format(kind=kind), str(seconds)], stdout=subprocess.PIPE,
                         text=True, cwd=REPO, stdin=subprocess.DEVNULL)
    return p


def stamps(p: subprocess.Popen) -> dict[str, float]:
    out, _ = p.communicate(timeout=30)
    return {w: float(t) for w, t in (ln.split() for ln in out.splitlines())}


def test_without_the_variable_every_claim_is_free(tmp_path, monkeypatch):
    monkeypatch.delenv(machine.ENV, raising=False)
    t0 = time.monotonic()
    with machine.exclusive(), machine.shared(), machine.exclusive():
        pass
    assert time.monotonic() - t0 < 0.5
    assert not list(tmp_path.iterdir())


@pytest.mark.integration
def test_a_measurement_waits_for_a_running_world_then_holds_new_ones_back(lock):
    world = holder("shared", 1.5)
    assert world.stdout.readline().startswith("held")  # the world is running
    t0 = time.time()
    with machine.exclusive():
        got = time.time()
        late = holder("shared", 0)  # a world started during the measurement
        time.sleep(1.0)
        done = time.time()
    held_at = stamps(late)["held"]
    assert got - t0 >= 1.0, "the measurement did not wait for the running world"
    assert held_at >= done - 0.05, "a world ran during the measurement"
    world.wait(10)


@pytest.mark.integration
def test_a_stream_of_short_worlds_does_not_starve_a_measurement(lock):
    loop = ("import time\nfrom nbhelpers.runtime import machine\nend = time.time() + 6\n"
            "while time.time() < end:\n    with machine.shared():\n        time.sleep(0.2)\n")
    worlds = [subprocess.Popen([sys.executable, "-c", loop], cwd=REPO, stdin=subprocess.DEVNULL) for _ in range(3)]
    time.sleep(1.0)
    t0 = time.monotonic()
    with machine.exclusive():
        waited = time.monotonic() - t0
    for w in worlds:
        w.wait(15)
    assert waited < 2.0, f"the measurement waited {waited:.1f} s behind worlds that kept starting"


@pytest.mark.integration
def test_a_measurements_own_worlds_and_a_world_that_measures_do_not_deadlock(lock):
    t0 = time.monotonic()
    with machine.exclusive(), machine.shared():  # the runs a sweep times
        pass
    with machine.shared(), machine.exclusive():  # a measurement started while this process has a world running
        pass
    assert time.monotonic() - t0 < 1.0
    assert machine._state == {"shared": 0, "fd": None, "exclusive": 0}
