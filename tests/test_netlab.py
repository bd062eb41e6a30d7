"""The two-host lab, for real (root): namespaces, veth, nft rules, tbf, and that nothing is left behind."""
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import REPO, interruptible, is_root

from nbhelpers.views import incidents
from nbhelpers.scenarios import netlab

pytestmark = [pytest.mark.root, pytest.mark.integration]  # network namespaces: real processes
needs_root = pytest.mark.skipif(not is_root(), reason="network namespaces need root")


def leftovers() -> list[str]:
    return netlab.namespaces(others=False)  # a notebook 05 run on another test worker has labs of its own


@pytest.fixture
def clean():
    netlab.cleanup_stale()
    before = set(leftovers())
    yield
    assert set(leftovers()) <= before, "the lab left namespaces behind"


def test_without_root_the_lab_says_why(monkeypatch):
    monkeypatch.setattr(netlab, "is_root", lambda: False)
    assert "needs root" in netlab.why_not()
    with pytest.raises(netlab.LabError, match="root"):
        netlab.Lab()


@needs_root
def test_lab_caps_bandwidth_then_removes_everything(clean):
    with netlab.Lab() as lab:
        assert set(lab.nodes) <= set(leftovers())
        assert "veth-a" not in subprocess.run(["ip", "link"], capture_output=True, text=True).stdout  # not in the host
        lab.cap_bandwidth("50mbit")
        st = lab.state()
        assert "tbf" in st[lab.a]["qdisc"]
        assert "10.77.0.2/24" in st[lab.b]["addresses"]
        sleeper = subprocess.Popen([*lab.prefix(1), "sleep", "300"])
    assert not set(lab.nodes) & set(leftovers())
    assert sleeper.wait(timeout=5) == -signal.SIGTERM  # processes inside were stopped with the namespace


@needs_root
@pytest.mark.skipif(netlab.firewall_tool() is None, reason=netlab.NO_FIREWALL)
def test_lab_blocks_a_port_with_the_firewall(clean):
    with netlab.Lab() as lab:
        rule = lab.block_port(29500, "reject")
        assert "29500" in rule and "reject" in rule
        assert "29500" in lab.state()[lab.a]["firewall"]
    assert not set(lab.nodes) & set(leftovers())


@needs_root
def test_without_a_firewall_tool_the_port_faults_are_skipped_with_one_sentence(clean, runs_dir, no_firewall):
    assert netlab.firewall_tool() is None
    with netlab.Lab() as lab, pytest.raises(netlab.LabError, match="neither nft nor iptables"):
        lab.block_port(29500)
    table = netlab.run_lab(["port-drop", "ifname-missing"], parallel=2)
    assert table.loc["port-drop", "status"] == "skipped"
    assert table.loc["port-drop", "error"] == netlab.NO_FIREWALL and "apt-get install -y nftables" in netlab.NO_FIREWALL
    assert table.loc["ifname-missing", "status"] == "failed" and table.loc["ifname-missing", "classified right"]
    assert list(table.runs) == ["ifname-missing"]
    assert "port-drop" in incidents.results_markdown(table)


@needs_root
def test_notebook_05_passes_without_a_firewall_tool(tmp_path, runs_dir, no_firewall):
    import papermill

    out = tmp_path / "05.ipynb"
    papermill.execute_notebook(str(REPO / "notebooks" / "05_multi_node.ipynb"), str(out), progress_bar=False,
                               parameters={"LAB_FAULTS": ["port-drop", "ifname-missing"], "LAB_PARALLEL": 2},
                               execution_timeout=600, cwd=str(REPO / "notebooks"))
    text = out.read_text()
    assert "neither nft nor iptables is installed" in text  # the skip is said, and recorded for the report
    assert "lab: scenarios skipped, and why" in text


@needs_root
def test_stale_namespaces_of_dead_owners_are_removed(clean):
    dead = subprocess.Popen(["true"])
    dead.wait()
    name = f"{netlab.PREFIX}{dead.pid}-abcdef-a"
    subprocess.run(["ip", "netns", "add", name], check=True)
    assert name in netlab.cleanup_stale()
    assert name not in leftovers()


@needs_root
def test_an_interrupted_lab_cleans_up(clean):
    code = ("import time; from nbhelpers.scenarios.netlab import Lab\n"
            "with Lab() as lab:\n    print(lab.a, flush=True)\n    time.sleep(60)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, PYTHONPATH=os.getcwd()), preexec_fn=interruptible)
    ns = p.stdout.readline().strip()
    assert ns in leftovers()
    p.send_signal(signal.SIGINT)
    p.wait(timeout=20)
    assert ns not in leftovers()


@needs_root
def test_netem_check_agrees_with_a_real_netem_qdisc_on_the_lab_link(clean):
    with netlab.Lab() as lab:
        res = lab.exec(0, "tc", "qdisc", "add", "dev", lab.ifname(0), "root", "netem", "delay", "5ms", check=False)
    assert netlab.netem_available() == (res.returncode == 0), res.stderr
    assert not [n for n in leftovers() if f"-{os.getpid()}-" in n]  # the scratch namespace is gone


@needs_root
@pytest.mark.skipif(netlab.firewall_tool() is None, reason=netlab.NO_FIREWALL)
def test_faults_end_in_their_real_error_classified(runs_dir, clean):
    t0 = time.monotonic()
    table = netlab.run_lab(["port-drop", "ifname-missing"], parallel=2)
    for fault, row in table.iterrows():
        assert row["status"] == "failed", (fault, row.to_dict())
        assert row["classified right"], (fault, row["category"], row["error"])
    assert "RendezvousConnectionError" in table.loc["port-drop", "error"]
    assert "rendezvous port" in table.loc["port-drop", "checks flag"]  # netcheck saw the drop as a timeout
    assert "Unable to find address for: eth9" in table.loc["ifname-missing", "error"]
    assert "Gloo interface" in table.loc["ifname-missing", "checks flag"]
    assert time.monotonic() - t0 < 120


@needs_root
def test_interrupting_the_lab_runs_stops_them_and_leaves_nothing(clean):
    code = ("import sys; from nbhelpers.scenarios import netlab\n"
            "try:\n    netlab.run_lab(['ifname-lo', 'port-drop'], parallel=2)\n"
            "except KeyboardInterrupt:\n    print('interrupted', netlab.namespaces(), flush=True)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, PYTHONPATH=os.getcwd()), preexec_fn=interruptible)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not [n for n in leftovers() if f"-{p.pid}-" in n]:
        time.sleep(0.2)
    time.sleep(3)  # the worlds are starting inside the namespaces
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=60)
    assert "interrupted []" in out
    assert time.monotonic() - t0 < 30
    assert not [n for n in leftovers() if f"-{p.pid}-" in n]
