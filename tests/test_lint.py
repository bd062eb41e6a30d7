import pytest

from nbhelpers.runtime import fingerprint
from nbhelpers.diagnosis.lint import Finding, lint_env
from nbhelpers.views.tables import lint_table

IFACES = [
    {"name": "eth0", "up": True, "mtu": 1500, "addresses": ["10.0.0.5"]},
    {"name": "lo", "up": True, "mtu": 65536, "addresses": ["127.0.0.1"]},
    {"name": "ib0", "up": False, "mtu": 2044, "addresses": []},
]


def lint(**env):
    return lint_env(env, interfaces=IFACES)


def only(findings, rule=None):
    chosen = [f for f in findings if rule is None or f.rule == rule]
    assert len(chosen) == 1, findings
    return chosen[0]


# ---------------------------------------------------------------- healthy environments

def test_empty_and_healthy_environments_give_nothing():
    assert lint_env({}) == []
    assert lint_env({"NCCL_DEBUG": "WARN", "MASTER_PORT": "29500"}) == []
    assert lint(NCCL_SOCKET_IFNAME="eth0", GLOO_SOCKET_IFNAME="eth0", TORCH_NCCL_ASYNC_ERROR_HANDLING="3",
                MASTER_ADDR="10.0.0.5", MASTER_PORT="29500", WORLD_SIZE="2", RANK="1", LOCAL_RANK="1",
                NCCL_IB_TIMEOUT="22", NCCL_IB_TC="0x68", TORCH_CPP_LOG_LEVEL="info",
                TORCH_NCCL_BLOCKING_WAIT="false", NCCL_DEBUG_SUBSYS="^INIT,NET") == []


def test_unrelated_variables_are_ignored():
    env = {"HOME": "/root", "PATH": "/usr/bin", "TORCH_HOME": "/x", "MY_NCCL_THING": "1", "API_TOKEN": "s3cret"}
    assert lint_env(env, interfaces=IFACES) == []


def test_real_variables_outside_the_catalog_are_not_unknown():
    assert lint(NCCL_IB_QPS_PER_CONNECTION="4", TORCH_NCCL_HIGH_PRIORITY="1", GLOO_LOG_LEVEL="DEBUG") == []


def test_interfaces_are_not_read_unless_an_ifname_is_set(monkeypatch):
    def boom():
        raise AssertionError("interfaces() must not be called")

    monkeypatch.setattr(fingerprint, "interfaces", boom)
    assert fingerprint.lint_env({"NCCL_DEBUG": "WARN", "NCCL_P2P_DISABLE": "0"}) == []


def test_defaults_to_os_environ(monkeypatch):
    monkeypatch.setenv("NCCL_TIMEOUT", "1800")
    assert any(f.name == "NCCL_TIMEOUT" and f.level == "error" for f in lint_env(interfaces=IFACES))


# ---------------------------------------------------------------- wrong names (error)

def test_nccl_timeout_is_an_error_pointing_at_init_process_group():
    f = only(lint(NCCL_TIMEOUT="1800"))
    assert (f.level, f.rule, f.value) == ("error", "wrong-name", "1800")
    assert "init_process_group" in f.fix and "timeout=timedelta" in f.fix
    assert "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC" in f.fix


@pytest.mark.parametrize("name, hint", [
    ("NCCL_SOCKET_TIMEOUT", "NCCL_SOCKET_RETRY_CNT"),
    ("NCCL_CONNECT_TIMEOUT", "NCCL_SOCKET_RETRY_CNT"),
    ("NCCL_HEARTBEAT_TIMEOUT_SEC", "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"),
    ("ACCELERATE_USE_GLOO", "InitProcessGroupKwargs(backend='gloo')"),
])
def test_other_wrong_names_are_errors_with_the_alternative(name, hint):
    f = only(lint(**{name: "1"}))
    assert (f.level, f.rule) == ("error", "wrong-name")
    assert hint in f.fix


def test_retired_nccl_name_is_a_warning_naming_the_new_one():
    f = only(lint(NCCL_IB_GDR_LEVEL="PIX"))
    assert (f.level, f.rule) == ("warning", "retired")
    assert "NCCL_NET_GDR_LEVEL" in f.fix


# ---------------------------------------------------------------- unknown names

def test_unknown_name_with_close_match_suggests_it():
    f = only(lint(NCCL_DEBUG_SUBSYTEM="INIT"))
    assert (f.level, f.rule) == ("warning", "unknown-name")
    assert "NCCL_DEBUG_SUBSYS" in f.message and f.fix == "Rename it to NCCL_DEBUG_SUBSYS."


@pytest.mark.parametrize("name", ["NCCL_FROBNICATE_LEVEL", "TORCH_NCCL_MAGIC", "TORCH_DISTRIBUTED_XYZZY",
                                  "GLOO_QWERTY"])
def test_unknown_name_without_close_match(name):
    f = only(lint(**{name: "1"}))
    assert (f.level, f.rule) == ("warning", "unknown-name")
    assert "Did you mean" not in f.message


# ---------------------------------------------------------------- deprecated names

@pytest.mark.parametrize("old", ["NCCL_ASYNC_ERROR_HANDLING", "NCCL_BLOCKING_WAIT", "NCCL_DESYNC_DEBUG",
                                 "NCCL_ENABLE_TIMING"])
def test_deprecated_pytorch_names_warn_and_name_the_replacement(old):
    findings = lint(**{old: "0"})
    f = only(findings, "deprecated")
    assert f.level == "warning" and f"TORCH_{old}" in f.message
    assert f.fix == f"Rename {old} to TORCH_{old} (same value)."
    assert not [x for x in findings if x.level == "error"]


def test_deprecated_and_new_both_set_with_different_values_says_which_wins():
    f = only(lint(NCCL_ASYNC_ERROR_HANDLING="1", TORCH_NCCL_ASYNC_ERROR_HANDLING="3"), "deprecated")
    assert "different value (3)" in f.message and "TORCH_NCCL_ASYNC_ERROR_HANDLING wins" in f.message
    assert f.fix == "Remove NCCL_ASYNC_ERROR_HANDLING and keep TORCH_NCCL_ASYNC_ERROR_HANDLING."


def test_deprecated_and_new_both_set_to_same_value():
    f = only(lint(NCCL_BLOCKING_WAIT="1", TORCH_NCCL_BLOCKING_WAIT="1"), "deprecated")
    assert "same value" in f.message and "wins" not in f.message


def test_nccl_deprecated_channels_variable_says_which_value_is_used():
    f = only(lint(NCCL_MAX_NCHANNELS="8", NCCL_MAX_CTAS="16"), "deprecated")
    assert "NCCL_MAX_CTAS" in f.message and "lower" in f.message


def test_alias_of_a_deprecated_name_points_at_the_current_one():
    f = only(lint(NCCL_MAX_NRINGS="4"), "deprecated")
    assert "NCCL_MAX_NCHANNELS" in f.message
    assert f.fix.startswith("Rename NCCL_MAX_NRINGS to NCCL_MAX_CTAS")


def test_obsolete_variable_is_info():
    f = only(lint(TORCH_NCCL_AVOID_RECORD_STREAMS="1"))
    assert (f.level, f.rule) == ("info", "obsolete")


# ---------------------------------------------------------------- debugging settings left on

@pytest.mark.parametrize("name, value, level", [
    ("NCCL_P2P_DISABLE", "1", "warning"),
    ("NCCL_IB_DISABLE", "1", "warning"),
    ("NCCL_SHM_DISABLE", "1", "warning"),
    ("CUDA_LAUNCH_BLOCKING", "1", "info"),
    ("TORCH_DISTRIBUTED_DEBUG", "DETAIL", "info"),
    ("TORCH_DISTRIBUTED_DEBUG", "detail", "info"),
    ("NCCL_DEBUG", "INFO", "info"),
    ("NCCL_DEBUG", "TRACE", "info"),
    ("NCCL_DEBUG_SUBSYS", "ALL", "info"),
    ("NCCL_DEBUG_SUBSYS", "INIT,all", "info"),
    ("NCCL_ALGO", "Ring", "info"),
    ("TORCH_NCCL_DESYNC_DEBUG", "true", "info"),
])
def test_debug_setting_left_on(name, value, level):
    f = only(lint(**{name: value}))
    assert (f.rule, f.level) == ("debug-setting", level)
    assert f.fix.startswith(f"Unset {name}")


@pytest.mark.parametrize("name, value", [
    ("NCCL_P2P_DISABLE", "0"), ("NCCL_IB_DISABLE", "0"), ("CUDA_LAUNCH_BLOCKING", "0"),
    ("TORCH_DISTRIBUTED_DEBUG", "INFO"), ("NCCL_DEBUG", "WARN"), ("NCCL_DEBUG_SUBSYS", "INIT,NET"),
    ("TORCH_NCCL_DESYNC_DEBUG", "0"),
])
def test_debug_setting_off_is_fine(name, value):
    assert lint(**{name: value}) == []


def test_disabling_transports_says_it_hides_the_problem():
    assert "hides" in only(lint(NCCL_P2P_DISABLE="1")).message
    assert "Debugging" in only(lint(NCCL_IB_DISABLE="1")).message


# ---------------------------------------------------------------- bad values

@pytest.mark.parametrize("name, value, words", [
    ("NCCL_IB_TIMEOUT", "abc", "strtoll"),
    ("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", "1.5", "'1.5' silently becomes 1"),
    ("NCCL_DEBUG", "VERBOSE", "VERSION, WARN, INFO"),
    ("TORCH_DISTRIBUTED_DEBUG", "FULL", "must be OFF, INFO, or DETAIL"),
    ("NCCL_P2P_DISABLE", "yes", "accepted: 0, 1"),
    ("TORCH_NCCL_BLOCKING_WAIT", "2", "Invalid value"),
    ("TORCH_SHOW_CPP_STACKTRACES", "true", "accepted: 0, 1"),
    ("MASTER_PORT", "70000", "from 1 to 65535"),
    ("MASTER_PORT", "0", "from 1 to 65535"),
    ("MASTER_PORT", "port", "not an integer"),
    ("NCCL_IB_TIMEOUT", "40", "from 0 to 31"),
    ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "5", "0, 1, 2, 3"),
    ("GLOO_DEVICE_TRANSPORT", "tcp", "Did you mean TCP"),
    ("TORCH_CPP_LOG_LEVEL", "DEBUG", "cannot be parsed"),
    ("WORLD_SIZE", "0", "at least 1"),
])
def test_bad_values_are_errors(name, value, words):
    f = only(lint(**{name: value}), "bad-value")
    assert f.level == "error" and f.value == value
    assert words in f.message


def test_unknown_debug_subsystem_is_a_warning():
    f = only(lint(NCCL_DEBUG_SUBSYS="INIT,NETWORK"))
    assert (f.level, f.rule) == ("warning", "bad-value") and "NETWORK" in f.message


def test_rank_must_be_below_world_size():
    f = only(lint(RANK="2", WORLD_SIZE="2", MASTER_PORT="29500"))
    assert (f.name, f.level, f.rule) == ("RANK", "error", "bad-value")
    assert lint(RANK="1", WORLD_SIZE="2") == []


def test_empty_value_is_treated_as_unset():
    assert lint(NCCL_IB_TIMEOUT="", NCCL_SOCKET_IFNAME="") == []


# ---------------------------------------------------------------- socket interfaces

@pytest.mark.parametrize("spec", ["eth", "=eth0", "^lo", "^docker,lo", "eth0,ib0", "lo"])
def test_nccl_socket_ifname_that_matches(spec):
    assert lint(NCCL_SOCKET_IFNAME=spec) == []


@pytest.mark.parametrize("spec", ["bond", "=eth", "^eth,lo,ib", "=eth9"])
def test_nccl_socket_ifname_that_matches_nothing_is_an_error(spec):
    f = only(lint(NCCL_SOCKET_IFNAME=spec))
    assert (f.level, f.rule, f.value) == ("error", "ifname", spec)
    assert "eth0, lo, ib0" in f.message


def test_nccl_socket_ifname_matching_only_down_interfaces_warns():
    f = only(lint(NCCL_SOCKET_IFNAME="ib"))
    assert (f.level, f.rule) == ("warning", "ifname") and "ib0" in f.message


def test_gloo_socket_ifname_exact_names():
    assert lint(GLOO_SOCKET_IFNAME="eth0") == []
    assert lint(GLOO_SOCKET_IFNAME="eth0,lo") == []
    f = only(lint(GLOO_SOCKET_IFNAME="eth0,eth9"))
    assert (f.level, f.rule) == ("error", "ifname")
    assert "eth9" in f.message and "eth0," not in f.message.split("exist")[0]
    assert only(lint(GLOO_SOCKET_IFNAME="eth")).level == "error"  # a prefix is not enough for gloo
    assert only(lint(GLOO_SOCKET_IFNAME="ib0")).level == "warning"  # exists but down


def test_ifname_against_this_host():
    names = {i["name"] for i in fingerprint.interfaces()}
    if "lo" not in names or {"eth9", "nosuch0"} & names:
        pytest.skip(f"needs a host with lo and without eth9/nosuch0 (has {sorted(names)})")
    assert fingerprint.lint_env({"NCCL_SOCKET_IFNAME": "=lo", "GLOO_SOCKET_IFNAME": "lo"}) == []
    found = {f.name: f for f in fingerprint.lint_env({"NCCL_SOCKET_IFNAME": "=nosuch0", "GLOO_SOCKET_IFNAME": "eth9"})}
    # without interfaces, pure lint checks no interface name: it reads nothing of the machine
    assert lint_env({"NCCL_SOCKET_IFNAME": "=nosuch0", "GLOO_SOCKET_IFNAME": "eth9"}) == []
    assert found["NCCL_SOCKET_IFNAME"].level == found["GLOO_SOCKET_IFNAME"].level == "error"
    assert "lo" in found["NCCL_SOCKET_IFNAME"].message


# ---------------------------------------------------------------- redaction, ordering, frame

def test_secret_values_are_redacted():
    findings = lint(NCCL_IB_PASSWORD="zz_secret_value", NCCL_PROXY_URL="http://bob:hunter2@proxy:3128")
    assert {f.name for f in findings} == {"NCCL_IB_PASSWORD", "NCCL_PROXY_URL"}
    text = repr(findings)
    assert "zz_secret_value" not in text and "hunter2" not in text
    assert {f.value for f in findings} == {"<redacted>", "http://<redacted>@proxy:3128"}


def test_errors_come_first():
    findings = lint(NCCL_DEBUG="INFO", NCCL_TIMEOUT="5", NCCL_P2P_DISABLE="1")
    assert [f.level for f in findings] == ["error", "warning", "info"]


def test_findings_table():
    frame = lint_table(lint(NCCL_TIMEOUT="5", NCCL_DEBUG="INFO"))
    assert list(frame.columns) == ["name", "value", "level", "rule", "message", "fix"]
    assert frame["name"].tolist() == ["NCCL_TIMEOUT", "NCCL_DEBUG"]
    empty = lint_table([])
    assert len(empty) == 0 and list(empty.columns) == list(frame.columns)
    assert isinstance(lint(NCCL_TIMEOUT="5")[0], Finding)
