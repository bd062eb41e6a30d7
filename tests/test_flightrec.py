"""Flight Recorder dumps: real 2-rank gloo runs of nbhelpers.workers.frdump (each fault once, side by side),
the checked-in recording in tests/data/fr/, and the reader's errors."""
import json
import os
import pickle
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nbhelpers.diagnosis.flightrec import FRDumpError, analyse, fr_main, read_dumps

DATA = Path(__file__).parent / "data" / "fr"
FAULTS = {"none": ["--format", "json"], "skip": [], "mismatch": []}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """fault -> (folder of dumps, torchrun's exit code, its output); the three jobs run at the same time."""
    root = tmp_path_factory.mktemp("fr")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TORCH_FR_BUFFER_SIZE": "2000"}
    procs = {}
    for fault, extra in FAULTS.items():
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
               "-m", "nbhelpers.workers.frdump", "--fault", fault, "--out", str(root / fault), "--timeout", "3",
               "--hang", "30", *extra]
        procs[fault] = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out, t0 = {}, time.monotonic()
    for fault, p in procs.items():
        try:
            text, _ = p.communicate(timeout=max(1, 90 - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            p.kill()
            text, _ = p.communicate()
        out[fault] = (root / fault, p.returncode, text)
    return out


def test_healthy_run_has_no_disagreement(runs):
    folder, rc, log = runs["none"]
    assert rc == 0, log[-3000:]
    dumps = read_dumps(folder)
    assert {d.format for d in dumps.ranks.values()} == {"json"}
    rep = analyse(dumps)
    assert rep.ok and rep.first_disagreement is None and rep.culprit_rank is None, rep.text()
    assert rep.ranks == [0, 1] and rep.missing_ranks == [] and "No disagreement" in rep.text()
    rows = [r for r in rep.table if r["rank"] == 0]
    # the start-up barrier (workers.common.init), then two all_reduces a step for 4 steps
    assert len(rows) == 9 and rows[0]["op"] == "barrier" and rows[1]["op"] == "all_reduce", rows[:2]
    assert rows[1]["in"] == [[1048576]]
    assert fr_main(str(folder), as_json=False) == 0


# the collective a live run's fault strikes at: #1 is the start-up barrier (workers.common.init), then two collectives
# a step (the gradient all_reduce, the loss) for steps 0 and 1; step 2's gradient all_reduce is #6
FAULT_SEQ = 6


def test_skip_names_the_collective_and_the_rank_that_never_reached_it(runs, capsys):
    folder, rc, log = runs["skip"]
    assert rc != 0, log[-3000:]
    rep = analyse(folder)
    fd = rep.first_disagreement
    assert fd["seq"] == FAULT_SEQ and fd["kind"] == "missing" and fd["missing"] == [1], rep.text()
    assert rep.culprit_rank == 1 and rep.missing_ranks == [1]
    assert fd["groups"][0]["ranks"] == [0] and fd["groups"][0]["sizes"] == "[1048576]"
    text = rep.text()
    assert f"collective #{FAULT_SEQ} (all_reduce [1048576] float32" in text and "rank 1 never reached it" in text
    assert "rank 0 entered it and waited" in text and "frdump.py" in text
    assert fr_main(str(folder), as_json=True) == 1
    d = json.loads(capsys.readouterr().out)
    assert d["culprit_rank"] == 1 and d["first_disagreement"]["seq"] == FAULT_SEQ and "table" not in d


def test_mismatch_names_the_sizes_and_the_rank(runs):
    folder, rc, log = runs["mismatch"]
    assert rc != 0, log[-3000:]
    rep = analyse(folder)
    fd = rep.first_disagreement
    assert fd is not None and fd["seq"] == FAULT_SEQ and fd["kind"] == "size", rep.text()
    assert {g["sizes"]: g["ranks"] for g in fd["groups"]} == {"[1048576]": [0], "[2097152]": [1]}
    assert rep.culprit_rank == 1 and "SIZE_OR_SYNTAX_MISMATCH" in fd["torch"]
    assert "rank 0 ran all_reduce [1048576] float32, rank 1 ran all_reduce [2097152] float32" in rep.text()


def test_recorded_skip_dump_gives_the_same_verdict():
    rep = analyse(DATA / "skip")
    assert (rep.first_disagreement["seq"], rep.culprit_rank, rep.first_disagreement["missing"]) == (5, 1, [1])


# ---- bad input --------------------------------------------------------------------------------------------

def test_torn_and_empty_files_give_one_clear_error(tmp_path, capsys):
    good = (DATA / "skip" / "fr_trace_rank_0").read_bytes()
    (tmp_path / "fr_trace_rank_0").write_bytes(good[: len(good) // 2])
    (tmp_path / "fr_trace_rank_1").write_bytes(b"")
    with pytest.raises(FRDumpError) as err:
        read_dumps(tmp_path)
    msg = str(err.value)
    assert "no readable Flight Recorder dump" in msg and "fr_trace_rank_1: empty file" in msg and "torn" in msg
    assert "What to do" in msg
    assert fr_main(str(tmp_path), as_json=False) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    for bad in (tmp_path / "nothing-here", tmp_path / "fr_trace_rank_0"):
        with pytest.raises(FRDumpError):
            read_dumps(bad)


def test_one_torn_rank_is_reported_and_the_rest_analysed(tmp_path):
    shutil.copy(DATA / "skip" / "fr_trace_rank_0", tmp_path)
    (tmp_path / "fr_trace_rank_1").write_bytes(b"\x80\x04\x95\x10")
    rep = analyse(tmp_path)
    assert rep.ranks == [0] and rep.missing_ranks == [1] and not rep.ok
    assert "torn" in rep.no_dump[1] and "No dump from rank 1" in rep.text()


def test_pickles_that_import_code_are_refused(tmp_path):
    (tmp_path / "rank_0").write_bytes(pickle.dumps({"version": "2.10", "entries": [], "x": Path("/")}))
    with pytest.raises(FRDumpError, match="refers to"):
        read_dumps(tmp_path)


def test_dumps_without_entries_say_recording_was_off(tmp_path):
    (tmp_path / "rank_0").write_bytes(pickle.dumps({"version": "2.10", "entries": [], "pg_config": {}}))
    with pytest.raises(FRDumpError, match="TORCH_FR_BUFFER_SIZE"):
        read_dumps(tmp_path)


# ---- pure: synthetic entries ------------------------------------------------------------------------------

def entry(seq, op="all_reduce", size=(8,), dtype="Float", pg=("0", "default_pg")):
    return {"record_id": seq - 1, "pg_id": 0, "process_group": pg, "collective_seq_id": seq, "p2p_seq_id": 0,
            "op_id": seq, "profiling_name": f"gloo:{op}", "time_created_ns": seq, "input_sizes": [list(size)],
            "input_dtypes": [dtype], "output_sizes": [list(size)], "output_dtypes": [dtype], "state": "scheduled",
            "retired": True, "is_p2p": False, "frames": []}


def write(folder, per_rank, fmt="pickle"):
    folder.mkdir(exist_ok=True)
    for r, es in per_rank.items():
        d = {"version": "2.10", "pg_config": {"": {"name": "", "desc": "", "ranks": "[]"}}, "entries": es}
        (folder / f"nccl_trace_rank_{r}").write_bytes(pickle.dumps(d) if fmt == "pickle" else json.dumps(d).encode())
    return folder


def test_three_ranks_op_mismatch_majority_names_the_odd_rank(tmp_path):
    base = [entry(1), entry(2, size=(1,))]
    rep = analyse(write(tmp_path / "d", {0: base + [entry(3)], 1: base + [entry(3, op="broadcast")],
                                         2: base + [entry(3)]}, fmt="json"))
    fd = rep.first_disagreement
    assert (fd["seq"], fd["kind"], rep.culprit_rank) == (3, "op", 1)
    assert "rank 1 ran broadcast [8] float32" in rep.text() and "ranks 0, 2 ran all_reduce [8] float32" in rep.text()


def test_an_extra_call_on_one_rank_is_named_not_the_ranks_that_lack_it(tmp_path):
    base = [entry(1), entry(2)]
    rep = analyse(write(tmp_path / "d", {0: base + [entry(3, op="broadcast", size=(16,))], 1: base, 2: base}))
    fd = rep.first_disagreement
    assert fd["missing"] == [1, 2] and rep.culprit_rank == 0, rep.text()


def test_dtype_mismatch_and_missing_dump_file(tmp_path):
    rep = analyse(write(tmp_path / "d", {0: [entry(1), entry(2)], 1: [entry(1), entry(2, dtype="Half")],
                                         2: [entry(1), entry(2)]}), world_size=4)
    assert rep.first_disagreement["kind"] == "dtype" and rep.culprit_rank == 1
    assert rep.missing_ranks == [3] and rep.no_dump == {3: "no dump file"} and rep.world_size == 4
    assert json.loads(json.dumps(rep.to_dict()))["first_disagreement"]["seq"] == 2


def test_world_size_from_an_all_gather_when_gloo_did_not_record_it(tmp_path):
    ag = {**entry(2, op="all_gather", size=(2,)), "output_sizes": [[2, 2]]}
    rep = analyse(write(tmp_path / "d", {0: [entry(1), ag]}))
    assert rep.world_size == 2 and rep.missing_ranks == [1] and not rep.ok
    assert any("all_gathers" in n for n in rep.notes)


@pytest.mark.integration
def test_doctor_fr_from_the_command_line():
    run = lambda *a: subprocess.run([sys.executable, "-m", "nbhelpers", "doctor", *a], capture_output=True,  # noqa: E731
                                    text=True, timeout=120)
    out = run("--fr", str(DATA / "skip"))
    assert out.returncode == 1 and "collective #5" in out.stdout and "rank 1 never reached it" in out.stdout, out
    out = run("--fr", str(DATA / "skip"), "--json")
    v = json.loads(out.stdout)
    assert v["culprit_rank"] == 1 and v["missing_ranks"] == [1] and v["first_disagreement"]["seq"] == 5, v
    out = run("--fr", str(DATA / "no-such-folder"))
    assert out.returncode == 2 and out.stderr.startswith("error: ") and out.stderr.count("\n") == 1, out.stderr


def test_a_subgroup_gathered_over_the_world_counts_every_rank_and_one_extra_call_of_two_names_nobody(tmp_path):
    # gloo files a new_group() as ('1', 'undefined') and records no member list: the all_gather's output (world x
    # input) says every rank belongs; with two ranks, one rank's extra call and the other's skipped call look alike
    sub = {**entry(1, op="all_gather", size=(1,), dtype="Long", pg=("1", "undefined")), "output_sizes": [[2, 1]]}
    rep = analyse(write(tmp_path / "d", {0: [entry(1), entry(2), sub], 1: [entry(1), entry(2)]}), world_size=2)
    fd = rep.first_disagreement
    assert (fd["pg"], fd["missing"], rep.culprit_rank, fd["by"]) == ("group 1", [1], None, None), rep.text()
    assert "the records alone cannot tell which" in fd["why"]


def test_a_rank_that_issues_what_no_rank_ran_before_while_its_peer_runs_the_usual_one_is_named(tmp_path):
    loop = [entry(s, op="broadcast" if s % 2 else "all_reduce", size=(4,) if s % 2 else (8,)) for s in range(1, 9)]
    rep = analyse(write(tmp_path / "d", {0: loop + [entry(9, op="broadcast", size=(4,))],
                                         1: loop + [entry(9, op="barrier", size=())]}))
    fd = rep.first_disagreement
    assert (fd["seq"], fd["kind"], rep.culprit_rank, fd["by"]) == (9, "op", 1, "new"), rep.text()
    assert "#3, #5, #7" in fd["why"]


def test_a_metric_all_reduced_as_float64_on_one_rank_and_float32_on_the_other_is_found_where_torch_passes_over_it(
        tmp_path):
    # torch's matcher checks dtypes only for non-empty sizes: a 0-d tensor's dtype split (a Python float on one
    # rank, a numpy float64 on the other) went unseen, and its first failure was the next collective, one that
    # the aborted rank never reached
    base = [entry(1), entry(2, size=())]
    rep = analyse(write(tmp_path / "d", {0: base + [entry(3, size=(), dtype="Double"), entry(4)],
                                         1: base + [entry(3, size=())]}), world_size=2)
    fd = rep.first_disagreement
    assert (fd["seq"], fd["kind"], fd["missing"]) == (3, "dtype", []), rep.text()
    assert "rank 0 ran all_reduce [] float64, rank 1 ran all_reduce [] float32" in rep.text()
