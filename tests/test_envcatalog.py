import re
import subprocess
import sys
from urllib.parse import urlparse

import pytest

from nbhelpers.diagnosis import envcatalog as ec

# The variables the workbook's notebooks and the brief rely on: they must stay in the catalog.
REQUIRED = [
    "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", "NCCL_SOCKET_IFNAME", "NCCL_SOCKET_FAMILY",
    "NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD", "NCCL_IB_DISABLE", "NCCL_IB_HCA", "NCCL_IB_TIMEOUT",
    "NCCL_IB_RETRY_CNT", "NCCL_IB_GID_INDEX", "NCCL_IB_TC", "NCCL_IB_SL", "NCCL_NET_GDR_LEVEL", "NCCL_NET",
    "NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_SHM_DISABLE", "NCCL_BUFFSIZE", "NCCL_ALGO", "NCCL_PROTO",
    "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_CUMEM_ENABLE", "NCCL_NVLS_ENABLE", "NCCL_CROSS_NIC",
    "NCCL_TOPO_FILE", "NCCL_LAUNCH_MODE",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_BLOCKING_WAIT", "TORCH_NCCL_DESYNC_DEBUG",
    "TORCH_NCCL_ENABLE_TIMING", "TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_NCCL_DUMP_ON_TIMEOUT",
    "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", "TORCH_NCCL_ENABLE_MONITORING", "TORCH_NCCL_AVOID_RECORD_STREAMS",
    "TORCH_NCCL_USE_COMM_NONBLOCKING", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
    "TORCH_DISTRIBUTED_DEBUG", "TORCH_CPP_LOG_LEVEL", "TORCH_SHOW_CPP_STACKTRACES", "GLOO_SOCKET_IFNAME",
    "GLOO_DEVICE_TRANSPORT", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK",
    "CUDA_LAUNCH_BLOCKING", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "PYTORCH_CUDA_ALLOC_CONF",
    "TORCH_DISABLE_SHARE_RDZV_TCP_STORE",
]


def _https(url: str) -> bool:
    parts = urlparse(url)
    return parts.scheme == "https" and bool(parts.netloc)


def test_required_variables_are_cataloged():
    missing = [n for n in REQUIRED if n not in ec.CATALOG]
    assert not missing


def test_keys_match_names_and_look_like_env_vars():
    for key, var in ec.CATALOG.items():
        assert key == var.name
        assert re.fullmatch(r"[A-Z][A-Z0-9_]*", key), key


def test_every_entry_has_source_url_and_meaning():
    for var in ec.CATALOG.values():
        assert _https(var.source), (var.name, var.source)
        assert var.meaning and var.meaning.endswith("."), var.name
    for table in (ec.KNOWN_WRONG, ec.RETIRED):
        for wrong in table.values():
            assert _https(wrong.source) and wrong.why and wrong.instead, wrong.name
    assert all(_https(url) for url in ec.OTHER_KNOWN.values())


def test_every_deprecated_entry_points_to_an_existing_live_entry():
    deprecated = [v for v in ec.CATALOG.values() if v.deprecated_alias_of]
    assert len(deprecated) >= 5
    for var in deprecated:
        seen = {var.name}
        target = ec.CATALOG[var.deprecated_alias_of]  # KeyError = dangling alias
        while target.deprecated_alias_of:  # chains (NCCL_MAX_NRINGS -> NCCL_MAX_NCHANNELS -> ...) end
            assert target.name not in seen, f"alias cycle through {target.name}"
            seen.add(target.name)
            target = ec.CATALOG[target.deprecated_alias_of]
        assert var.both_set, f"{var.name} must say which name wins when both are set"
        assert var.type == ec.CATALOG[var.deprecated_alias_of].type


def test_pytorch_deprecated_nccl_names():
    for old in ("NCCL_ASYNC_ERROR_HANDLING", "NCCL_BLOCKING_WAIT", "NCCL_DESYNC_DEBUG", "NCCL_ENABLE_TIMING"):
        assert ec.lookup(old).deprecated_alias_of == "TORCH_" + old
        assert "TORCH_" + old in ec.lookup(old).both_set


def test_defaults_are_valid_values():
    for var in ec.CATALOG.values():
        if var.default is None:
            continue
        if var.type in ("enum", "bool"):
            allowed = var.allowed if var.case_sensitive else [a.upper() for a in var.allowed]
            assert (var.default if var.case_sensitive else var.default.upper()) in allowed, var.name
        elif var.type in ("int", "port"):
            value = int(var.default)
            assert var.minimum is None or value >= var.minimum, var.name
            assert var.maximum is None or value <= var.maximum, var.name
        elif var.type == "list":
            assert all(t in var.allowed for t in var.default.split(",")), var.name


def test_value_tables_are_consistent():
    for var in ec.CATALOG.values():
        if var.type in ("enum", "bool", "list"):
            assert var.allowed, f"{var.name} needs its accepted values"
        if var.debug_only:
            assert var.debug_why, var.name
            if var.type in ("enum", "list"):
                assert set(var.debug_values) <= set(var.allowed), var.name
        else:
            assert not var.debug_values, var.name
        if var.minimum is not None and var.maximum is not None:
            assert var.minimum <= var.maximum, var.name


def test_nccl_debugging_section_and_costly_settings_are_debug_only():
    for name in ("NCCL_P2P_DISABLE", "NCCL_IB_DISABLE", "NCCL_SHM_DISABLE", "NCCL_ALGO", "NCCL_PROTO",
                 "CUDA_LAUNCH_BLOCKING"):
        assert ec.lookup(name).debug_only, name
    assert ec.lookup("TORCH_DISTRIBUTED_DEBUG").debug_values == ("DETAIL",)
    assert set(ec.lookup("NCCL_DEBUG").debug_values) == {"INFO", "TRACE"}
    for name in ("NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_IB_TIMEOUT", "MASTER_PORT"):
        assert not ec.lookup(name).debug_only, name


def test_wrong_and_known_tables_do_not_overlap_the_catalog():
    assert {"NCCL_TIMEOUT", "NCCL_SOCKET_TIMEOUT", "NCCL_CONNECT_TIMEOUT", "ACCELERATE_USE_GLOO"} <= set(
        ec.KNOWN_WRONG)
    for table in (ec.KNOWN_WRONG, ec.RETIRED, ec.OTHER_KNOWN):
        assert not set(table) & set(ec.CATALOG)
    assert not set(ec.KNOWN_WRONG) & set(ec.OTHER_KNOWN)
    assert "init_process_group" in ec.KNOWN_WRONG["NCCL_TIMEOUT"].instead
    assert not any(w.retired for w in ec.KNOWN_WRONG.values())
    assert all(w.retired for w in ec.RETIRED.values())


def test_lookup():
    var = ec.lookup("NCCL_IB_TIMEOUT")
    assert var.type == "int" and var.default == "20" and (var.minimum, var.maximum) == (0, 31)
    assert ec.lookup("NCCL_TIMEOUT") is None
    assert ec.lookup("nccl_debug") is None  # environment names are case-sensitive
    assert ec.wrong_name("NCCL_TIMEOUT").name == "NCCL_TIMEOUT"
    assert ec.wrong_name("NCCL_IB_GDR_LEVEL").retired
    assert ec.is_known("NCCL_IB_QPS_PER_CONNECTION") and not ec.is_known("NCCL_TIMEOUT")


def test_the_catalog_as_a_table():
    from nbhelpers.views.tables import env_catalog

    frame = env_catalog()
    assert len(frame) == len(ec.CATALOG)
    assert {"name", "type", "default", "allowed", "meaning", "deprecated_alias_of", "debug_only",
            "source"} <= set(frame.columns)
    row = frame.set_index("name").loc["NCCL_DEBUG"]
    assert row["type"] == "enum" and "TRACE" in row["allowed"] and row["debug_only"]
    assert frame.set_index("name").loc["NCCL_BLOCKING_WAIT", "deprecated_alias_of"] == "TORCH_NCCL_BLOCKING_WAIT"


@pytest.mark.integration
def test_import_pulls_in_neither_torch_nor_pandas():
    code = ("import sys, nbhelpers.diagnosis.envcatalog, nbhelpers.diagnosis.lint; "
            "print('torch' in sys.modules, 'pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.parametrize("name", ["NCCL_SOCKET_TIMEOUT", "NCCL_CONNECT_TIMEOUT"])
def test_socket_timeout_advice_points_at_real_knobs(name):
    instead = ec.KNOWN_WRONG[name].instead
    assert "NCCL_SOCKET_RETRY_CNT" in instead and "NCCL_SOCKET_RETRY_CNT" in ec.CATALOG
    assert "init_process_group" in instead
