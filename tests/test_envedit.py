"""Drive the editor's widget objects as a user would (no browser): type, click, read the answer."""
import pytest

from nbhelpers.errors import ConfigError
from nbhelpers.views.envedit import EnvEditor, env_editor

IFACES = [{"name": "eth0", "up": True, "mtu": 1500, "addresses": ["10.0.0.5"]},
          {"name": "lo", "up": True, "mtu": 65536, "addresses": ["127.0.0.1"]}]


@pytest.fixture
def ed():
    return EnvEditor(interfaces=IFACES)


def type_and_set(ed, name, value):
    ed.var.value = name
    ed.value.value = value
    live = ed.check.value  # what the user sees before clicking
    ed.set_button.click()
    return live


@pytest.mark.parametrize("text", ["2.5", "30s", "10m", "abc", "", "0", "-5"])
def test_non_integer_or_nonpositive_process_group_timeouts_are_refused(ed, text):
    ed.timeout.value = "45"
    assert ed.timeout_s == 45
    ed.timeout.value = text
    assert ed.timeout_s == 45  # unchanged
    assert "Refused" in ed.timeout_check.value
    assert ("whole number" in ed.timeout_check.value) or ("at least 1" in ed.timeout_check.value)


def test_non_integer_timeout_variable_is_refused_with_the_parser_consequence(ed):
    live = type_and_set(ed, "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", "1.5")
    assert "would be refused" in live
    assert "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC" not in ed.env
    assert "Refused" in ed.status.value and "not an integer" in ed.status.value
    assert "std::stoi" in ed.status.value  # the reason: what PyTorch would silently do
    type_and_set(ed, "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", "300")
    assert ed.env["TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"] == "300"


@pytest.mark.parametrize("level", ["LOUD", "DEBUG", "verbose"])
def test_unknown_nccl_debug_level_is_refused(ed, level):
    type_and_set(ed, "NCCL_DEBUG", level)
    assert "NCCL_DEBUG" not in ed.env
    assert "is not one of VERSION, WARN, INFO" in ed.status.value


def test_known_nccl_debug_level_is_accepted_case_insensitively_and_listed(ed):
    ed.var.value = "NCCL_DEBUG"
    assert "INFO" in ed.value.options and "WARN" in ed.value.options  # typed input: the accepted values
    assert "How much NCCL logs" in ed.doc.value
    type_and_set(ed, "NCCL_DEBUG", "info")
    assert ed.env == {"NCCL_DEBUG": "info"}
    assert "debug-setting" in ed.lint.value  # INFO is a debugging level: shown live, not refused
    assert "export NCCL_DEBUG=info" in ed.export.value


@pytest.mark.parametrize("name", ["GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"])
def test_missing_interface_name_is_refused(ed, name):
    ed.var.value = name
    assert set(ed.value.options) == {"eth0", "lo"}  # this host's interfaces are offered
    type_and_set(ed, name, "eth9")
    assert name not in ed.env
    assert "Refused" in ed.status.value and "eth0, lo" in ed.status.value
    type_and_set(ed, name, "lo")
    assert ed.env[name] == "lo"


def test_names_nothing_reads_are_refused_with_what_to_do_instead(ed):
    type_and_set(ed, "NCCL_TIMEOUT", "1800")
    assert ed.env == {}
    assert "init_process_group" in ed.status.value
    type_and_set(ed, "NCCL_DEBUGG", "INFO")
    assert ed.env == {} and "Did you mean NCCL_DEBUG" in ed.status.value


def test_deprecated_name_is_accepted_and_flagged_live(ed):
    type_and_set(ed, "NCCL_ASYNC_ERROR_HANDLING", "1")
    assert ed.env == {"NCCL_ASYNC_ERROR_HANDLING": "1"}
    assert "deprecated" in ed.lint.value and "TORCH_NCCL_ASYNC_ERROR_HANDLING" in ed.lint.value


def test_preset_loads_env_and_timeout_and_remove_unsets(ed):
    ed.preset.value = "conservative"
    assert ed.env["TORCH_DISTRIBUTED_DEBUG"] == "DETAIL" and ed.timeout_s == 120
    assert ed.timeout.value == "120"
    ed.var.value = "TORCH_DISTRIBUTED_DEBUG"
    assert ed.value.value == "DETAIL"  # the current value is shown for editing
    ed.remove_button.click()
    assert "TORCH_DISTRIBUTED_DEBUG" not in ed.env
    cfg = ed.config()
    assert cfg.timeout_s == 120 and "timedelta(seconds=120)" in ed.export.value


def test_refused_config_is_not_launched(runs_dir):
    ed = EnvEditor(interfaces=IFACES)
    ed.env["GLOO_SOCKET_IFNAME"] = "eth9"  # forced past the checks, as a pasted script would
    with pytest.raises(ConfigError, match="eth9"):
        ed.config()
    assert ed.launch() is None
    assert "refused before launch" in ed.result.value
    assert not runs_dir.exists()  # nothing was started


def test_initial_env_with_an_error_is_refused():
    with pytest.raises(ValueError, match="not one of"):
        env_editor(env={"TORCH_DISTRIBUTED_DEBUG": "FULL"}, interfaces=IFACES)


def test_attempts_table_goes_through_the_same_checks(ed):
    t = ed.attempts([("NCCL_DEBUG", "LOUD"), ("GLOO_SOCKET_IFNAME", "eth9"), ("timeout", "2.5"),
                     ("NCCL_DEBUG", "WARN"), ("timeout", "20")])
    assert list(t["accepted"]) == [False, False, False, True, True]
    assert t["reason"].iloc[2].startswith("'2.5' is not a whole number")
    assert ed.env == {"NCCL_DEBUG": "WARN"} and ed.timeout_s == 20


@pytest.mark.integration
def test_launch_button_runs_a_checked_config_for_real(runs_dir):
    ed = EnvEditor(interfaces=IFACES, worker="allreduce_bench", timeout_s=10)
    type_and_set(ed, "GLOO_SOCKET_IFNAME", "lo")
    type_and_set(ed, "OMP_NUM_THREADS", "1")
    ed.launch_button.click()
    res = ed.last_result
    assert res is not None and res.ok, res
    assert "ok</b>" in ed.result.value
    assert "--timeout 10" in " ".join(res.command)
    assert any(e.get("threads") == 1 for e in res.events if e.get("stage") == "compute")


def test_retired_nccl_names_are_refused_because_they_do_nothing(ed):
    type_and_set(ed, "NCCL_IB_GDR_LEVEL", "2")
    assert ed.env == {} and "NCCL_NET_GDR_LEVEL" in ed.status.value
