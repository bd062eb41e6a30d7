"""A/B runs for real: each env effect of notebook 02 reproduced by real ranks (gloo, 2 ranks)."""
import shlex

import pytest

from nbhelpers.errors import ConfigError
from nbhelpers.runtime.launchconfig import Config
from nbhelpers.scenarios.abtest import ab_test

PROBE_SMALL = ["--size-mb", "1"]


def test_bad_configs_are_refused_before_any_launch(runs_dir):
    with pytest.raises(ConfigError) as info:
        ab_test([Config("a", {}, 5), Config("b", {"NCCL_TIMEOUT": "1800", "GLOO_SOCKET_IFNAME": "eth9"}, 5)])
    assert len(info.value.problems) == 2 and all(p.startswith("b: ") for p in info.value.problems)
    assert not runs_dir.exists()
    with pytest.raises(ValueError, match="at least two"):
        ab_test([Config("a", {}, 5)])


@pytest.mark.integration
def test_detail_turns_the_mismatch_abort_into_an_error_naming_the_shapes(runs_dir):
    ab = ab_test([Config("OFF", {"TORCH_DISTRIBUTED_DEBUG": "OFF"}, 5),
                  Config("DETAIL", {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}, 5)],
                 target="probe", args=[*PROBE_SMALL, "--fault", "mismatch"], repeats=1, quiet=True)
    t = ab.table.set_index("config")
    assert not t["passed"].any()
    assert (t["category"] == "collective_mismatch").all()
    assert "SIGABRT" in t.loc["OFF", "exits"]  # gloo's EnforceNotMet: terminate -> abort
    off_logs = "\n".join(ab.result("OFF").logs.values())
    assert "Received data size doesn't match expected size" in off_logs
    assert "SIGABRT" not in t.loc["DETAIL", "exits"]  # a Python RuntimeError instead, on both ranks
    assert "Detected mismatch between collectives" in t.loc["DETAIL", "first error"]
    detail_logs = "\n".join(ab.result("DETAIL").logs.values())
    assert "Tensor shapes: 524288vs 262144" in detail_logs.replace("Tensor Tensor", "Tensor")


@pytest.mark.integration
def test_process_group_timeout_sets_time_to_failure_of_a_stalled_rank(runs_dir):
    ab = ab_test([Config("2s", {}, 2), Config("4s", {}, 4)], target="probe",
                 args=[*PROBE_SMALL, "--fault", "stall", "--stall", "20"], repeats=1, quiet=True)
    t = ab.table.set_index("config")
    assert (t["category"] == "collective_timeout").all() and (t["culprit"] == 1).all()
    assert 1.8 <= t.loc["2s", "failed stage s"] < 3.5
    assert 3.8 <= t.loc["4s", "failed stage s"] < 5.5
    assert "Timed out waiting 2000ms" in t.loc["2s", "first error"]


@pytest.mark.integration
def test_bench_interface_and_threads(runs_dir):
    configs = [Config("lo-omp1", {"GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}, 10),
               Config("lo-omp2", {"GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "2"}, 10),
               Config("eth9", {"GLOO_SOCKET_IFNAME": "eth9"}, 10)]
    ab = ab_test(configs, args=["--sizes-kb", "64,512", "--iters", "3", "--matmul", "128"], repeats=1,
                 check=False, quiet=True)
    t = ab.table.set_index("config")
    assert t.loc["lo-omp1", "passed"] and t.loc["lo-omp2", "passed"]
    assert t.loc["lo-omp1", "threads"] == 1 and t.loc["lo-omp2", "threads"] == 2
    assert t.loc["lo-omp1", "busbw GB/s"] > 0 and t.loc["lo-omp1", "compute ms"] > 0
    assert not t.loc["eth9", "passed"] and t.loc["eth9", "category"] == "network_interface"
    assert "Unable to find address for: eth9" in t.loc["eth9", "first error"]
    assert t.loc["eth9", "failed stage"] == "rendezvous"
    summary = ab.summary()
    assert summary.loc["lo-omp1", "passed"] == "1/1" and summary.loc["eth9", "passed"] == "0/1"
    fig = ab.chart()
    assert {tr.name for tr in fig.data} >= {"allreduce", "passed", "failed"}
    text = ab.export("lo-omp2")
    assert "export OMP_NUM_THREADS=2" in text
    worker_line = text.splitlines()[-1]
    words = shlex.split(worker_line)
    assert words[:2] == ["GLOO_SOCKET_IFNAME=lo", "OMP_NUM_THREADS=2"]
    assert words[-4:] == ["nbhelpers.workers.allreduce_bench", "--timeout", "10"][-3:] or \
        words[-3:] == ["nbhelpers.workers.allreduce_bench", "--timeout", "10"]


def test_export_can_carry_the_real_jobs_timeout():
    from nbhelpers.scenarios.abtest import ABResult

    ab = ABResult([Config("a", {"NCCL_DEBUG": "WARN"}, 5), Config("b", {}, 5)], "probe", 2)
    text = ab.export("a", timeout_s=600)
    assert "timedelta(seconds=600)" in text and text.endswith("--timeout 600")
    assert ab.config("a").timeout_s == 5  # the A/B's own config is unchanged
