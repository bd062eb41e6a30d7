"""The NCCL log parser on real lines: the shipped sample (public issues) and the shared corpus."""
import json

import pytest
from conftest import SHARED, has_gpus

from nbhelpers.diagnosis.nccllog import sample_log
from nbhelpers.scenarios.nccl import nccl_debug_run
from nbhelpers.views.tables import channel_table, nccl_chart, nccl_frame, nccl_summary, parse_logs, parse_nccl

CORPUS = SHARED / "corpus" / "real_failure_logs.dev.jsonl"


@pytest.fixture(scope="module")
def sample():
    return parse_nccl(sample_log())


def test_sample_lines_all_carry_their_source_url():
    blocks = sample_log().split("\n# source: ")[1:]
    assert len(blocks) >= 15
    assert all(b.startswith("https://github.com/") for b in blocks)


def test_every_nccl_line_of_the_sample_is_read(sample):
    nccl_lines = [ln for ln in sample_log().splitlines() if "NCCL" in ln and not ln.startswith("#")]
    assert len(sample) == len(nccl_lines)
    assert (sample["kind"] != "other").sum() >= 40


def test_versions_networks_and_interfaces(sample):
    assert set(sample[sample.kind == "version"]["value"]) == {"2.19.3", "2.5.6"}
    v = sample[sample.kind == "version"].iloc[0]
    assert v["host"] == "dgxh100-4" and v["detail"] == "cuda 12.3"  # bare line attributed to its process
    assert set(sample[sample.kind == "network"]["value"]) == {"IB", "Socket"}
    ib = sample[(sample.kind == "net_devices") & (sample.host == "dgxh100-4")].iloc[0]
    assert ib["transport"] == "NET/IB" and ib["interface"] == "mlx5_10:1/RoCE, mlx5_11:1/RoCE"
    sock = sample[(sample.kind == "net_devices") & (sample.host == "instance-8g-96c-3") &
                  (sample.transport == "NET/Socket")].iloc[0]
    assert sock["interface"] == "ens7 (10.128.0.32)"
    v6 = sample[(sample.kind == "net_devices") & (sample.pid == 97)].iloc[0]
    assert v6["interface"].startswith("ip6tnl0 (fe80::") and "veth0 (2a02:" in v6["interface"]
    boot = sample[(sample.kind == "bootstrap") & (sample.host == "hostname-test")].iloc[0]
    assert boot["interface"] == "bond0 (172.36.134.184)"
    env = sample[sample.kind == "env"]
    assert ("NCCL_SOCKET_IFNAME", "bond0") in set(zip(env["detail"], env["value"]))


def test_channels_transports_and_direction(sample):
    ch = channel_table(sample)
    assert set(ch["transport"]) == {"P2P", "SHM", "NET/IB", "NET/Socket"}
    recv = ch[ch.direction == "receive"].iloc[0]  # printed by the receiving rank: 7 -> 14 [receive]
    assert (recv["rank"], recv["peer"], recv["transport"], recv["gdr"]) == (14, 7, "NET/IB", True)
    send = ch[(ch.host == "machine-2")].iloc[0]
    assert (send["rank"], send["peer"], send["direction"]) == (7, 14, "send")
    shared = ch[ch.detail == "GDRDMA/Shared"].iloc[0]
    assert shared["interface"] == "NET/IB device 9"
    assert "direct pointer" in set(ch["detail"])  # a transport name with a space (older NCCL)
    old = sample[(sample.kind == "channel") & (sample.value == "Ring")]
    assert len(old) == 2 and set(old["rank"]) == {12, 1}  # NCCL 2.7-era "Ring" lines, bare [dev] prefix
    assert set(ch[ch.host == "g340-cd51-4900-b72a-d104-a9bf-df48"]["channel"]) == {27}  # logging prefix


def test_init_complete_gives_ranks_and_the_summary(sample):
    done = sample[sample.kind == "init_complete"]
    assert set(zip(done["host"], done["rank"], done["nranks"])) >= {("swat1-04", 6, 16), ("H20-GPU-06", 2, 4)}
    s = nccl_summary(sample)
    row = s[(s.host == "instance-8g-96c-3")].iloc[0]
    assert (row["rank"], row["network"], row["version"]) == ("0", "Socket", "2.19.3")
    assert s[s.host == "g148"].iloc[0]["warnings"] == 1
    assert s[s.host == "g148"].iloc[0]["transports"] == "P2P x1, NET/IB x1"
    fig = nccl_chart(sample)
    assert {t.name for t in fig.data} == {"P2P", "SHM", "NET/IB", "NET/Socket"}


def test_net_device_index_resolves_to_the_interface_of_the_same_process():
    # Two lines in the formats of nccl-tests#185 and nccl#429, given the same process so the index resolves.
    text = ("n1:100:200 [0] NCCL INFO NET/IB : Using [0]mlx5_10:1/RoCE [1]mlx5_11:1/RoCE [RO]; OOB eth0:10.0.0.1<0>\n"
            "n1:100:200 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/1/GDRDMA\n")
    ch = channel_table(parse_nccl(text))
    assert ch.iloc[0]["interface"] == "mlx5_11:1/RoCE"


@pytest.mark.skipif(not CORPUS.exists(), reason=f"shared corpus not found at {CORPUS}")
def test_every_nccl_line_in_the_real_corpus_is_read():
    total = 0
    for raw in CORPUS.read_text().splitlines():
        item = json.loads(raw)
        lines = [ln for ln in item["log"].splitlines() if " NCCL INFO " in ln or " NCCL WARN " in ln]
        if not lines:
            continue
        df = parse_nccl(lines)
        total += len(lines)
        assert len(df) == len(lines), item["id"]
        assert df["host"].notna().all(), item["id"]
        assert (df[df.level == "WARN"]["kind"] == "warn").all()
    assert total >= 40


def test_parse_logs_keeps_the_launchers_rank():
    df = parse_logs({0: "no nccl here\n", 1: "[1] NCCL INFO Ring 00 : 1[23000] -> 8[1e000] [send] via NET/IB/1/GDRDMA"})
    assert list(df["log_rank"]) == [1] and list(df["rank"]) == [1]


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpus(1), reason="needs a CUDA GPU (NCCL)")
def test_real_nccl_debug_log_is_parsed(runs_dir):
    res, lines = nccl_debug_run()
    df = nccl_frame(lines)
    assert res.ok, res.verdict
    assert (df.kind == "version").any() and (df.kind == "init_complete").sum() == res.nproc
    if res.nproc >= 2:
        assert len(channel_table(df)) > 0


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpus(2), reason="needs 2 CUDA GPUs (NCCL channels)")
def test_p2p_disable_changes_the_transport_in_the_table(runs_dir):
    from nbhelpers.scenarios.nccl import nccl_transport_ab

    t = nccl_transport_ab(settings=({}, {"NCCL_P2P_DISABLE": "1"}), nproc=2)
    assert (t["status"] == "ok").all(), t
    assert "P2P" not in (t.loc["NCCL_P2P_DISABLE=1", "transports"] or ""), t
