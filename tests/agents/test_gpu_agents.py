"""The agent track on the GPU: the loopback model server on this machine, real GPU evaluations, real timings in
the statistics (``scripts/gpu-check.sh agents``)."""

from __future__ import annotations

import importlib.util
import json
import os
import sqlite3
import subprocess
import sys

import pytest

from tests.agents.agents_loopback import LoopbackServer, code_reply, no_code_reply, reply
from tests.paths import ROOT, SCRIPTED_AGENT, TESTS

pytestmark = [pytest.mark.gpu, pytest.mark.agents]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_agent_loop import GPU_KERNEL as TRITON  # noqa: E402

TORCH = ("import torch\n\n\ndef run(x, weight, eps, out):\n    xf = x.float()\n"
         "    out.copy_((xf * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype))\n")
#: the built-in loop's model client is the `agents` extra's (openai), carried to the GPU machine as a wheel
needs_openai = pytest.mark.skipif(importlib.util.find_spec("openai") is None,
                                  reason="the built-in loop needs the openai package (solbench[agents])")
SKILL = "```markdown\n# SKILL\n- rmsnorm is memory bound: one pass per row, fp32 accumulation, no scratch\n```"


def scripted(body: dict) -> dict:
    msgs = body.get("messages") or []
    system = msgs[0]["content"] if msgs and msgs[0]["role"] == "system" else ""
    if "You maintain SKILL.md" in system:
        return reply(SKILL)
    if len([m for m in msgs if m["role"] == "assistant"]) >= 1:
        return no_code_reply("Done.")
    return code_reply(TRITON if "in triton" in system.lower() else TORCH)


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-m", "solbench", *args], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL, timeout=500)


@needs_openai
def test_transfer_experiment_on_the_gpu(tmp_path):
    with LoopbackServer(default=scripted) as srv:
        models = tmp_path / "models.toml"
        models.write_text(f'[models.loop]\nprovider = "openai"\nbase_url = "{srv.openai_base_url}"\nmodel = "m"\n'
                          'max_retries = 0\n')
        db = tmp_path / "g.db"
        res = _cli("experiment", "transfer", "--problems", "rmsnorm", "--pair", "triton,pytorch", "--model", "loop",
                   "--models", str(models), "--device", "cuda", "--heldout", "2", "--baselines", "eager",
                   "--turns", "2", "--submissions", "1", "--db", str(db), "--out", str(tmp_path / "rep.json"))
        print(res.stdout[-3000:], res.stderr[-3000:])
        assert res.returncode == 0, res.stderr[-2000:]
    rep = json.loads((tmp_path / "rep.json").read_text())
    both = rep["directions"]["both"]
    assert both["pairs"] == 2 and both["lift_correct"]["mean"] == 0.0
    assert both["lift_speed"]["mean"] is not None  # both passed in every pair: a speed lift from real timings
    rows = sqlite3.connect(db).execute(
        "SELECT m.workload, m.time_ms, m.baseline_ms, e.language FROM measurements m JOIN evaluations e "
        "ON e.id = m.evaluation_id").fetchall()
    assert {r[3] for r in rows} == {"triton", "pytorch"}
    assert any(r[0].startswith("heldout-") for r in rows)
    assert all(r[1] is not None and r[1] > 0 and r[2] is not None for r in rows), rows
    report = _cli("agent", "report", "--db", str(db), "--by", "language", "--json")
    by = {r["language"]: r for r in json.loads(report.stdout)}
    assert by["triton"]["correct"] == 1.0 and by["triton"]["speedup"] is not None
    print(json.dumps(rep["directions"], indent=1)[:4000])


def test_external_agent_on_the_gpu(tmp_path):
    kernel = tmp_path / "src" / "kernel.py"
    kernel.parent.mkdir()
    kernel.write_text(TRITON)
    cmd = (f"{sys.executable} {SCRIPTED_AGENT} --script solve-first-try --file solution.py "
           f"--code-file {kernel}")
    # the agent's sandbox shows neither the repository nor the temporary directory: --agent-read names what it reads
    res = _cli("agent", "run", "--problem", "rmsnorm", "--model", "scripted", "--agent-cmd", cmd, "--language",
               "triton", "--device", "cuda", "--heldout", "2", "--baselines", "eager", "--submissions", "2",
               "--db", str(tmp_path / "e.db"), "--json",
               "--agent-read", str(TESTS), "--agent-read", str(kernel.parent))
    assert res.returncode == 0, res.stderr[-2000:]
    r = json.loads(res.stdout)
    assert r["best"]["passed"] and r["best"]["score_sol"] is not None and r["best"]["score_sol"] > 0
    print("external agent on the GPU:", {k: r["best"][k] for k in ("verdict", "score_sol", "score_speedup")})


@needs_openai
def test_builtin_loop_agent_run_on_the_gpu(tmp_path):
    with LoopbackServer(default=scripted) as srv:
        models = tmp_path / "models.toml"
        models.write_text(f'[models.loop]\nprovider = "openai"\nbase_url = "{srv.openai_base_url}"\nmodel = "m"\n'
                          'max_retries = 0\n')
        res = _cli("agent", "run", "--problem", "rmsnorm", "--model", "loop", "--models", str(models), "--language",
                   "triton", "--device", "cuda", "--heldout", "2", "--baselines", "eager", "--turns", "2",
                   "--db", str(tmp_path / "b.db"), "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    r = json.loads(res.stdout)
    assert r["best"]["passed"] and r["best"]["score_sol"] is not None and r["best"]["score_speedup"] is not None
    print("built-in loop on the GPU:", {k: r["best"][k] for k in ("verdict", "score_sol", "score_speedup")})
