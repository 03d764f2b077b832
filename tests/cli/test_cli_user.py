"""What a new user meets on the command line (issue 25's "tried as a new user would"), each point with a test:
piped output fits 80 columns (or COLUMNS), a failing row says why, warnings show, runs can be listed and shown
again, `show` says what the problem computes, help is plain, mistakes are one line, Ctrl-C keeps what was done,
the CPU demo says once what needs a GPU, the README's next steps work."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from tests import forkcli
from tests.cli.test_cli import solbench
from tests.paths import AXPY, ROOT, SOLUTIONS


def lines_of(text):
    return [ln for ln in text.splitlines() if ln.strip()]


def test_a_failing_evaluation_says_why_within_80_columns(tmp_path):
    res = solbench("eval", "--problem", str(AXPY), "--solution", str(SOLUTIONS / "raises.py"), "--device", "cpu",
                   "--db", str(tmp_path / "r.db"))
    assert res.returncode == 0, res.stderr[-2000:]
    out = lines_of(res.stdout)
    assert all(len(ln) <= 80 for ln in out), out
    assert any("why: exception; raises.py:2 in run: RuntimeError: boom" in ln for ln in out)
    assert not any("incorr/" in ln or "ect_nu" in ln for ln in out)  # no verdict broken mid-word


@pytest.mark.slow
def test_the_cpu_demo_says_once_what_needs_a_gpu_and_runs_can_be_shown_again(tmp_path):
    db = str(tmp_path / "r.db")
    res = solbench("run", "--problem", "rmsnorm", "--problem", "silu_and_mul", "--device", "cpu", "--db", db)
    assert res.returncode == 0, res.stderr[-2000:]
    out = lines_of(res.stdout)
    assert all(len(ln) <= 80 for ln in out)
    assert sum(ln.startswith("not run here: 3 solution(s)") for ln in out) == 1
    assert not any("language_unavailable" in ln for ln in out)
    assert "no SOL score" in res.stdout and "interpreted Triton" in res.stdout
    runs = solbench("runs", "--db", db)
    assert runs.returncode == 0 and " 1 " in runs.stdout and "finished" in runs.stdout
    again = solbench("show-run", "1", "--db", db)
    assert again.returncode == 0 and "rmsnorm / triton (triton)" in again.stdout
    rows = solbench("show-run", "1", "--db", db, "--csv").stdout.splitlines()
    assert rows[0].startswith("run,evaluation,problem") and len(rows) == 6
    wide = forkcli.run("show-run", "1", "--db", db, env=dict(os.environ, COLUMNS="120"), timeout=120)
    assert max(map(len, wide.stdout.splitlines())) > 80 and all(len(ln) <= 120 for ln in wide.stdout.splitlines())


def test_show_says_what_the_problem_computes_and_on_which_chip():
    res = solbench("show", "rmsnorm")
    assert res.returncode == 0 and all(len(ln) <= 80 for ln in res.stdout.splitlines())
    for words in ("RMSNorm over the hidden dimension", "signature: run(x: bfloat16[num_tokens, hidden_size]",
                  "axes: num_tokens 1..65536", "def run(x, weight, eps):", "(this machine;"):
        assert words in res.stdout, words
    h200 = solbench("show", "rmsnorm", "--hardware", "h200")
    assert "speed of light on h200 (--hardware;" in h200.stdout
    names = [ln.split()[0] for ln in res.stdout.splitlines() if ln.startswith("  rmsnorm-")]
    assert len(set(names)) == len(names)  # workload names cut keep them apart


def test_help_is_plain_and_mistakes_are_one_line():
    helped = solbench("eval", "--help").stdout
    assert "<bool>" not in helped and "<list[str]>" not in helped and "╭" not in helped
    assert "--solution FILE" in helped and "--draws N" in helped
    assert "[required]" in solbench("experiment", "transfer", "--help").stdout
    assert solbench("--version").stdout.startswith("solbench ")
    for args, words in ((["eval", "--problem"], "requires an argument"), (["evl"], "No such command"),
                        (["show", "rmsnorm", "--language", "fortran"], "there are starters for cuda_cpp"),
                        (["eval", "--problem", str(AXPY), "--solution", str(SOLUTIONS / "raises.py"), "--device",
                          "cuda:x"], "unknown device 'cuda:x'")):
        res = solbench(*args)
        (line,) = lines_of(res.stderr)
        assert res.returncode == 2 and words in line and line.startswith("error:"), res.stderr


@pytest.mark.slow
@pytest.mark.parametrize("sig,status,said", [(signal.SIGINT, 130, "interrupted:"),
                                              (signal.SIGTERM, 143, "interrupted (SIGTERM):")],
                         ids=["ctrl-c", "sigterm"])
def test_ctrl_c_during_a_run_keeps_what_was_done(tmp_path, sig, status, said):
    """Ctrl-C, or a batch system's (or `timeout`'s) SIGTERM: the run is marked interrupted and what it had done is
    shown, with the signal's status."""
    db = tmp_path / "r.db"
    proc = subprocess.Popen([sys.executable, "-m", "solbench", "run", "--problem", "rmsnorm", "--problem",
                             "silu_and_mul", "--problem", "gelu_tanh_and_mul", "--language", "triton", "--device",
                             "cpu", "--db", str(db)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:  # the first evaluation stored, the run still going
        try:
            with sqlite3.connect(db) as conn:
                if conn.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0] >= 1:
                    break
        except sqlite3.Error:
            pass
        time.sleep(0.05)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == status, err[-2000:]
    assert said in err and "marked interrupted" in err and "Traceback" not in err
    assert "rmsnorm / triton (triton)" in out  # what was done is shown
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT status FROM runs").fetchall() == [("interrupted",)]


def test_the_readme_says_how_to_reach_the_command_and_the_agent_example_has_its_models():
    readme = (ROOT / "README.md").read_text()
    assert "source .venv/bin/activate" in readme and "cp docs/examples/models.toml ." in readme
    from solbench.agents.models import load_model

    assert load_model(ROOT / "docs" / "examples" / "models.toml", "qwen-local").base_url.startswith("http")
    res = solbench("agent", "run", "--problem", "rmsnorm", "--model", "qwen-local", "--models",
                   str(ROOT / "no-such-models.toml"))
    assert res.returncode == 2 and "docs/examples/models.toml" in res.stderr


def test_compare_runs_from_the_command_line(tmp_path):
    from tests.report.test_run_compare import run as fake_run
    from solbench.store.db import Store

    store = Store(tmp_path / "r.db")
    for times in ({"x": 1.0}, {"x": 0.8}):
        rid = store.start_run("test", "cuda", "h200")
        for e in fake_run(times, seed=rid):
            store.add_evaluation(e, "{}", rid)
        store.finish_run(rid)
    res = solbench("compare", "1", "2", "--db", str(tmp_path / "r.db"))
    said = " ".join(res.stdout.split())
    assert res.returncode == 0 and "faster" in said and "geometric mean time ratio 0.79" in said
    data = json.loads(solbench("compare", "1", "2", "--db", str(tmp_path / "r.db"), "--json").stdout)
    assert data["rows"][0]["call"] == "faster"


def test_compare_by_hardware_says_when_a_chip_was_only_scored_against(tmp_path):
    from solbench.cli_compare import compare_rows
    from solbench.store.db import Store
    from tests.report.test_run_compare import run as fake_run

    store = Store(tmp_path / "r.db")
    for hardware in ("cpu", "h200"):  # the same solution run on the CPU, once scored against the H200's ceilings
        (e,) = fake_run({"x": 1.0})
        e.hardware, e.device = hardware, "cpu"
        store.add_evaluation(e, "{}")
    data = compare_rows(tmp_path / "r.db", "hardware")
    assert data["columns"] == ["cpu", "h200 (ran on the CPU)"]
    res = forkcli.run("compare", "--by", "hardware", "--db", tmp_path / "r.db", timeout=120,
                      env=dict(os.environ, COLUMNS="200"))
    assert "x eager" in res.stdout and "SOL" in res.stdout


def test_report_writes_one_offline_file_or_a_site(tmp_path):
    pytest.importorskip("plotly")
    from solbench.store.db import Store
    from tests.report.test_html_browser import _evaluation

    db = tmp_path / "r.db"
    store = Store(db)
    rid = store.start_run("solbench run", "cuda", "h200")
    store.add_evaluation(_evaluation("rmsnorm", "triton", "triton", "passed", 0.8, 0.05), "{}", rid)
    page = tmp_path / "report.html"
    res = solbench("report", "--db", str(db), "-o", str(page))
    assert res.returncode == 0, res.stderr[-2000:]
    text = page.read_text()
    assert '<table id="leaderboard">' in text and 'id="p-rmsnorm"' in text and "roofline: h200" in text
    assert "<script src=" not in text  # plotly's JavaScript is inlined: it works offline, with no server
    site = tmp_path / "site"
    assert solbench("report", "--db", str(db), "--site", str(site)).returncode == 0
    assert sorted(p.name for p in site.iterdir()) == ["evaluations.json", "index.html", "leaderboard.json",
                                                       "plotly.min.js"]
    assert json.loads((site / "leaderboard.json").read_text())[0]["sol_score"] == 0.8
    missing = solbench("report", "--db", str(tmp_path / "none.db"))
    assert missing.returncode == 2 and "no results database" in missing.stderr
