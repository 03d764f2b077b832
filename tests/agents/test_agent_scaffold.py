"""External agent scaffolds: a scripted agent in a private workspace, graded through ``./submit`` by a fake
grader (passes when the file text says GOOD); usage read from the agent's own log. The tests marked ``both`` run
the agent in its sandbox and without one (``view=None``); tests/agents/test_agent_sandbox.py attacks the sandbox."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from solbench.agents import jail
from solbench.agents.agent_logs import parse_usage
from solbench.agents.scaffold import best_of, run_external
from solbench.agents.types import Budget, Graded, Usage
from solbench.evaluate.isolation.sandbox import namespaces_available
from tests.paths import SCRIPTED_AGENT

AGENT = SCRIPTED_AGENT
#: the scripted agent travels in the workspace: the sandbox shows nothing of the repository
TEMPLATE = {"kernel.py": "def run(x):\n    raise NotImplementedError  # TODO\n", "agent.py": AGENT.read_text()}
TASK = "Write run(x) in kernel.py.\nSubmit with ./submit.\n"
#: what one scripted turn reports: 100 fresh + 1000 cache reads + 50 cache writes in, 20 out
TURN = Usage(input=1150, cached=1000, output=20)


class FakeGrader:
    def __init__(self):
        self.calls: list[dict[str, str]] = []

    def grade(self, files: dict[str, str], language: str, entry: str | None = None) -> Graded:
        self.calls.append(files)
        ok = all("GOOD" in t for t in files.values())
        return Graded(submission=0, solution_digest=str(len(self.calls)), language=language,
                      verdict="PASSED" if ok else "INCORRECT", passed=ok,
                      reasons=[] if ok else ["output mismatch"], score_sol=0.5 if ok else None,
                      score_speedup=1.5 if ok else None)


def _view():
    if not namespaces_available():
        pytest.skip("user namespaces are not available here: the agent's sandbox cannot be built")
    hidden, readable = jail.view_paths([])
    return {"hidden": hidden, "readable": readable}


both = pytest.mark.parametrize("sandboxed", [True, False], ids=["sandbox", "unsandboxed"])


def run(tmp_path, script, *args, budget=None, grader=None, sandboxed=False, **kw):
    grader = grader or FakeGrader()
    res = run_external([sys.executable, "{workspace}/agent.py", "--script", script, *args], tmp_path / "attempt",
                       TASK, TEMPLATE, grader, budget or Budget(submissions=3, wall_s=20), "pytorch",
                       view=_view() if sandboxed else None, **kw)
    return res, grader


def _alive_with(mark: str) -> list[int]:
    """Host processes whose command line holds ``mark`` (not this one)."""
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if mark.encode() in cmd and state not in ("Z", "X"):
            found.append(int(pid))
    return found


@both
def test_solves_first_try(tmp_path, sandboxed):
    res, grader = run(tmp_path, "solve-first-try", sandboxed=sandboxed)
    assert res.stopped == "exit" and res.exit_code == 0
    assert res.sandbox == ("namespaces" if sandboxed else "none")
    assert [g.passed for g in res.graded] == [True] and res.best == res.graded[0]
    assert res.graded[0].submission == 1
    assert list(grader.calls[0]) == ["kernel.py"] and "GOOD" in grader.calls[0]["kernel.py"]
    assert (res.workspace / "TASK.md").read_text() == TASK
    assert os.access(res.workspace / "submit", os.X_OK)
    assert (res.workspace.stat().st_mode & 0o077) == 0  # private
    assert not any(p.is_socket() for p in res.workspace.rglob("*"))  # the sockets live outside the workspace
    rec = [json.loads(line) for line in (res.log_dir / "submissions.jsonl").read_text().splitlines()]
    assert len(rec) == 1 and rec[0]["graded"]["passed"] is True


def test_feedback_reaches_agent_and_second_try_passes(tmp_path):
    res, _ = run(tmp_path, "fix-after-feedback")
    assert [g.passed for g in res.graded] == [False, True]
    assert res.best.submission == 2 and res.best.passed
    log = res.stdout_path.read_text()
    assert "first try exit 0; feedback: submission 1: INCORRECT (output mismatch), passed=False" in log
    assert "[1 of 3 submissions used]" in log and "second try exit 0" in log


def test_submissions_beyond_budget_refused_and_not_graded(tmp_path):
    res, grader = run(tmp_path, "spam", "--spam", "5", budget=Budget(submissions=2, wall_s=20))
    codes = json.loads(res.stdout_path.read_text().split("SPAM_CODES ")[1].splitlines()[0])
    assert codes == [0, 0, 3, 3, 3]
    assert len(grader.calls) == 2 and len(res.graded) == 2 and res.refused == 3
    assert res.stopped == "budget" and res.exit_code == 0
    assert "submission refused: the submissions budget is spent" in res.stdout_path.read_text()
    assert res.best.submission == 2  # the GOOD one (odd attempts say GOOD)


@both
def test_hanging_agent_killed_at_wall_limit_with_children(tmp_path, sandboxed):
    mark = f"hang-{os.getpid()}-{time.monotonic_ns()}"
    res, _ = run(tmp_path, "hang", budget=Budget(submissions=3, wall_s=2), sandboxed=sandboxed,
                 env={"PROBE_MARK": mark})
    assert res.stopped == "timeout"
    assert res.exit_code is not None and res.exit_code < 0  # killed by a signal
    assert (res.workspace / "pids.txt").exists()  # it did start its child
    deadline = time.time() + 5  # unsandboxed, the group's SIGKILL may take a moment to land
    while _alive_with(mark) and time.time() < deadline:
        time.sleep(0.05)
    assert _alive_with(mark) == []
    assert res.graded == [] and res.best is None


def test_wall_budget_refuses_submissions(tmp_path):
    res, grader = run(tmp_path, "solve-first-try", "--delay", "0.6", budget=Budget(submissions=3, wall_s=0.3),
                      timeout_s=15)
    assert grader.calls == [] and res.graded == [] and res.refused == 1 and res.stopped == "budget"
    assert "submission refused: the wall-clock budget is spent; nothing was graded" in res.stdout_path.read_text()
    assert "submitted, exit 3" in res.stdout_path.read_text()


def test_token_budget_stops_agent_from_its_log(tmp_path):
    res, _ = run(tmp_path, "hang", budget=Budget(tokens=1000, wall_s=60))  # one turn logs 1170 tokens
    assert res.stopped == "budget" and res.usage == TURN  # the log's claim raised the count past the limit


def test_usage_from_stream_json_result_event(tmp_path):
    res, _ = run(tmp_path, "solve-first-try")
    # two turns, the first logged twice under one id; the result event's totals (one extra call) win
    assert res.usage == Usage(input=2 * TURN.input, cached=2 * TURN.cached, output=2 * TURN.output + 7)
    assert res.usd == pytest.approx(0.0123)


def test_usage_from_stream_json_assistant_events_deduplicated(tmp_path):
    res, _ = run(tmp_path, "fix-after-feedback", "--no-result")
    assert res.usage == Usage(input=2 * TURN.input, cached=2 * TURN.cached, output=2 * TURN.output)
    assert res.usd is None


def test_generic_usage_line(tmp_path):
    res, _ = run(tmp_path, "no-submit", "--usage", "generic")
    assert res.usage == TURN and res.usd is None and res.graded == []
    text = 'noise\n[12:00] SOLBENCH_USAGE {"input": 10, "cached": 4, "output": 3, "usd": 0.5} trailing\n' \
           "SOLBENCH_USAGE {broken\nSOLBENCH_USAGE " + json.dumps({"input": 1, "output": 1}) + "\n"
    assert parse_usage(text) == (Usage(input=11, cached=4, output=4), 0.5)


def test_parent_api_key_not_visible_unless_passed(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_API_KEY", "sk-parent-secret")
    res, _ = run(tmp_path / "a", "no-submit")
    assert '"env_probe": null' in res.stdout_path.read_text()
    assert "sk-parent-secret" not in res.stdout_path.read_text()
    res, _ = run(tmp_path / "b", "no-submit", env={"FAKE_API_KEY": None})  # None: pass ours through
    assert '"env_probe": "sk-parent-secret"' in res.stdout_path.read_text()
    res, _ = run(tmp_path / "c", "no-submit", env={"FAKE_API_KEY": "sk-given"})
    assert '"env_probe": "sk-given"' in res.stdout_path.read_text()


def test_logs_live_outside_workspace(tmp_path):
    res, _ = run(tmp_path, "solve-first-try")
    for p in (res.stdout_path, res.stderr_path, res.log_dir):
        assert res.workspace not in p.parents and p != res.workspace
    assert res.stdout_path.read_text().startswith('{"type": "system"')
    assert not any(p.name in ("agent.stdout", "agent.stderr") for p in res.workspace.rglob("*"))
    with pytest.raises(ValueError, match="already holds an attempt"):
        run(tmp_path, "no-submit")  # one attempt per directory


def test_best_of_order():
    def g(n, passed, sol=None, sp=None):
        return Graded(submission=n, solution_digest="d", language="l", verdict="passed" if passed else "v",
                      passed=passed,
                      score_sol=sol, score_speedup=sp)

    assert best_of([]) is None
    assert best_of([g(1, False, 0.9, 9), g(2, True, 0.1, 1)]).submission == 2
    assert best_of([g(1, True, 0.5, 1), g(2, True, 0.6, 1), g(3, True, 0.6, 2)]).submission == 3
    assert best_of([g(1, True, 0.5, 2), g(2, True, 0.5, 2)]).submission == 1  # the earliest on ties


def test_parse_usage_claude_opencode_codex_and_garbage():
    claude = "\n".join([
        "not json", "{broken", "[1, 2]",
        json.dumps({"type": "assistant", "message": {"id": "m1", "usage": {"input_tokens": 5, "output_tokens": 1}}}),
        json.dumps({"type": "assistant", "message": {"id": "m1", "usage": {"input_tokens": 5, "output_tokens": 3}}}),
        json.dumps({"type": "assistant", "message": {"id": "m2", "usage": {
            "input_tokens": 2, "cache_read_input_tokens": 10, "cache_creation_input_tokens": "x"}}}),
    ])
    assert parse_usage(claude) == (Usage(input=17, cached=10, output=3), None)
    result = json.dumps({"type": "result", "session_id": "s", "total_cost_usd": 0.25, "modelUsage": {
        "a": {"inputTokens": 1, "outputTokens": 2, "cacheReadInputTokens": 3, "cacheCreationInputTokens": 4},
        "b": {"inputTokens": 10, "outputTokens": 20}}})
    assert parse_usage(claude + "\n" + result, "claude") == (Usage(input=18, cached=3, output=22), 0.25)

    def step(pid, i, o, r, cr, cw, cost):
        return json.dumps({"type": "step_finish", "sessionID": "s", "part": {
            "id": pid, "type": "step-finish", "reason": "stop", "cost": cost,
            "tokens": {"input": i, "output": o, "reasoning": r, "cache": {"read": cr, "write": cw}}}})

    opencode = "\n".join([json.dumps({"type": "step_start", "part": {"id": "p0", "type": "step-start"}}),
                          step("p1", 10, 5, 2, 100, 1, 0.01), step("p1", 10, 5, 2, 100, 1, 0.01),
                          step("p2", 3, 1, 0, 0, 0, 0.02), "garbage"])
    usage, usd = parse_usage(opencode)
    assert usage == Usage(input=114, cached=100, output=8) and usd == pytest.approx(0.03)

    def turn(i, c, o):
        return json.dumps({"type": "turn.completed", "usage": {
            "input_tokens": i, "cached_input_tokens": c, "output_tokens": o, "reasoning_output_tokens": 1}})

    codex = "\n".join([json.dumps({"type": "thread.started", "thread_id": "t1"}), turn(100, 60, 10),
                       turn(300, 200, 30), json.dumps({"type": "thread.started", "thread_id": "t2"}), turn(5, 0, 1)])
    assert parse_usage(codex) == (Usage(input=305, cached=200, output=31), None)  # cumulative: last per thread
    rollout = json.dumps({"type": "event_msg", "payload": {"type": "token_count", "info": {"total_token_usage": {
        "input_tokens": 40, "cached_input_tokens": 30, "output_tokens": 4}}}})
    assert parse_usage(rollout, "codex") == (Usage(input=40, cached=30, output=4), None)

    assert parse_usage("") == (Usage(), None)
    assert parse_usage("\x00\xff{{{\n}") == (Usage(), None)
    with pytest.raises(ValueError):
        parse_usage("", "nope")
