"""Helpers for the distributed-training troubleshooting workbook.

Importing this package starts nothing and imports neither torch nor plotly; each function loads
what it needs when called.
"""
from __future__ import annotations

import sys
import types

__version__ = "0.1.0"

_EXPORTS = {
    "Run": "launcher", "RunResult": "launcher", "launch": "launcher",
    "probe": "diagnose", "scale_up": "diagnose", "setup_notebook": "diagnose", "fault_gallery": "diagnose",
    "remedy": "diagnose",
    "collect_fingerprint": ("fingerprint", "collect"), "fingerprint_frame": ("fingerprint", "to_frame"),
    "stage_matrix": "display", "timeline": "display",
    "find_culprit": "culprit", "Verdict": "culprit",
    "classify": "classify", "classify_file": "classify", "classify_logs": "classify",
    "paste_box": "doctor", "show_findings": "doctor", "findings_frame": "doctor",
    "supervise": "supervise",
    "lint_env": "lint", "lint_frame": ("lint", "findings_frame"), "env_catalog": ("envcatalog", "to_frame"),
    "check_path": "netcheck", "check_frame": "netcheck", "probe_port": "netcheck", "scan_ports": "netcheck",
    "route_to": "netcheck", "would_pick": "netcheck", "measure": "netcheck",
    "Plan": "multinode", "MultiRun": "multinode", "MultiResult": "multinode", "start_nodes": "multinode",
    "launch_ssh": "multinode",
    "Lab": "netlab", "run_lab": "netlab", "run_fault": "netlab",
    "record": "recording", "run_all": "report", "export_report": "export", "export_button": "export",
    "race": "ckptrace", "variant_table": "ckptrace", "error_table": "ckptrace", "race_timeline": "ckptrace",
    "trials_frame": "ckptrace", "sigkill_test": "ckptrace", "rank0_collective": "ckptrace",
    "CheckpointManager": "checkpoint", "CheckpointError": "checkpoint", "atomic_save": "checkpoint",
    "safe_load": "checkpoint", "has_end_record": "checkpoint", "explain_torn": "checkpoint",
    "truncated_copy": "torncauses", "full_disk": "torncauses", "race_cause": "torncauses",
    "causes_frame": "torncauses", "shm_dataloader": "shm", "shm_frame": "shm",
    "WorkbookError": "errors", "PortInUseError": "errors", "LaunchError": "errors", "ConfigError": "errors",
    "Config": "launchconfig", "env_editor": "envedit", "EnvEditor": "envedit",
    "preset": "presets", "presets_frame": "presets", "seed_lint_frame": "presets",
    "ab_test": "abtest", "ABResult": "abtest",
    "parse_nccl": "nccllog", "channel_table": "nccllog", "nccl_summary": "nccllog", "nccl_chart": "nccllog",
    "nccl_sample": ("nccllog", "sample_log"), "nccl_debug_run": "nccllog", "nccl_transport_ab": "nccllog", "nccl_effects": ("nccllog", "effects_frame"),
    "sweep": "sweep", "sweep_chart": "sweep", "peak_busbw": "sweep", "bus_factor": "busbw",
    "parse_watchdog": "watchdog", "watchdog_frame": "watchdog", "slow_or_stuck": "watchdog",
    "chunked_all_reduce": "chunked", "compare_chunking": "chunked", "missing_rank": "chunked",
    "scenario": "desync", "desync_gallery": ("desync", "gallery"), "sequences": "desync",
    "sequence_chart": "desync", "flight_recorder": "desync", "timeouts": "timeouts",
    "rank_errors": ("desync", "errors"),
}


class _Package(types.ModuleType):
    """Keeps ``nb.classify``, ``nb.sweep``, ... the functions even after their submodules are imported.

    Importing a submodule binds it on its package under its own name; where that name is also an exported
    function (``nbhelpers.classify.classify``), the binding is skipped, so the function stays reachable
    whatever was imported before.  The submodule itself: ``from nbhelpers.classify import ...`` or
    ``importlib.import_module("nbhelpers.classify")``.
    """

    def __setattr__(self, name: str, value) -> None:
        if isinstance(value, types.ModuleType) and name in _EXPORTS and _EXPORTS[name] in (name, (name, name)):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str):
    spec = _EXPORTS.get(name)
    if spec is None:
        raise AttributeError(f"module 'nbhelpers' has no attribute {name!r}")
    module, attr = spec if isinstance(spec, tuple) else (spec, name)
    import importlib

    return getattr(importlib.import_module(f".{module}", __name__), attr)


def __dir__():
    return sorted(list(globals()) + list(_EXPORTS))
