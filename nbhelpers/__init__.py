"""Helpers for the distributed-training troubleshooting workbook.

    import nbhelpers as nb
    res = nb.probe(2, fault="stall")        # a RunResult: status, culprit, failure, remedies, logs
    nb.record(res, expect="fail")           # hand the verdict to the incident report

The package is layered, each layer importing only from those below it (``tests/test_layers.py``):
``diagnosis`` (pure functions over text, exit records, events and stacks: the verdict model, culprit
rules, classifier, catalogs, parsers) <- ``runtime`` (torchrun launch, rank shim, processes, ports,
events) <- ``scenarios`` (the kernel side of each incident) <- ``views`` (tables, charts, widgets) <-
``report``.  ``checkpoint`` and ``chunked`` are utilities for users' own training code; ``errors``
is the one exception root; ``workers`` are the rank programs.

Names say what comes back.  A function named after an incident or an experiment (``probe``, ``race``,
``sweep``, ``timeouts``, ``desync_scenario``, ``supervise``, ``launch``) starts ranks and returns a
``RunResult``; ``*_gallery`` runs several and returns a ``Gallery`` (a table plus its runs); ``*_table``
returns a pandas DataFrame, ``*_chart`` and ``*timeline`` a plotly figure; ``check_*``, ``lint_*``,
``parse_*``, ``classify*`` and ``find_*`` read what they are given and start nothing.

Importing this package starts nothing and imports neither torch nor plotly: the names below are
loaded from their modules when first used.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

__version__ = "0.1.0"

_EXPORTS: dict[str, tuple[str, str]] = {
    "Run": ("runtime.launcher", "Run"),
    "RunResult": ("runtime.launcher", "RunResult"),
    "launch": ("runtime.launcher", "launch"),
    "attach": ("runtime.attach", "attach"),
    "attach_commands": ("runtime.attach", "attach_commands"),
    "fr_report": ("diagnosis.flightrec", "analyse"),
    "free_port": ("runtime.ports", "free_port"),
    "Config": ("runtime.launchconfig", "Config"),
    "Plan": ("runtime.multinode", "Plan"),
    "MultiRun": ("runtime.multinode", "MultiRun"),
    "MultiResult": ("runtime.multinode", "MultiResult"),
    "start_nodes": ("runtime.multinode", "start_nodes"),
    "launch_ssh": ("runtime.multinode", "launch_ssh"),
    "Failure": ("diagnosis.api", "Failure"),
    "Rule": ("diagnosis.api", "Rule"),
    "Verdict": ("diagnosis.api", "Verdict"),
    "find_culprit": ("diagnosis.culprit", "find_culprit"),
    "parse_log_dir": ("runtime.launcher", "result_from_dir"),
    "classify": ("runtime.learned", "classify"),
    "classify_file": ("runtime.learned", "classify_file"),
    "classify_logs": ("diagnosis.classify", "classify_logs"),
    "collect_fingerprint": ("runtime.fingerprint", "collect"),
    "fingerprint_table": ("views.tables", "fingerprint_table"),
    "lint_env": ("runtime.fingerprint", "lint_env"),
    "lint_table": ("views.tables", "lint_table"),
    "env_catalog": ("views.tables", "env_catalog"),
    "parse_nccl": ("views.tables", "parse_nccl"),
    "channel_table": ("views.tables", "channel_table"),
    "nccl_summary": ("views.tables", "nccl_summary"),
    "nccl_chart": ("views.tables", "nccl_chart"),
    "nccl_sample": ("diagnosis.nccllog", "sample_log"),
    "nccl_effects": ("views.tables", "effects_table"),
    "bus_factor": ("diagnosis.busbw", "bus_factor"),
    "parse_watchdog": ("diagnosis.watchdog", "parse_watchdog"),
    "watchdog_table": ("views.tables", "watchdog_table"),
    "slow_or_stuck": ("diagnosis.watchdog", "slow_or_stuck"),
    "Gallery": ("scenarios.api", "Gallery"),
    "probe": ("scenarios.probe", "probe"),
    "scale_up": ("scenarios.probe", "scale_up"),
    "fault_gallery": ("scenarios.probe", "fault_gallery"),
    "supervise": ("scenarios.supervise", "supervise"),
    "example": ("scenarios.supervise", "example"),
    "printed_rate": ("scenarios.supervise", "printed_rate"),
    "waiting_chart": ("views.display", "waiting_chart"),
    "sweep": ("scenarios.sweep", "sweep"),
    "sweep_chart": ("scenarios.sweep", "sweep_chart"),
    "peak_busbw": ("scenarios.sweep", "peak_busbw"),
    "compare_chunking": ("scenarios.chunking", "compare_chunking"),
    "missing_rank": ("scenarios.chunking", "missing_rank"),
    "desync_scenario": ("scenarios.desync", "desync_scenario"),
    "desync_gallery": ("scenarios.desync", "gallery"),
    "sequence_table": ("scenarios.desync", "sequence_table"),
    "sequence_chart": ("scenarios.desync", "sequence_chart"),
    "flight_recorder_table": ("scenarios.desync", "flight_recorder_table"),
    "rank_error_table": ("scenarios.desync", "rank_error_table"),
    "timeouts": ("scenarios.timeouts", "timeouts"),
    "race": ("scenarios.ckptrace", "race"),
    "variant_table": ("scenarios.ckptrace", "variant_table"),
    "error_table": ("scenarios.ckptrace", "error_table"),
    "race_timeline": ("scenarios.ckptrace", "race_timeline"),
    "trials_table": ("scenarios.ckptrace", "trials_table"),
    "sigkill_test": ("scenarios.ckptrace", "sigkill_test"),
    "rank0_collective": ("scenarios.ckptrace", "rank0_collective"),
    "truncated_copy": ("scenarios.torncauses", "truncated_copy"),
    "full_disk": ("scenarios.torncauses", "full_disk"),
    "race_cause": ("scenarios.torncauses", "race_cause"),
    "causes_table": ("scenarios.torncauses", "causes_table"),
    "shm_dataloader": ("scenarios.shm", "shm_dataloader"),
    "shm_table": ("scenarios.shm", "shm_table"),
    "ab_test": ("scenarios.abtest", "ab_test"),
    "ABResult": ("scenarios.abtest", "ABResult"),
    "preset": ("scenarios.presets", "preset"),
    "presets_table": ("scenarios.presets", "presets_table"),
    "advice_lint_table": ("scenarios.presets", "advice_lint_table"),
    "nccl_debug_run": ("scenarios.nccl", "nccl_debug_run"),
    "nccl_transport_ab": ("scenarios.nccl", "nccl_transport_ab"),
    "check_path": ("scenarios.netcheck", "check_path"),
    "check_table": ("scenarios.netcheck", "check_table"),
    "probe_port": ("scenarios.netcheck", "probe_port"),
    "scan_ports": ("scenarios.netcheck", "scan_ports"),
    "route_to": ("scenarios.netcheck", "route_to"),
    "would_pick": ("scenarios.netcheck", "would_pick"),
    "measure": ("scenarios.netcheck", "measure"),
    "Lab": ("scenarios.netlab", "Lab"),
    "run_lab": ("scenarios.netlab", "run_lab"),
    "run_fault": ("scenarios.netlab", "run_fault"),
    "setup_notebook": ("views.notebook", "setup_notebook"),
    "stage_table": ("views.display", "stage_table"),
    "timeline": ("views.display", "timeline"),
    "paste_box": ("views.pastebox", "paste_box"),
    "show_findings": ("views.pastebox", "show_findings"),
    "findings_table": ("views.pastebox", "findings_table"),
    "env_editor": ("views.envedit", "env_editor"),
    "EnvEditor": ("views.envedit", "EnvEditor"),
    "record": ("report.recording", "record"),
    "run_all": ("report.build", "run_all"),
    "export_report": ("report.export", "export_report"),
    "export_button": ("report.export", "export_button"),
    "CheckpointManager": ("checkpoint", "CheckpointManager"),
    "CheckpointError": ("checkpoint", "CheckpointError"),
    "atomic_save": ("checkpoint", "atomic_save"),
    "safe_load": ("checkpoint", "safe_load"),
    "has_end_record": ("checkpoint", "has_end_record"),
    "explain_torn": ("checkpoint", "explain_torn"),
    "chunked_all_reduce": ("chunked", "chunked_all_reduce"),
    "WorkbookError": ("errors", "WorkbookError"),
    "PortInUseError": ("errors", "PortInUseError"),
    "LaunchError": ("errors", "LaunchError"),
    "ConfigError": ("errors", "ConfigError"),
}

__all__ = [
    'ABResult', 'CheckpointError', 'CheckpointManager', 'Config', 'ConfigError', 'EnvEditor', 'Failure', 'Gallery',
    'Lab', 'LaunchError', 'MultiResult', 'MultiRun', 'Plan', 'PortInUseError', 'Rule', 'Run', 'RunResult',
    'Verdict', 'WorkbookError', 'ab_test', 'advice_lint_table', 'atomic_save', 'attach', 'attach_commands',
    'bus_factor', 'causes_table', 'channel_table', 'check_path', 'check_table', 'chunked_all_reduce', 'classify',
    'classify_file', 'classify_logs', 'collect_fingerprint', 'compare_chunking', 'desync_gallery',
    'desync_scenario', 'env_catalog', 'env_editor', 'error_table', 'example', 'explain_torn', 'export_button',
    'export_report', 'fault_gallery', 'find_culprit', 'findings_table', 'fingerprint_table',
    'flight_recorder_table', 'fr_report', 'free_port', 'full_disk', 'has_end_record', 'launch', 'launch_ssh',
    'lint_env', 'lint_table', 'measure', 'missing_rank', 'nccl_chart', 'nccl_debug_run', 'nccl_effects',
    'nccl_sample', 'nccl_summary', 'nccl_transport_ab', 'parse_log_dir', 'parse_nccl', 'parse_watchdog', 'paste_box',
    'peak_busbw',
    'preset', 'presets_table', 'printed_rate', 'probe', 'probe_port', 'race', 'race_cause', 'race_timeline',
    'rank0_collective',
    'rank_error_table', 'record', 'route_to', 'run_all', 'run_fault', 'run_lab', 'safe_load', 'scale_up',
    'scan_ports', 'sequence_chart', 'sequence_table', 'setup_notebook', 'shm_dataloader', 'shm_table',
    'show_findings', 'sigkill_test', 'slow_or_stuck', 'stage_table', 'start_nodes', 'supervise', 'sweep',
    'sweep_chart', 'timeline', 'timeouts', 'trials_table', 'truncated_copy', 'variant_table', 'waiting_chart',
    'watchdog_table',
    'would_pick'
]

if TYPE_CHECKING:  # what editors and type checkers see; at run time each name loads on first use
    from nbhelpers.checkpoint import (
        CheckpointError,
        CheckpointManager,
        atomic_save,
        explain_torn,
        has_end_record,
        safe_load,
    )
    from nbhelpers.chunked import chunked_all_reduce
    from nbhelpers.diagnosis.flightrec import analyse as fr_report
    from nbhelpers.diagnosis.api import Failure, Rule, Verdict
    from nbhelpers.diagnosis.busbw import bus_factor
    from nbhelpers.diagnosis.classify import classify_logs
    from nbhelpers.runtime.learned import classify, classify_file
    from nbhelpers.diagnosis.culprit import find_culprit
    from nbhelpers.diagnosis.nccllog import sample_log as nccl_sample
    from nbhelpers.diagnosis.watchdog import parse_watchdog, slow_or_stuck
    from nbhelpers.errors import ConfigError, LaunchError, PortInUseError, WorkbookError
    from nbhelpers.report.build import run_all
    from nbhelpers.report.export import export_button, export_report
    from nbhelpers.report.recording import record
    from nbhelpers.runtime.attach import attach, attach_commands
    from nbhelpers.runtime.fingerprint import collect as collect_fingerprint
    from nbhelpers.runtime.fingerprint import lint_env
    from nbhelpers.runtime.launchconfig import Config
    from nbhelpers.runtime.launcher import Run, RunResult, launch
    from nbhelpers.runtime.launcher import result_from_dir as parse_log_dir
    from nbhelpers.runtime.multinode import (
        MultiResult,
        MultiRun,
        Plan,
        launch_ssh,
        start_nodes,
    )
    from nbhelpers.runtime.ports import free_port
    from nbhelpers.scenarios.abtest import ABResult, ab_test
    from nbhelpers.scenarios.api import Gallery
    from nbhelpers.scenarios.chunking import compare_chunking, missing_rank
    from nbhelpers.scenarios.ckptrace import (
        error_table,
        race,
        race_timeline,
        rank0_collective,
        sigkill_test,
        trials_table,
        variant_table,
    )
    from nbhelpers.scenarios.desync import (
        desync_scenario,
        flight_recorder_table,
        rank_error_table,
        sequence_chart,
        sequence_table,
    )
    from nbhelpers.scenarios.desync import gallery as desync_gallery
    from nbhelpers.scenarios.nccl import nccl_debug_run, nccl_transport_ab
    from nbhelpers.scenarios.netcheck import (
        check_path,
        check_table,
        measure,
        probe_port,
        route_to,
        scan_ports,
        would_pick,
    )
    from nbhelpers.scenarios.netlab import Lab, run_fault, run_lab
    from nbhelpers.scenarios.presets import advice_lint_table, preset, presets_table
    from nbhelpers.scenarios.probe import fault_gallery, probe, scale_up
    from nbhelpers.scenarios.shm import shm_dataloader, shm_table
    from nbhelpers.scenarios.supervise import example, printed_rate, supervise
    from nbhelpers.scenarios.sweep import peak_busbw, sweep, sweep_chart
    from nbhelpers.scenarios.timeouts import timeouts
    from nbhelpers.scenarios.torncauses import (
        causes_table,
        full_disk,
        race_cause,
        truncated_copy,
    )
    from nbhelpers.views.display import stage_table, timeline, waiting_chart
    from nbhelpers.views.envedit import EnvEditor, env_editor
    from nbhelpers.views.notebook import setup_notebook
    from nbhelpers.views.pastebox import findings_table, paste_box, show_findings
    from nbhelpers.views.tables import (
        channel_table,
        env_catalog,
        fingerprint_table,
        lint_table,
        nccl_chart,
        nccl_summary,
        parse_nccl,
        watchdog_table,
    )
    from nbhelpers.views.tables import effects_table as nccl_effects


def __getattr__(name: str):
    spec = _EXPORTS.get(name)
    if spec is None:
        raise AttributeError(f"module 'nbhelpers' has no attribute {name!r}")
    import importlib

    module, attr = spec
    value = getattr(importlib.import_module(f"nbhelpers.{module}"), attr)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
