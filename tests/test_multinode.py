"""Per-node torchrun commands, and real two-node worlds on loopback (two torchruns, one c10d store)."""
import pytest
import shlex

from nbhelpers.runtime.multinode import Plan, error_line, rendezvous_began, start_nodes
from nbhelpers.runtime.ports import free_port


def test_every_node_gets_the_same_world_but_only_the_master_hosts_the_store():
    plan = Plan(nnodes=3, nproc_per_node=4, master_addr="10.0.0.1", port=29500, rdzv_id="job7",
                env={"GLOO_SOCKET_IFNAME": "eth0"})
    cmds = plan.commands()
    assert len(cmds) == 3
    for n, line in cmds.items():
        argv = shlex.split(line)
        assert argv[0] == "GLOO_SOCKET_IFNAME=eth0"
        for flag, value in (("--nnodes", "3"), ("--nproc-per-node", "4"), ("--rdzv-backend", "c10d"),
                            ("--rdzv-endpoint", "10.0.0.1:29500"), ("--rdzv-id", "job7"), ("--node-rank", str(n))):
            assert argv[argv.index(flag) + 1] == value
        assert f"is_host={int(n == 0)}" in argv[argv.index("--rdzv-conf") + 1]
    assert cmds[0].replace("--node-rank 0", "").replace("is_host=1", "") == \
        cmds[1].replace("--node-rank 1", "").replace("is_host=0", "")


def test_a_node_run_carries_the_shared_rendezvous_and_its_prefix(tmp_path):
    from nbhelpers import Run

    run = Run("staged", ["--timeout", "3"], nproc=2, nnodes=2, node_rank=1, rdzv_endpoint="10.77.0.1:29500",
              rdzv_id="job", rdzv_conf={"is_host": 0}, local_addr="10.77.0.2", prefix=["ip", "netns", "exec", "x"],
              log_dir=tmp_path)
    cmd = run.command
    assert cmd[:4] == ["ip", "netns", "exec", "x"] and cmd[cmd.index("--nnodes") + 1] == "2"
    assert cmd[cmd.index("--rdzv-endpoint") + 1] == "10.77.0.1:29500" and cmd[cmd.index("--rdzv-id") + 1] == "job"
    assert cmd[cmd.index("--local-addr") + 1] == "10.77.0.2" and "is_host=0" in cmd
    assert list(run.tails) == [0, 1, 2, 3] and run.local_ranks() == []  # which global ranks it gets: the rendezvous says
    single = Run("probe", nproc=2, log_dir=tmp_path)
    assert "--node-rank" not in single.command and "--local-addr" not in single.command
    assert single.command[single.command.index("--nnodes") + 1] == "1"


def test_slurm_script_expands_the_node_rank_per_node():
    text = Plan(nnodes=2, port=29511, rdzv_id="j").slurm_script()
    assert "#SBATCH --nodes=2" in text and "scontrol show hostnames" in text
    assert "--node-rank $SLURM_NODEID" in text and "--rdzv-endpoint $MASTER_ADDR:29511" in text
    assert "srun" in text and "is_host" not in text  # the store host is found by hostname there


def test_ssh_argv_without_connecting():
    plan = Plan(nnodes=2, master_addr="a", rdzv_id="j")
    argv = plan.ssh_argv(["a", "b"], workdir="/work dir")
    assert [a[:2] for a in argv] == [["ssh", "-tt"]] * 2 and "BatchMode=yes" in argv[0]
    assert argv[1][-2] == "b" and argv[1][-1].startswith("cd '/work dir' && ") and "--node-rank 1" in argv[1][-1]


def test_ssh_prefix_sets_the_environment_remotely():
    from nbhelpers.runtime.multinode import ssh_prefix

    argv = ssh_prefix("node-b", {"GLOO_SOCKET_IFNAME": "eth 0"})
    assert argv[:2] == ["ssh", "-tt"] and argv[argv.index("node-b") + 1] == "env"
    assert "'GLOO_SOCKET_IFNAME=eth 0'" in argv and any(a.startswith("PYTHONPATH=") for a in argv)


def test_error_line_and_rendezvous_clock():
    log = ("I1122 12:39:19.354000 10127 /x/site-packages/torch/distributed/elastic/agent/server/api.py:707] "
           "[default] Rendezvous'ing worker group\nTraceback (most recent call last):\n  File \"x\"\n"
           "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError\n")
    assert error_line(log).endswith("RendezvousTimeoutError")
    assert rendezvous_began(log) is not None and rendezvous_began("nothing") is None


@pytest.mark.integration
def test_two_nodes_on_loopback_pass_the_staged_test(runs_dir):
    plan = Plan(nnodes=2, master_addr="127.0.0.1", port=free_port(), join_timeout=30,
                args=["--backend", "gloo", "--timeout", "10", "--sizes", "4K,256K", "--iters", "1,2"])
    res = start_nodes(plan, [[], []], timeout=90, name="loop").wait(live=False)
    assert res.ok, res.per_node()
    assert sorted(r for n in res.nodes for r in n.logs) == [0, 1]  # each node ran one global rank
    prog = res.progress()
    assert (prog == "✔").all().all() and "allreduce_262144" in prog.columns
    assert set(res.sweep()["bytes"]) == {4096, 262144}
    assert res.first_failure is None and res.category is None
    assert list(res.side_by_side().columns) == ["node 0", "node 1"]


@pytest.mark.integration
def test_a_node_that_never_comes_fails_the_rendezvous_in_bounded_time(runs_dir):
    # a two-node test whose worker node starts minutes late: the master's rendezvous gives up after join_timeout
    plan = Plan(nnodes=2, master_addr="127.0.0.1", port=free_port(), join_timeout=3)
    res = start_nodes(plan, [[]], timeout=60, name="late").wait(live=False)
    assert res.status == "failed"
    ff = res.first_failure
    assert ff["stage"] == "rendezvous (torchrun)" and "RendezvousTimeoutError" in ff["error"]
    assert ff["in stage s"] is not None and 2.5 < ff["in stage s"] < 20
    assert res.category == "rendezvous_timeout"
