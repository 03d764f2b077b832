"""Transfer experiments end to end on the CPU (loopback model server, real evaluator), the CLI, and resuming
after kill -9."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agents_loopback import LoopbackServer, code_reply, delay, no_code_reply, reply

ROOT = Path(__file__).resolve().parents[1]
AXPY = ROOT / "tests" / "fixtures" / "problems" / "axpy"
TORCH = "import torch\n\n\ndef run(x, y, alpha, out):\n    torch.add(y, x, alpha=alpha, out=out)\n"
TRITON = '''import triton
import triton.language as tl


@triton.jit
def _axpy(x_ptr, y_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(y_ptr + offs, mask=m) + alpha * tl.load(x_ptr + offs, mask=m), mask=m)


def run(x, y, alpha, out):
    n = x.numel()
    _axpy[(triton.cdiv(n, 1024),)](x, y, out, float(alpha), n, BLOCK=1024)
'''
SKILL = "```markdown\n# SKILL\n- axpy is bound by memory: one pass, no scratch; measured at the launch floor\n```"


def scripted(body: dict) -> dict:
    """A model that writes the kernel in the language the system prompt names, keeps a skill, then stops."""
    msgs = body.get("messages") or []
    system = msgs[0]["content"] if msgs and msgs[0]["role"] == "system" else ""
    if "You maintain SKILL.md" in system:
        return reply(SKILL)
    last = msgs[-1]["content"] if msgs else ""
    if "passed" in last.lower() and "Submission" in last or "all visible workloads passed" in last.lower():
        return no_code_reply("Done.")
    return code_reply(TRITON if "in triton" in system.lower() else TORCH)


def _models(tmp_path: Path, url: str) -> Path:
    p = tmp_path / "models.toml"
    p.write_text(f'[models.loop]\nprovider = "openai"\nbase_url = "{url}"\nmodel = "m"\nmax_retries = 0\n'
                 'price = { input = 1.0, cached = 0.1, output = 4.0 }\n')
    return p


def _cli(*args: str, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run([sys.executable, "-m", "solbench", *args], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL, timeout=600, **kw)


def test_transfer_cli_four_arms_and_statistics(tmp_path):
    with LoopbackServer(default=scripted) as srv:
        models = _models(tmp_path, srv.openai_base_url)
        db = tmp_path / "t.db"
        res = _cli("experiment", "transfer", "--problems", str(AXPY), "--pair", "pytorch,triton", "--model", "loop",
                   "--models", str(models), "--device", "cpu", "--heldout", "1", "--baselines", "",
                   "--turns", "3", "--submissions", "2", "--db", str(db), "--out", str(tmp_path / "rep.json"))
        assert res.returncode == 0, res.stderr[-2000:]
    rep = json.loads((tmp_path / "rep.json").read_text())
    assert set(rep["directions"]) == {"pytorch->triton", "triton->pytorch", "both"}
    d = rep["directions"]["pytorch->triton"]
    assert d["pairs"] == 1 and d["skills_handed_on"] == 1
    assert d["lift_correct"]["mean"] == 0.0 and d["help_harm"]["ties"] == 1
    # the skill's tokens are charged to the arm that received it
    assert rep["tokens_by_arm"]["pytorch->triton"] > rep["tokens_by_arm"]["solo-triton"] - 1
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT arm, status FROM trajectories").fetchall()
    assert sorted(rows) == sorted([("solo-pytorch", "finished"), ("solo-triton", "finished"),
                                   ("pytorch->triton", "finished"), ("triton->pytorch", "finished")])
    # the conditioned attempt's first prompt holds the skill, the solo one's does not
    prompts = dict(conn.execute("SELECT t.arm, e.body FROM trajectory_events e JOIN trajectories t ON t.key = e.key "
                                "WHERE e.kind = 'prompt' AND e.seq = 0"))
    assert "axpy is bound by memory" in prompts["pytorch->triton"]
    assert "axpy is bound by memory" not in prompts["solo-triton"]
    out = _cli("agent", "report", "--db", str(db), "--by", "language", "--json")
    assert out.returncode == 0, out.stderr
    by = {r["language"]: r for r in json.loads(out.stdout)}
    assert by["triton"]["n"] == 2 and by["triton"]["correct"] == 1.0
    exported = _cli("export", "--db", str(db), "--trajectories")
    lines = [json.loads(x) for x in exported.stdout.splitlines()]
    assert sum(1 for x in lines if x["kind"] == "reply") >= 4 and {x["kind"] for x in lines} >= {"prompt", "submission"}


def test_kill_9_then_resume_loses_nothing_and_pays_nothing_twice(tmp_path):
    def slow(body):
        return delay(0.4, scripted(body))

    with LoopbackServer(default=slow) as srv:
        models = _models(tmp_path, srv.openai_base_url)
        db = tmp_path / "k.db"
        args = ("experiment", "transfer", "--problems", str(AXPY), "--pair", "pytorch,triton", "--model", "loop",
                "--models", str(models), "--device", "cpu", "--heldout", "0", "--baselines", "", "--turns", "3",
                "--submissions", "2", "--db", str(db), "--experiment", "k9")
        env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
        proc = subprocess.Popen([sys.executable, "-m", "solbench", *args], env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.time() + 300
        answered = 0
        while time.time() < deadline and proc.poll() is None:
            time.sleep(0.2)
            try:
                answered = sqlite3.connect(db).execute(
                    "SELECT count(*) FROM trajectory_events WHERE kind IN ('reply', 'skill')").fetchone()[0]
            except sqlite3.Error:
                continue
            if answered >= 4:
                break
        assert proc.poll() is None, "the experiment ended before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        before = srv.calls
        res = _cli(*args)
        assert res.returncode == 0, res.stderr[-2000:]
        conn = sqlite3.connect(db)
        recorded = conn.execute("SELECT count(*) FROM trajectory_events WHERE kind IN ('reply', 'skill')").fetchone()[0]
        # every answered call was recorded once; at most the one in flight at the kill was asked again
        assert srv.calls <= recorded + 1, (srv.calls, recorded, before)
        assert sorted(r[0] for r in conn.execute("SELECT status FROM trajectories")) == ["finished"] * 4


def test_agent_run_cli_with_an_external_scripted_agent(tmp_path):
    kernel = tmp_path / "kernel.py"
    kernel.write_text(TORCH)
    cmd = (f"{sys.executable} {ROOT / 'tests' / 'scripted_agent.py'} --script solve-first-try --file solution.py "
           f"--code-file {kernel}")
    db = tmp_path / "a.db"
    res = _cli("agent", "run", "--problem", str(AXPY), "--model", "scripted", "--agent-cmd", cmd, "--language",
               "pytorch", "--device", "cpu", "--heldout", "1", "--baselines", "", "--submissions", "3",
               "--db", str(db), "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    r = json.loads(res.stdout)
    assert r["best"]["passed"] and r["submissions"] == 1 and r["stopped"] == "external:exit"
    # the agent's own stream-json log gave the tokens: 2 turns of 100 + 1000 cached + 50 in, 20 out, + 7 extra
    assert r["usage"]["output"] == 2 * 20 + 7 and r["usage"]["cached"] == 2000
    [[status]] = sqlite3.connect(db).execute("SELECT status FROM trajectories").fetchall()
    assert status == "finished"


def test_agent_cli_errors_are_one_line(tmp_path):
    res = _cli("agent", "run", "--problem", str(AXPY), "--model", "nope", "--models", str(tmp_path / "none.toml"),
               "--device", "cpu", "--db", str(tmp_path / "x.db"))
    assert res.returncode == 2 and "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
    models = _models(tmp_path, "http://127.0.0.1:9/v1")
    res = _cli("experiment", "transfer", "--problems", str(AXPY), "--pair", "triton,triton", "--model", "loop",
               "--models", str(models), "--device", "cpu", "--db", str(tmp_path / "x.db"))
    assert res.returncode == 2 and "two different languages" in res.stderr
