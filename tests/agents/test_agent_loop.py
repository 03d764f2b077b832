"""The built-in loop end to end on the CPU: a real loopback model server, the real sandboxed evaluator."""

from __future__ import annotations

import pytest

from solbench.agents.models import ModelConfig
from solbench.agents.session import Setup, run_attempt
from solbench.agents.types import Budget
from solbench.problems.problem import load_problem
from solbench.store.db import Store
from solbench.store.journal import trajectories
from tests.agents.agents_loopback import LoopbackServer, code_reply, no_code_reply, reply, tool_call
from tests.paths import AXPY

GOOD = "import torch\n\n\ndef run(x, y, alpha, out):\n    torch.add(y, x, alpha=alpha, out=out)\n"
WRONG = "import torch\n\n\ndef run(x, y, alpha, out):\n    torch.add(y, x, alpha=2 * alpha, out=out)\n"
BROKEN = "import torch\n\n\ndef run(x, y, alpha, out):\n    raise RuntimeError('kernel launch failed: bad grid')\n"


@pytest.fixture(scope="module")
def axpy():
    return load_problem(AXPY)


def _model(srv) -> ModelConfig:
    return ModelConfig(name="loop-model", provider="openai", model="m", base_url=srv.openai_base_url,
                       max_retries=0, price={"input": 1.0, "cached": 0.5, "output": 2.0})


def _setup(**kw) -> Setup:
    return Setup(device="cpu", heldout=1, baselines=(), secret=7, **kw)


def test_chat_loop_feeds_back_and_keeps_the_best(axpy, tmp_path):
    script = [code_reply(WRONG), code_reply(GOOD), no_code_reply()]
    with LoopbackServer(script) as srv:
        store = Store(tmp_path / "r.db")
        r = run_attempt(axpy, "pytorch", _model(srv), _setup(budget=Budget(attempts=6, submissions=4)), store)
        bodies = srv.bodies()
    assert [g.verdict for g in r.graded] == ["incorrect_numerical", "passed"]
    assert r.best is r.graded[1] or r.best.submission == 2
    assert r.best.passed and r.best.score_sol is None  # no baselines, no SOL on the CPU: passed, unscored
    assert r.turns == 3 and r.submissions == 2 and r.stopped == "done"
    # the second prompt carries the first submission's failure: its workload and worst element
    second = bodies[1]["messages"][-1]["content"]
    assert "incorrect" in second and "axpy-small" in second and "heldout" not in second
    # tokens and money from the endpoint's usage: 3 replies of 10 in / 5 out at $1 / $2 per million
    assert r.usage.input == 30 and r.usage.output == 15 and abs(r.usd - (30 * 1 + 15 * 2) / 1e6) < 1e-12
    [t] = trajectories(store.conn)
    kinds = [e["kind"] for e in t["events"]]
    assert t["status"] == "finished" and kinds.count("reply") == 3 and kinds.count("submission") == 2


def test_compile_errors_reach_the_model(axpy):
    with LoopbackServer([code_reply(BROKEN), no_code_reply()]) as srv:
        r = run_attempt(axpy, "pytorch", _model(srv), _setup(budget=Budget(attempts=2)))
        fed = srv.bodies()[1]["messages"][-1]["content"]
    assert r.graded[0].verdict == "runtime_error" and "bad grid" in fed


def test_budget_on_submissions_stops_the_attempt(axpy):
    with LoopbackServer([code_reply(WRONG)] * 3) as srv:
        r = run_attempt(axpy, "pytorch", _model(srv), _setup(budget=Budget(attempts=10, submissions=1)))
        assert srv.calls == 1  # no model call once no submission is left to grade its code
    assert r.submissions == 1 and r.stopped == "budget:submissions"


def test_tool_calling_mode(axpy):
    script = [reply(tool_calls=[tool_call("show_problem", {})]),
              reply(tool_calls=[tool_call("evaluate", {"code": GOOD})]),
              reply(tool_calls=[tool_call("read_feedback", {})]), reply("done")]
    with LoopbackServer(script) as srv:
        r = run_attempt(axpy, "pytorch", _model(srv), _setup(mode="tools", budget=Budget(attempts=8)))
        bodies = srv.bodies()
    assert r.best is not None and r.best.passed and r.turns == 4
    assert {t["function"]["name"] for t in bodies[0]["tools"]} == {"evaluate", "show_problem", "read_feedback"}
    tool_msgs = [m for m in bodies[2]["messages"] if m["role"] == "tool"]
    assert any("passed" in m["content"] for m in tool_msgs)


def test_an_interrupted_attempt_resumes_without_repeating_a_paid_call(axpy, tmp_path):
    db = tmp_path / "r.db"
    # the endpoint goes away after two replies: the attempt stops with an error, two replies recorded
    with LoopbackServer([code_reply(WRONG), code_reply(WRONG)]) as srv:
        with pytest.raises(Exception):
            run_attempt(axpy, "pytorch", _model(srv), _setup(budget=Budget(attempts=5)), Store(db))
        assert srv.calls == 3
    with LoopbackServer([code_reply(GOOD), no_code_reply()]) as srv2:
        r = run_attempt(axpy, "pytorch", _model(srv2), _setup(budget=Budget(attempts=5)), Store(db))
        assert srv2.calls == 2  # only the calls never answered before
    assert [g.verdict for g in r.graded] == ["incorrect_numerical", "incorrect_numerical", "passed"]
    assert r.turns == 4
    # a finished attempt is read back, not run again
    with LoopbackServer([]) as srv3:
        again = run_attempt(axpy, "pytorch", _model(srv3), _setup(budget=Budget(attempts=5)), Store(db))
        assert srv3.calls == 0 and again.best.passed


def test_anthropic_endpoint_and_a_truncated_reply(axpy):
    """The same loop over Anthropic's messages protocol; a reply cut off mid-code is fed back, not graded."""
    from tests.agents.agents_loopback import truncated_reply

    script = [truncated_reply(GOOD + "\n# " + "x" * 400, keep=0.3), code_reply(GOOD), no_code_reply()]
    with LoopbackServer(script) as srv:
        cfg = ModelConfig(name="claude-loop", provider="anthropic", model="m", base_url=srv.anthropic_base_url,
                          api_key_env="LOOP_KEY", max_retries=0)
        import os

        os.environ["LOOP_KEY"] = "k"
        r = run_attempt(axpy, "pytorch", cfg, _setup(budget=Budget(attempts=4)))
        second = srv.bodies()[1]["messages"][-1]["content"]
    assert r.submissions == 1 and r.best.passed and r.turns == 3
    text = second if isinstance(second, str) else " ".join(b.get("text", "") for b in second)
    assert "cut off" in text and "nothing was graded" in text


@pytest.mark.parametrize("mode", ["chat", "tools"])
def test_one_turn_grades_its_one_reply(axpy, mode):
    """``--turns 1``: the limit stops the next call, not the one in progress, so its reply is graded."""
    step = code_reply(GOOD) if mode == "chat" else reply(tool_calls=[tool_call("evaluate", {"code": GOOD})])
    with LoopbackServer([step]) as srv:
        r = run_attempt(axpy, "pytorch", _model(srv), _setup(mode=mode, budget=Budget(attempts=1)))
        assert srv.calls == 1
    assert r.turns == 1 and r.submissions == 1 and r.best.passed and r.stopped == "budget:attempts"
