"""Connectivity checks against real sockets on loopback: port states, interface choice, latency/throughput."""
import socket
import threading

import pytest

from nbhelpers.views import incidents
from nbhelpers.runtime.ports import free_port
from nbhelpers.scenarios import netcheck


def test_resolve_flags_loopback_and_unknown_names():
    assert netcheck.resolve("localhost")["loopback"]
    bad = netcheck.resolve("no-such-host.invalid")
    assert bad["addresses"] == [] and bad["error"]


def test_probe_port_tells_open_from_refused():
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        port = srv.getsockname()[1]
        assert netcheck.probe_port("127.0.0.1", port)["state"] == "open"
    refused = netcheck.probe_port("127.0.0.1", port)
    assert refused["state"] == "refused" and "nothing listens" in refused["hint"]


def test_scan_and_firewall_hint():
    scan = netcheck.scan_ports("127.0.0.1", [free_port(), free_port()], timeout=1)
    assert set(scan["state"]) == {"refused"}
    assert "no firewall" in netcheck.firewall_hint(scan["state"])
    assert "firewall" in netcheck.firewall_hint(["refused", "timeout"]) and "DROP" in netcheck.firewall_hint(["timeout"])


@pytest.mark.parametrize("spec,names,want", [
    ("eth", ["lo", "eth0", "eth1", "ens5"], ["eth0", "eth1"]),        # prefix
    ("=eth0", ["eth0", "eth01", "lo"], ["eth0"]),                     # exact
    ("^docker,lo", ["lo", "docker0", "eth0", "ib0"], ["eth0", "ib0"]),  # exclude prefixes
    ("^=eth0", ["eth0", "eth01"], ["eth01"]),                         # exclude exact
    ("eth,ib", ["ib0", "eth0", "lo"], ["ib0", "eth0"]),
])
def test_nccl_ifname_syntax(spec, names, want):
    assert netcheck.nccl_match(spec, names) == want


@pytest.mark.integration
def test_gloo_and_nccl_picks_here():
    missing = netcheck.gloo_pick("eth9")
    assert missing["picks"] == "" and "Unable to find address for: eth9" in missing["why"]
    assert netcheck.gloo_pick("lo")["picks"] == "lo"
    assert netcheck.nccl_pick("=nosuchif")["picks"] == ""
    default = netcheck.nccl_pick(None)
    assert default["picks"] and "unset" in default["setting"]
    table = netcheck.would_pick({"GLOO_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "lo"}, master="127.0.0.1")
    assert list(table["ok"]) == [True, True] and set(table["route to master"]) == {"lo"}


@pytest.mark.integration
def test_route_and_mtu_of_loopback():
    r = netcheck.route_to("127.0.0.1")
    assert r["dev"] == "lo" and r["mtu"] and r["mtu"] > 1000


def test_measure_against_the_bounded_server():
    port, ready = free_port(), threading.Event()
    t = threading.Thread(target=netcheck.serve, args=(port, 5.0, "127.0.0.1", ready.set), daemon=True)
    t.start()
    assert ready.wait(5)
    m = netcheck.measure("127.0.0.1", port, pings=5, bulk_mb=2)
    assert m["acked"] and m["MB/s"] > 1 and m["rtt ms (median)"] < 100
    t.join(8)
    assert not t.is_alive()  # it stops by itself


@pytest.mark.integration
def test_check_path_flags_a_loopback_master_and_a_closed_port():
    rows = {r["check"]: r for r in netcheck.check_path("127.0.0.1", free_port(), ports=[], timeout=1)}
    assert not rows["resolve master"]["ok"] and "127" in rows["resolve master"]["what to do"]
    port_row = next(r for k, r in rows.items() if k.startswith("rendezvous port"))
    assert not port_row["ok"] and port_row["found"].startswith("refused")
    assert incidents.check_table(list(rows.values())).shape[0] == len(rows)
