"""benchmarks/cost_side_by_side.py on the CPU: solbench's own command line really evaluates the solution (its
``--json`` read for the verdict, workloads and phases), the peer's command runs by the shell in its folder, and
the ratio and the target's verdict follow from the medians. A fake peer stands in for SOL-ExecBench."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.paths import AXPY, ROOT

SCRIPT = ROOT / "benchmarks" / "cost_side_by_side.py"


def test_one_round_of_each_tool_side_by_side(tmp_path):
    peer = f"{sys.executable} -c \"import pathlib; pathlib.Path('peer-ran').write_text('x')\""
    out = tmp_path / "cost.json"
    r = subprocess.run([sys.executable, str(SCRIPT), "--problem", str(AXPY), "--solution",
                        str(AXPY / "solutions" / "torch_ok.py"), "--peer", peer, "--peer-cwd", str(tmp_path),
                        "--device", "cpu", "--db", str(tmp_path / "cost.db"), "--rounds", "1", "--out", str(out)],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(out.read_text())
    assert (tmp_path / "peer-ran").exists() and result["all_exited_0"] == {"solbench": True, "peer": True}
    last = result["solbench_last"]
    assert last["verdict"] == "passed" and last["workloads"] >= 1 and "worker" in last["phases_s"]
    med = result["median_s"]
    assert result["ratio"] == round(med["solbench"] / med["peer"], 3)
    assert result["met"] == (result["ratio"] <= 0.5)
    assert "ratio" in r.stdout


def test_a_missing_problem_is_one_line_and_exit_2(tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPT), "--problem", str(tmp_path / "none"), "--solution",
                        str(tmp_path / "x.py"), "--peer", "true"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def test_the_budget_ends_the_comparison_with_a_report(tmp_path):
    """A peer that outlasts the whole budget is stopped at its end, no round starts after it, and the report is
    written all the same (the GPU script's stage limit would otherwise end the script before it says anything)."""
    peer = f"exec {sys.executable} -c 'import time; time.sleep(60)'"
    out = tmp_path / "cost.json"
    r = subprocess.run([sys.executable, str(SCRIPT), "--problem", str(AXPY), "--solution",
                        str(AXPY / "solutions" / "torch_ok.py"), "--peer", peer, "--peer-cwd", str(tmp_path),
                        "--device", "cpu", "--db", str(tmp_path / "cost.db"), "--rounds", "2", "--budget-s", "0.5",
                        "--out", str(out)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["rounds"] == 0 and result["ratio"] is None and not result["met"]
    assert result["warm_up_s"]["peer"] < 30  # stopped, not slept out
    assert "unmeasured peer:" in r.stdout and "exit 124" in r.stdout and "round 1: not started" in r.stdout
