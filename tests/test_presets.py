import shlex

import pytest

from nbhelpers.diagnosis.lint import lint_env
from nbhelpers.errors import ConfigError
from nbhelpers.runtime.launchconfig import Config, parse_timeout
from nbhelpers.views.incidents import advice_lint_table, presets_table
from nbhelpers.scenarios.presets import (
    ADVISED_EXPORTS,
    omp_threads_per_rank,
    preset,
    presets,
)

IFACES = [{"name": "eth0", "up": True, "mtu": 1500, "addresses": ["10.0.0.5"]},
          {"name": "lo", "up": True, "mtu": 65536, "addresses": ["127.0.0.1"]}]


def test_the_four_launch_script_presets_exist_and_explain_every_variable():
    ps = presets()
    assert list(ps) == ["basic", "gpu_cache", "prefetch", "conservative"]
    for p in ps.values():
        assert p.changes and all(c.why for c in p.changes) and all(d.why for d in p.dropped)
        table = p.table()
        assert table["why"].str.len().min() > 20
        assert "process-group timeout" in set(table["variable"])


def test_corrected_presets_lint_clean_while_the_advised_exports_do_not():
    for p in presets().values():
        found = lint_env(p.env, interfaces=IFACES)
        assert [f for f in found if f.level in ("error", "warning")] == [], (p.name, found)
        assert p.config().problems(IFACES) == []
    advice = advice_lint_table(IFACES)
    errors = advice[advice.level == "error"]
    assert {"NCCL_TIMEOUT", "NCCL_SOCKET_TIMEOUT", "NCCL_CONNECT_TIMEOUT"} <= set(errors["name"])
    assert set(advice["advised"]) == set(ADVISED_EXPORTS)


def test_advised_settings_are_dropped_or_renamed_never_kept():
    for p in presets().values():
        assert not {"NCCL_TIMEOUT", "NCCL_BLOCKING_WAIT", "NCCL_ASYNC_ERROR_HANDLING"} & set(p.env)
        assert {"NCCL_TIMEOUT", "NCCL_IB_DISABLE", "NCCL_P2P_DISABLE"} <= {d.name for d in p.dropped}
        assert p.env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1"


def test_conservative_is_the_debugging_preset_with_a_short_timeout():
    c = preset("conservative")
    assert c.env["TORCH_DISTRIBUTED_DEBUG"] == "DETAIL" and c.env["NCCL_DEBUG"] == "INFO"
    assert c.env["NCCL_DEBUG_SUBSYS"] != "ALL"
    assert c.timeout_s < preset("basic").timeout_s
    assert "CUDA_LAUNCH_BLOCKING" in {d.name for d in c.dropped}
    debug = {f.name for f in lint_env(c.env) if f.rule == "debug-setting"}
    assert "TORCH_DISTRIBUTED_DEBUG" in debug  # flagged as debugging, on purpose


def test_prefetch_sizes_threads_to_the_node():
    assert omp_threads_per_rank(2, cores=16) == 8 and omp_threads_per_rank(8, cores=4) == 1
    assert preset("prefetch", nproc_per_node=1).env["OMP_NUM_THREADS"] == str(omp_threads_per_rank(1))
    assert "prefetch_factor" in preset("prefetch").in_code
    with pytest.raises(KeyError, match="choose one of"):
        preset("turbo")
    assert list(presets_table().index) == list(presets())


@pytest.mark.parametrize("text,want", [("30", 30), (" 600 ", 600), (5, 5), (2.0, 2)])
def test_parse_timeout_accepts_whole_seconds(text, want):
    assert parse_timeout(text) == (want, "")


@pytest.mark.parametrize("text", ["1.5", 1.5, "30s", "", "0", 0, "-3", True])
def test_parse_timeout_refuses_the_rest(text):
    seconds, why = parse_timeout(text)
    assert seconds is None and why


def test_config_check_lists_every_problem():
    cfg = Config("bad", {"NCCL_TIMEOUT": "1800", "NCCL_DEBUG": "LOUD"}, timeout_s="1.5")
    with pytest.raises(ConfigError) as info:
        cfg.check(IFACES)
    assert len(info.value.problems) == 3
    assert "What to do" in str(info.value)


def test_exports_are_valid_shell_and_carry_the_timeout_as_code():
    cfg = preset("basic").config(timeout_s=90).variant("mine", NCCL_DEBUG=None, GLOO_SOCKET_IFNAME="lo",
                                                       NCCL_IB_HCA="=mlx5_0:1 x")
    snippet = cfg.shell_snippet()
    assert "NCCL_DEBUG" not in snippet and "timedelta(seconds=90)" in snippet
    exports = [ln for ln in snippet.splitlines() if ln.startswith("export ")]
    assert shlex.split(exports[1]) == ["export", "NCCL_IB_HCA==mlx5_0:1 x"]  # quoted correctly
    line = cfg.torchrun_command("train.py", ["--lr", "0.1"], nproc=4)
    words = shlex.split(line)
    assert words[words.index("torchrun") - 1].startswith("TORCH_NCCL_")  # env prefix, then torchrun
    assert words[-4:] == ["4", "train.py", "--lr", "0.1"]
    assert cfg.worker_command("probe").endswith("-m nbhelpers.workers.probe --timeout 90")
