import json
import pytest
import os
import subprocess
import sys

from nbhelpers.diagnosis import fingerprint as fp_mod
from nbhelpers.diagnosis.fingerprint import (
    match_ifname,
    nccl_would_pick,
)
from nbhelpers.diagnosis.redact import REDACTED
from nbhelpers.runtime.fingerprint import collect
from nbhelpers.views.tables import fingerprint_table


def test_collect_redacts_secrets_wherever_the_fingerprint_goes(monkeypatch):
    monkeypatch.setenv("TORCH_HUB_TOKEN", "tok_supersecret_1")
    monkeypatch.setenv("MASTER_ADDR", "https://alice:pw_secret@example.org")
    fp = collect()
    shown = json.dumps(fp) + fingerprint_table(fp).to_string()
    assert "tok_supersecret_1" not in shown and "pw_secret" not in shown
    assert fp["env"]["TORCH_HUB_TOKEN"] == REDACTED
    assert fp["torch"].startswith("2.") and fp["gpus"] >= 0 and fp["hostname"]


def test_collect_reports_shm_limits_and_interfaces():
    fp = collect(with_torch=False)
    assert fp["shm_total"] > 0 and fp["memlock"] and fp["nofile"]
    assert any(i["name"] == "lo" and "127.0.0.1" in i["addresses"] for i in fp["interfaces"])


def test_warnings_for_small_shm_missing_iface_and_fake_timeout_var(monkeypatch):
    monkeypatch.setattr(fp_mod, "SHM_WARN_BYTES", 1 << 60)  # every real /dev/shm is "small" now
    fp = collect({"GLOO_SOCKET_IFNAME": "eth9", "NCCL_TIMEOUT": "1800"}, with_torch=False)
    text = "\n".join(fp["warnings"])
    assert "/dev/shm" in text and "eth9" in text and "NCCL_TIMEOUT" in text


def test_ifname_syntax_matches_nccls_rules():
    names = ["eth0", "eth1", "ib0", "lo", "docker0"]
    assert match_ifname(names, "eth") == ["eth0", "eth1"]
    assert match_ifname(names, "=eth") == []
    assert match_ifname(names, "=eth1") == ["eth1"]
    assert match_ifname(names, "^docker,lo") == ["eth0", "eth1", "ib0"]
    assert match_ifname(names, "^=eth0") == ["eth1", "ib0", "lo", "docker0"]
    ifaces = [{"name": n, "up": True, "addresses": ["x"], "mtu": 1500} for n in names]
    assert nccl_would_pick(ifaces, {}) == "ib0"
    assert nccl_would_pick(ifaces[3:], {}) == "docker0"
    assert nccl_would_pick(ifaces, {"NCCL_SOCKET_IFNAME": "bond"}).startswith("none matches")


@pytest.mark.integration
def test_fingerprint_is_the_probes_first_stage_output():
    env = dict(os.environ, RANK="0", NCCL_IB_PASSWORD="zz_secret_value")
    out = subprocess.run([sys.executable, "-c", "from nbhelpers.runtime.events import stage\nfrom nbhelpers.runtime.fingerprint import collect\n"
                          "with stage('fingerprint') as o: o['fingerprint'] = collect(with_torch=False)"],
                         capture_output=True, text=True, env=env, check=True).stdout
    assert "zz_secret_value" not in out and "NCCL_IB_PASSWORD" in out
