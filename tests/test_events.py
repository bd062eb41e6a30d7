import subprocess
import pytest
import sys

from nbhelpers.runtime.events import MARKER, parse_line, parse_lines, stage_rows

RANK_PROGRAM = """
import os, time
os.environ["RANK"] = "3"
from nbhelpers.runtime.events import stage
with stage("one", size=4) as out:
    out["measured"] = 1.5
try:
    with stage("two"):
        raise ValueError("boom")
except ValueError:
    pass
print("[host:3] plain line")
"""


def run_rank_program():
    res = subprocess.run([sys.executable, "-c", RANK_PROGRAM], capture_output=True, text=True, check=True)
    return res.stdout.splitlines()


@pytest.mark.integration
def test_stage_events_round_trip_through_a_real_process():
    lines = run_rank_program()
    events = parse_lines(lines)
    assert [(e["stage"], e["status"]) for e in events] == [("one", "running"), ("one", "ok"),
                                                          ("two", "running"), ("two", "fail")]
    assert all(e["rank"] == 3 for e in events)
    assert events[1]["measured"] == 1.5 and events[1]["size"] == 4
    assert events[3]["error"] == "ValueError: boom"
    assert events[1]["end"] >= events[1]["start"]
    assert "[host:3] plain line" in lines


def test_parse_line_tolerates_prefixes_and_rejects_garbage():
    assert parse_line('[default0]:' + MARKER + '{"stage": "x", "rank": 0}')["stage"] == "x"
    assert parse_line(MARKER + "{not json") is None
    assert parse_line("an ordinary log line") is None
    assert parse_line(MARKER + "[1, 2]") is None


@pytest.mark.integration
def test_stage_rows_keep_the_last_status_per_rank_and_stage():
    df = stage_rows(parse_lines(run_rank_program()))
    assert list(df["stage"]) == ["one", "two"]
    assert list(df["status"]) == ["ok", "fail"]
    assert df.loc[df.stage == "two", "error"].item() == "ValueError: boom"
    assert (df["seconds"] >= 0).all()
    assert list(df.columns) == ["rank", "host", "stage", "status", "start", "end", "seconds", "error"]


@pytest.mark.integration
def test_stage_rows_of_a_rank_still_running_have_no_end():
    events = parse_lines(run_rank_program())[:3]  # "two" has started, not ended
    df = stage_rows(events)
    two = df[df.stage == "two"].iloc[0]
    assert two["status"] == "running" and two["end"] != two["end"] and two["seconds"] != two["seconds"]  # NaN
