"""The command line: JSON shapes, and one clear line with exit 2 for user errors and solbench's own failures;
no traceback ever reaches a user."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from solbench.cli import app
from tests import forkcli
from tests.paths import AXPY, FIXTURES, ROOT, SOLUTIONS

KB = FIXTURES / "kernelbench"
PEER = FIXTURES / "peer" / "triton_axpby_relu"


def solbench(*args, cwd=None):
    """``python -m solbench ARGS`` (``forkcli``: forked from a process that has imported the command line)."""
    return forkcli.run(*args, cwd=cwd, timeout=300)


def invoke(*args):
    """In-process (typer's CliRunner): the commands' own guard, without the console script's main()."""
    return CliRunner().invoke(app, [str(a) for a in args])


def one_line(stderr: str) -> str:
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


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


def test_python_dash_m_solbench():
    r = solbench("--help")
    assert r.returncode == 0 and "import" in r.stdout and "eval" in r.stdout


def _broken_problem(tmp_path, reference: str):
    d = tmp_path / "broken"
    shutil.copytree(AXPY, d)
    (d / "reference.py").write_text(reference)
    return d


@pytest.mark.parametrize("args,needle", [
    (["show", "{broken}", "--hardware", "h200"], "reference.py:2: cannot be imported: RuntimeError: boom"),
    (["eval", "--problem", "{broken}", "--solution", str(AXPY / "solutions" / "torch_ok.py"), "--device", "cpu",
      "--db", "{tmp}/r.db", "--quiet"], "reference.py:2: cannot be imported"),
    (["eval", "--problem", str(AXPY), "--solution", str(AXPY / "solutions" / "torch_ok.py"), "--device", "cpu",
      "--db", "{tmp}", "--quiet"], "is a directory"),
    (["eval", "--replay", "7", "--db", "{tmp}/none.db"], "no evaluation with id 7"),
    (["export", "--db", "{tmp}/none.db"], "no database"),
    (["import", "kernelbench", "{tmp}/nowhere", "--out", "{tmp}/o"], "not found"),
    (["import", "flashinfer-trace", "{empty}", "--out", "{tmp}/o"], "no definitions"),
    (["list", "--family", "nonsense"], "unknown family"),
])
def test_user_errors_in_every_command_are_one_line(tmp_path, args, needle):
    broken = _broken_problem(tmp_path, "import torch\nraise RuntimeError('boom')\ndef run(x, y):\n    return x\n")
    (tmp_path / "empty").mkdir()
    args = [a.format(broken=broken, tmp=tmp_path, empty=tmp_path / "empty") for a in args]
    r = invoke(*args)
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert needle in one_line(r.stderr)


@pytest.mark.parametrize("args,needle", [
    (["eval", "--problem", str(AXPY), "--solution", "/nonexistent/sol.py", "--device", "cpu"], "not found"),
    (["eval", "--problem", "no_such_problem", "--solution", "/nonexistent/sol.py", "--device", "cpu"],
     "unknown problem"),
    (["run", "--problem", "no_such_problem", "--device", "cpu"], "unknown problem"),
    (["run", "--jobs", "2", "--device", "cpu"], "needs --check-only"),
    (["eval", "--problem", str(AXPY), "--solution", str(AXPY / "solutions" / "torch_ok.py"), "--device", "cpu",
      "--profile-dsl", "sometimes"], "--profile-dsl"),
    (["eval", "--problem", str(AXPY), "--solution", str(AXPY / "solutions" / "torch_ok.py"), "--device", "cpu",
      "--db", "{tmp}"], "is a directory"),
])
def test_a_mistake_is_said_before_any_worker_starts(monkeypatch, tmp_path, args, needle):
    import solbench.cli as cli
    import solbench.cli_options as options

    def started(device):
        raise AssertionError("a trusted worker was started for a command line that cannot run")

    monkeypatch.setattr(cli, "prestart_worker", started)
    monkeypatch.setattr(options, "prestart_worker", started)
    r = invoke(*[a.format(tmp=tmp_path) for a in args])
    assert r.exit_code == 2 and needle in one_line(r.stderr)


def test_solbench_own_failure_is_one_line_exit_2(monkeypatch):
    import solbench.problems.suite as suite

    def broken(**kwargs):
        raise RuntimeError("the suite index is corrupt")

    monkeypatch.setattr(suite, "select_problems", broken)
    r = invoke("list")
    assert r.exit_code == 2
    line = one_line(r.stderr)
    assert line.startswith("error: solbench list failed: RuntimeError: the suite index is corrupt")
    assert "test_cli.py" in line  # where it was raised


def test_check_reports_a_reference_that_cannot_run(tmp_path):
    broken = _broken_problem(tmp_path, "def run(*args):\n    raise ValueError('no reference today')\n")
    r = invoke("check", broken)
    assert r.exit_code == 1 and "Traceback" not in r.stdout + r.stderr
    assert "reference_error: the reference fails: ValueError: no reference today" in r.stdout
    assert "reference.py:2 in run" in r.stdout


def test_import_kernelbench_reports_every_file_and_refuses_to_overwrite(tmp_path):
    src = tmp_path / "level2"
    src.mkdir()
    for f in (KB / "level1" / "kl_div.py", KB / "bad" / "missing_module.py", KB / "bad" / "random_forward.py"):
        shutil.copy(f, src / f.name)
    r = solbench("import", "kernelbench", str(src), "--out", str(tmp_path / "out"))
    assert r.returncode == 1 and "Traceback" not in r.stdout + r.stderr
    lines = r.stdout.strip().splitlines()
    assert str(tmp_path / "out" / "kl_div") in lines
    assert any(ln.startswith("FAILED") and "missing_module.py: missing module" in ln for ln in lines)
    assert any(ln.startswith("FAILED") and "random_forward.py: the reference is random" in ln for ln in lines)
    assert lines[-1] == "1 imported, 2 failed, of 3 KernelBench files"
    again = invoke("import", "kernelbench", src / "kl_div.py", "--out", tmp_path / "out")
    assert again.exit_code == 1 and "exists (--force replaces it)" in again.stdout
    forced = invoke("import", "kernelbench", src / "kl_div.py", "--out", tmp_path / "out", "--force")
    assert forced.exit_code == 0 and forced.stdout.strip().splitlines()[-1] == "1 imported, 0 failed, of 1 KernelBench files"


def test_eval_of_a_sol_execbench_problem_with_a_triton_reference(tmp_path):
    r = solbench("eval", "--problem", str(PEER), "--solution", str(PEER / "solutions" / "torch_dps.json"),
                 "--device", "cpu", "--json", "--db", str(tmp_path / "r.db"), "--workload", "n1000")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    ev = json.loads(r.stdout)
    assert ev["verdict"] == "passed" and ev["problem"] == "triton_axpby_relu"


def test_run_in_turn_with_and_without_a_build_pool(tmp_path):
    """``run`` without ``--jobs`` evaluates one solution after another (the README's main job): on a host too
    small for a build pool, and with ``--build-jobs`` asking for one where nothing needs a build."""
    for extra in ((), ("--build-jobs", "2")):
        res = solbench("run", "--problem", "silu_and_mul", "--language", "triton", "--check-only", "--device",
                       "cpu", "--db", str(tmp_path / "r.db"), "--json", *extra)
        assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-2000:]
        evs = json.loads(res.stdout[res.stdout.index("["):])
        assert [(e["problem"], e["verdict"]) for e in evs] == [("silu_and_mul", "passed")]


def test_run_selects_a_language_and_checks_side_by_side(tmp_path):
    """``run --language L --check-only --jobs N``: one language's examples, correctness only, in processes of
    their own; ``--jobs`` without ``--check-only`` and an unknown baseline are one-line errors."""
    db = str(tmp_path / "r.db")
    res = solbench("run", "--problem", "rmsnorm", "--problem", "silu_and_mul", "--language", "triton",
                   "--check-only", "--jobs", "2", "--device", "cpu", "--db", db, "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    evs = json.loads(res.stdout[res.stdout.index("["):])
    assert sorted(e["problem"] for e in evs) == ["rmsnorm", "silu_and_mul"]
    assert all(e["language"] == "triton" and e["verdict"] == "passed" for e in evs)
    assert all(w["time_ms"] is None for e in evs for w in e["workloads"])  # nothing timed
    for args, word in ((("--jobs", "2"), "--check-only"), (("--baselines", "fast"), "unknown baseline")):
        bad = solbench("run", "--problem", "rmsnorm", *args, "--device", "cpu", "--db", db)
        assert bad.returncode == 2 and word in bad.stderr and "Traceback" not in bad.stderr


def test_a_named_device_starts_its_trusted_worker_before_torch_is_imported():
    """`eval --device cpu` starts the worker first: its start overlaps the command's own import of torch; not for a
    solution whose language cannot run there (it is `unsupported` without one)."""
    code = ("import sys; from solbench.cli_options import prestart_worker; prestart_worker('cpu', 'cute_dsl'); "
            "from solbench.evaluate.trusted import keeper; print(sorted(keeper._JUDGES)); "
            "prestart_worker('cpu', 'pytorch'); j = keeper._JUDGES['cpu']; "
            "print('torch' in sys.modules, j.alive()); prestart_worker('auto'); print(sorted(keeper._JUDGES))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=str(ROOT / "src")), stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.split() == ["[]", "False", "True", "['cpu']"]
