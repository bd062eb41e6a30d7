"""`python -m nbhelpers doctor` on files and stdin, plain and --json."""
import json
import subprocess
import sys

import pytest

from conftest import SHARED

DEV = SHARED / "corpus" / "real_failure_logs.dev.jsonl"


@pytest.mark.skipif(not DEV.exists(), reason=f"shared corpus not found at {DEV}")
def test_doctor_reads_files_and_stdin(tmp_path):
    rows = [json.loads(x) for x in DEV.read_text().splitlines() if x.strip()]
    row = next(r for r in rows if r["label"] == "port_in_use")
    log = tmp_path / "pasted.log"
    log.write_text(row["log"])
    out = subprocess.run([sys.executable, "-m", "nbhelpers", "doctor", str(log)], capture_output=True, text=True)
    assert out.returncode == 1 and "port_in_use" in out.stdout and "line " in out.stdout
    out = subprocess.run([sys.executable, "-m", "nbhelpers", "doctor", "--json", "-"], input=row["log"],
                         capture_output=True, text=True)
    first = json.loads(out.stdout.splitlines()[0])
    assert first["category"] == "port_in_use" and first["evidence"][0]["line"] >= 1 and first["remedies"]


def test_doctor_on_a_healthy_log_finds_nothing(tmp_path):
    log = tmp_path / "ok.log"
    log.write_text("[vm:0] probe passed\n[vm:1] probe passed\n")
    out = subprocess.run([sys.executable, "-m", "nbhelpers", "doctor", str(log)], capture_output=True, text=True)
    assert out.returncode == 0 and "no known failure found" in out.stdout
