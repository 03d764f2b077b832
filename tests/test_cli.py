"""The command line: JSON shapes, and one clear line with exit 2 for user errors."""

import json
import subprocess
import sys

import pytest

from conftest import AXPY, SOLUTIONS


def solbench(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "solbench.cli", *args], capture_output=True, text=True, cwd=cwd,
                          stdin=subprocess.DEVNULL, timeout=300)


@pytest.mark.parametrize("args,needle", [
    (["show", "no_such_problem"], "unknown problem"),
    (["eval", "--problem", str(AXPY), "--solution", "/nonexistent/sol.py", "--device", "cpu"], "not found"),
    (["eval", "--problem", str(AXPY), "--solution", str(SOLUTIONS / "malformed.json"), "--device", "cpu"],
     "malformed JSON"),
    (["eval", "--problem", str(AXPY), "--solution", str(SOLUTIONS / "missing_field.json"), "--device", "cpu"],
     "spec"),
    (["show", str(AXPY), "--hardware", "no-such-chip"], "no-such-chip"),
    (["list", "--suite", "nonsense"], "unknown suite"),
    (["eval", "--problem", str(AXPY), "--solution", str(AXPY / "solutions" / "torch_ok.py"), "--device", "cpu",
      "--profile-dsl", "sometimes"], "--profile-dsl"),
])
def test_user_errors_are_one_line_exit_2(tmp_path, args, needle):
    r = solbench(*args, "--db", str(tmp_path / "x.db")) if args[0] == "eval" else solbench(*args)
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert needle in lines[0]
    assert "Traceback" not in r.stderr


def test_malformed_definition_is_a_user_error(tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "definition.json").write_text('{"name": "x", "axes": {}, "inputs": {"a": {"shape": ["N"], "dtype": "float32"}}, "outputs": {}}')
    (bad / "reference.py").write_text("def run(a):\n    return a\n")
    (bad / "workload.jsonl").write_text('{"uuid": "w", "axes": {}, "inputs": {}}\n')
    r = solbench("show", str(bad))
    assert r.returncode == 2 and "axis 'N'" in r.stderr and "Traceback" not in r.stderr


def test_list_json():
    r = solbench("list", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert len(rows) >= 16
    for row in rows:
        assert {"name", "family", "tags"} <= set(row)


def test_show_json_follows_workload_order():
    r = solbench("show", str(AXPY), "--hardware", "h200", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert [w["uuid"] for w in data["workloads"]] == ["axpy-small", "axpy-odd", "axpy-gpu"]
    w = data["workloads"][2]
    n = 67108864
    assert w["bytes"] == 3 * 4 * n  # x, y read once, out written once
    assert w["bound"] == "memory"
    assert w["sol_ms"] == pytest.approx(3 * 4 * n / 4.8e12 * 1e3, rel=1e-6)
    assert set(w) >= {"uuid", "flops", "bytes", "sol_ms", "bound"}


def test_eval_json_and_export(tmp_path):
    db = tmp_path / "r.db"
    r = solbench("eval", "--problem", str(AXPY), "--solution", str(AXPY / "solutions" / "torch_ok.py"),
                 "--device", "cpu", "--json", "--db", str(db), "--workload", "axpy-small")
    assert r.returncode == 0, r.stderr
    ev = json.loads(r.stdout)
    assert ev["verdict"] == "passed" and ev["problem"] == "axpy_fixture"
    assert isinstance(ev["reasons"], list) and isinstance(ev["warnings"], list)
    w = ev["workloads"][0]
    for key in ("uuid", "verdict", "time_ms", "eager_ms", "compile_ms", "baseline_ms", "baseline", "sol_ms",
                "sol_score", "max_abs_err", "max_rel_err"):
        assert key in w
    out = tmp_path / "traces.jsonl"
    r = solbench("export", "--db", str(db), "--out", str(out))
    assert r.returncode == 0, r.stderr
    traces = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(traces) == 1
    t = traces[0]
    assert t["definition"] == "axpy_fixture" and t["workload"]["uuid"] == "axpy-small"
    assert t["evaluation"]["status"] == "PASSED"
    assert t["evaluation"]["performance"]["latency_ms"] == pytest.approx(w["time_ms"])


def test_eval_failing_solution_exits_0_and_replays(tmp_path):
    db = tmp_path / "r.db"
    r = solbench("eval", "--problem", str(AXPY), "--solution", str(SOLUTIONS / "wrong.py"), "--device", "cpu",
                 "--json", "--db", str(db), "--workload", "axpy-odd")
    assert r.returncode == 0, r.stderr
    ev = json.loads(r.stdout)
    assert ev["verdict"] == "incorrect_numerical"
    r = solbench("eval", "--replay", str(ev["id"]), "--db", str(db), "--json", "--device", "cpu")
    assert r.returncode == 0, r.stderr
    again = json.loads(r.stdout)
    assert again["reproduced"] is True
    assert again["workloads"][0]["failure"]["seed"] == ev["workloads"][0]["failure"]["seed"]
