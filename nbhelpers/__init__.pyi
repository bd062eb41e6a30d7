"""The public names of nbhelpers: the one list of them.  At run time ``__init__.py`` reads this stub and loads each
name from its module on first use (nothing heavy at import); editors and type checkers read it as the
package's interface."""
from nbhelpers.checkpoint import (
    CheckpointError,
    CheckpointManager,
    atomic_save,
    explain_torn,
    has_end_record,
    safe_load,
)
from nbhelpers.chunked import chunked_all_reduce
from nbhelpers.diagnosis.api import Failure, Rule, Verdict
from nbhelpers.diagnosis.busbw import bus_factor
from nbhelpers.diagnosis.classify import classify_logs
from nbhelpers.diagnosis.culprit import find_culprit
from nbhelpers.diagnosis.flightrec import analyse as fr_report
from nbhelpers.diagnosis.nccllog import sample_log as nccl_sample
from nbhelpers.diagnosis.watchdog import parse_watchdog, slow_or_stuck
from nbhelpers.errors import ConfigError, LaunchError, PortInUseError, WorkbookError
from nbhelpers.report.build import run_all
from nbhelpers.report.export import export_button, export_report
from nbhelpers.report.recording import record
from nbhelpers.runtime.attach import attach, attach_commands
from nbhelpers.runtime.fingerprint import collect as collect_fingerprint, lint_env
from nbhelpers.runtime.launchconfig import Config
from nbhelpers.runtime.launcher import Run, RunResult, launch, result_from_dir as parse_log_dir
from nbhelpers.runtime.learned import classify, classify_file
from nbhelpers.runtime.multinode import MultiResult, MultiRun, Plan, launch_ssh, start_nodes
from nbhelpers.runtime.ports import free_port
from nbhelpers.scenarios.abtest import ABResult, ab_test
from nbhelpers.scenarios.api import Gallery
from nbhelpers.scenarios.chunking import compare_chunking, missing_rank
from nbhelpers.scenarios.ckptrace import race, rank0_collective, sigkill_test
from nbhelpers.scenarios.desync import gallery as desync_gallery, desync_scenario
from nbhelpers.scenarios.nccl import nccl_debug_run, nccl_transport_ab
from nbhelpers.scenarios.netcheck import check_path, measure, probe_port, route_to, scan_ports, would_pick
from nbhelpers.scenarios.netlab import Lab, run_fault, run_lab
from nbhelpers.scenarios.presets import preset
from nbhelpers.scenarios.probe import fault_gallery, probe, scale_up
from nbhelpers.scenarios.shm import shm_dataloader
from nbhelpers.scenarios.supervise import example, printed_rate, supervise
from nbhelpers.scenarios.sweep import peak_busbw, sweep
from nbhelpers.scenarios.timeouts import timeouts
from nbhelpers.scenarios.torncauses import full_disk, race_cause, truncated_copy
from nbhelpers.views.incidents import (
    advice_lint_table,
    causes_table,
    check_table,
    error_table,
    flight_recorder_table,
    presets_table,
    race_timeline,
    rank_error_table,
    sequence_chart,
    sequence_table,
    shm_table,
    sweep_chart,
    trials_table,
    variant_table,
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
    effects_table as nccl_effects,
    nccl_summary,
    parse_nccl,
    watchdog_table,
)
