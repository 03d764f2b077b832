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

from solbench.evaluate.isolation.sandbox import namespaces_available
from tests.agents.agents_loopback import LoopbackServer, delay, language_model
from tests import forkcli
from tests.paths import AXPY, ROOT, SCRIPTED_AGENT, TESTS

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


def _passed(msgs: list[dict]) -> bool:
    last = msgs[-1]["content"] if msgs else ""
    return "passed" in last.lower() and "Submission" in last or "all visible workloads passed" in last.lower()


#: a model that writes the kernel in the language the system prompt names, keeps a skill, then stops
scripted = language_model({"triton": TRITON, "pytorch": TORCH}, SKILL, done=_passed)


def _models(tmp_path: Path, url: str) -> Path:
    p = tmp_path / "models.toml"
    p.write_text(f'[models.loop]\nprovider = "openai"\nbase_url = "{url}"\nmodel = "m"\nmax_retries = 0\n'
                 'price = { input = 1.0, cached = 0.1, output = 4.0 }\n')
    return p


def _cli(*args: str) -> subprocess.CompletedProcess:
    return forkcli.run(*args, env=dict(os.environ, PYTHONPATH=str(ROOT / "src")), timeout=600)


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
    arms = json.loads(_cli("agent", "report", "--db", str(db), "--by", "arm", "--json").stdout)
    assert sorted(r["arm"] for r in arms) == ["pytorch->triton", "solo-pytorch", "solo-triton", "triton->pytorch"]
    assert all(r["operators"] == 1 for r in arms)  # an experiment's arms are operators of their own
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
        srv.default = scripted  # the replies were slow for the kill to land mid-run; the resume needs no delay
        before = srv.calls
        res = _cli(*args)
        assert res.returncode == 0, res.stderr[-2000:]
        conn = sqlite3.connect(db)
        recorded = conn.execute("SELECT count(*) FROM trajectory_events WHERE kind IN ('reply', 'skill')").fetchone()[0]
        # every answered call was recorded once; at most the one in flight at the kill was asked again
        assert srv.calls <= recorded + 1, (srv.calls, recorded, before)
        assert sorted(r[0] for r in conn.execute("SELECT status FROM trajectories")) == ["finished"] * 4


def test_agent_run_cli_with_an_external_scripted_agent(tmp_path):
    kernel = tmp_path / "src" / "kernel.py"
    kernel.parent.mkdir()
    kernel.write_text(TORCH)
    cmd = (f"{sys.executable} {SCRIPTED_AGENT} --script solve-first-try --file solution.py "
           f"--code-file {kernel}")
    db = tmp_path / "a.db"
    # the sandbox shows neither the repository nor the temporary directory: --agent-read names what it reads
    sandbox = ["--agent-read", str(TESTS), "--agent-read", str(kernel.parent)] \
        if namespaces_available() else ["--unsandboxed-agent"]
    res = _cli("agent", "run", "--problem", str(AXPY), "--model", "scripted", "--agent-cmd", cmd, "--language",
               "pytorch", "--device", "cpu", "--heldout", "1", "--baselines", "", "--submissions", "3",
               "--db", str(db), "--json", *sandbox)
    assert res.returncode == 0, res.stderr[-2000:]
    r = json.loads(res.stdout)
    assert r["best"]["passed"] and r["submissions"] == 1 and r["stopped"] == "external:exit"
    assert r["sandbox"] == ("namespaces" if namespaces_available() else "none")
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


def test_exported_trajectories_replay_without_any_model(tmp_path):
    """`solbench export --trajectories` then a replay model: the recorded replies are graded again, no endpoint."""
    with LoopbackServer(default=scripted) as srv:
        models = _models(tmp_path, srv.openai_base_url)
        db = tmp_path / "first.db"
        res = _cli("agent", "run", "--problem", str(AXPY), "--model", "loop", "--models", str(models), "--language",
                   "pytorch", "--device", "cpu", "--heldout", "1", "--baselines", "", "--turns", "3",
                   "--db", str(db), "--json")
        assert res.returncode == 0, res.stderr[-2000:]
        first = json.loads(res.stdout)
        calls = srv.calls
    exported = tmp_path / "traj.jsonl"
    assert _cli("export", "--db", str(db), "--trajectories", "--out", str(exported)).returncode == 0
    (tmp_path / "replay.toml").write_text(f'[models.again]\nprovider = "replay"\nreplay_file = "{exported}"\n')
    res = _cli("agent", "run", "--problem", str(AXPY), "--model", "again", "--models", str(tmp_path / "replay.toml"),
               "--language", "pytorch", "--device", "cpu", "--heldout", "1", "--baselines", "", "--turns", "3",
               "--db", str(tmp_path / "second.db"), "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    again = json.loads(res.stdout)
    assert calls == first["turns"] and again["turns"] == first["turns"]
    assert [g["verdict"] for g in again["graded"]] == [g["verdict"] for g in first["graded"]]
    assert again["best"]["solution_digest"] == first["best"]["solution_digest"]


def test_the_skill_gate_counts_a_held_back_skill_as_the_solo_attempt():
    from solbench.agents.loop import AttemptResult
    from solbench.agents.types import Graded
    from solbench.experiments.transfer import Unit, Variant, gate_allows, pairs_of

    def result(arm: str, passed: bool, speedup: float | None) -> AttemptResult:
        g = Graded(submission=1, solution_digest="d", language="x", verdict="passed" if passed else "incorrect",
                   passed=passed, score_speedup=speedup)
        return AttemptResult(key=arm, problem="p", language="x", arm=arm, best=g, skill="notes")

    a, b = Variant(name="A", language="triton"), Variant(name="B", language="pytorch")
    solo_a, solo_b = result("solo-A", False, None), result("solo-B", True, 1.0)
    assert not gate_allows("source_passed", solo_a, solo_b) and gate_allows("none", solo_a, solo_b)
    assert not gate_allows("source_beat_solo", solo_b, result("solo-A", True, 2.0))
    assert gate_allows("source_beat_solo", result("s", True, 4.0), solo_b)
    unit = Unit(problem="p", replicate=0, arms={"solo-A": solo_a, "solo-B": solo_b, "B->A": result("B->A", True, 2.0)},
                handed={"A->B": False, "B->A": True})
    pairs = pairs_of([unit], a, b)
    held = pairs["A->B"][0]
    assert held.skill == held.solo  # the gate held the skill back: the skill arm is the target's solo attempt
    given = pairs["B->A"][0]
    assert given.skill.passed and given.skill.speedup == 2.0 and not given.solo.passed
    assert given.source.passed and len(pairs["both"]) == 2


def test_transfer_between_two_problem_sources(tmp_path):
    """--axis source: the same language on each problem and its counterpart in the other source."""
    twin = tmp_path / "axpy_twin"
    import shutil

    shutil.copytree(AXPY, twin)
    (tmp_path / "map.json").write_text(json.dumps({str(AXPY): str(twin)}))
    with LoopbackServer(default=scripted) as srv:
        models = _models(tmp_path, srv.openai_base_url)
        args = ["experiment", "transfer", "--problems", str(AXPY), "--axis", "source", "--pair", "kb,sol",
                "--language", "pytorch", "--model", "loop", "--models", str(models), "--device", "cpu",
                "--heldout", "0", "--baselines", "", "--turns", "2", "--submissions", "1", "--db",
                str(tmp_path / "s.db"), "--out", str(tmp_path / "rep.json")]
        bad = _cli(*args[:-2], "--counterparts", str(tmp_path / "nothing.json"))
        assert bad.returncode == 2 and "--counterparts" in bad.stderr
        res = _cli(*args, "--counterparts", str(tmp_path / "map.json"))
        assert res.returncode == 0, res.stderr[-2000:]
    rep = json.loads((tmp_path / "rep.json").read_text())
    assert set(rep["directions"]) == {"kb->sol", "sol->kb", "both"} and rep["directions"]["both"]["pairs"] == 2
    dirs = {r[0] for r in sqlite3.connect(tmp_path / "s.db").execute("SELECT problem_dir FROM evaluations")}
    assert dirs == {str(AXPY), str(twin)}


def test_units_run_concurrently_and_each_finishes(tmp_path):
    import shutil

    twin = tmp_path / "axpy_b"
    shutil.copytree(AXPY, twin)
    for f in twin.glob("*.json*"):  # a second problem: its own name
        f.write_text(f.read_text().replace("axpy_fixture", "axpy_b"))
    with LoopbackServer(default=scripted) as srv:
        models = _models(tmp_path, srv.openai_base_url)
        res = _cli("experiment", "transfer", "--problems", f"{AXPY},{twin}", "--pair", "pytorch,triton", "--model",
                   "loop", "--models", str(models), "--device", "cpu", "--heldout", "0", "--baselines", "",
                   "--turns", "2", "--submissions", "1", "--concurrency", "2", "--db", str(tmp_path / "c.db"))
        assert res.returncode == 0, res.stderr[-2000:]
    rows = sqlite3.connect(tmp_path / "c.db").execute("SELECT status FROM trajectories").fetchall()
    assert [r[0] for r in rows] == ["finished"] * 8
