"""Model providers against a real loopback HTTP server (tests/agents/agents_loopback.py), the replay provider, the
retry policy and the model registry."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from email.utils import formatdate

import pytest

from solbench.agents.models import ModelConfig, get_model, load_model, load_models
from solbench.agents.providers import ProviderError, RetryPolicy, make_provider
from solbench.agents.providers.keys import DUMMY_KEY
from solbench.agents.providers.retry import parse_retry_after
from solbench.agents.types import Message, Price, Reply, Tool, ToolCall, Usage
from solbench.errors import UserError
from tests.agents.agents_loopback import (LoopbackServer, closed_port, code_reply, delay, http_error, no_code_reply,
                                          raw_answer, reply, tool_call, truncated_reply)

PRICE = Price(input=3.0, cached=0.3, output=15.0)
FAST = dict(base_s=0.001, cap_s=0.01)
SEARCH = Tool(name="search", description="Search the docs.",
              parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]})


def provider(srv: LoopbackServer, protocol: str, **cfg):
    policy = RetryPolicy(max_retries=cfg.pop("max_retries", 3), **FAST)
    c = ModelConfig(name=f"{protocol}-test", provider=protocol, model="test-model",
                    base_url=cfg.pop("base_url", None) or srv.base_url(protocol), price=PRICE, **cfg)
    return make_provider(c, policy=policy)


def user(text: str) -> list[Message]:
    return [Message(role="system", content="You write GPU kernels."), Message(role="user", content=text)]


# -- text replies, usage, cost ---------------------------------------------------------------------------------


def test_openai_text_reply_usage_and_cost():
    with LoopbackServer([code_reply("def run(x):\n    return x", input=1200, cached=200, output=300)]) as srv:
        p = provider(srv, "openai", temperature=0.7, max_tokens=512, extra={"top_k": 20})
        r = p.complete(user("write axpy"))
    assert "```python\ndef run(x):\n    return x\n```" in r.text
    assert r.finish_reason == "stop" and r.tool_calls == []
    assert r.usage == Usage(input=1200, cached=200, output=300)
    assert r.cost_usd == pytest.approx((1000 * 3.0 + 200 * 0.3 + 300 * 15.0) / 1e6)
    assert r.model == "test-model" and r.raw["id"].startswith("chatcmpl-loopback") and r.latency_s > 0
    body = srv.bodies()[0]
    assert body["model"] == "test-model" and body["temperature"] == 0.7 and body["max_tokens"] == 512
    assert body["top_k"] == 20 and "top_p" not in body and "tools" not in body
    assert body["messages"] == [{"role": "system", "content": "You write GPU kernels."},
                                {"role": "user", "content": "write axpy"}]
    assert srv.requests[0].headers["authorization"] == f"Bearer {DUMMY_KEY}"  # local endpoint: dummy key


def test_anthropic_text_reply_usage_and_cost(monkeypatch):
    monkeypatch.setenv("SOLBENCH_TEST_ANTHROPIC_KEY", "sk-test-123")
    with LoopbackServer([reply("Hello.", input=1200, cached=200, output=300)]) as srv:
        p = provider(srv, "anthropic", api_key_env="SOLBENCH_TEST_ANTHROPIC_KEY", top_p=0.9)
        r = p.complete(user("hi"))
    assert r.text == "Hello." and r.finish_reason == "stop"
    assert r.usage == Usage(input=1200, cached=200, output=300)  # input_tokens 1000 + cache_read 200
    assert r.cost_usd == pytest.approx((1000 * 3.0 + 200 * 0.3 + 300 * 15.0) / 1e6)
    body = srv.bodies()[0]
    assert body["system"] == "You write GPU kernels."
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert body["max_tokens"] == 8192 and body["top_p"] == 0.9 and "temperature" not in body
    h = srv.requests[0].headers  # older SDKs send x-api-key, newer ones a bearer token
    assert h.get("x-api-key", h.get("authorization", "").removeprefix("Bearer ")) == "sk-test-123"


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_truncated_and_codeless_replies(protocol):
    with LoopbackServer([truncated_reply("def run(x):\n    return x * 2\n"), no_code_reply()]) as srv:
        p = provider(srv, protocol)
        cut = p.complete(user("go"))
        prose = p.complete(user("go"))
    assert cut.finish_reason == "length" and cut.text.count("```") == 1 and cut.usage.output == 4096
    assert prose.finish_reason == "stop" and "```" not in prose.text


# -- tool calls, both ways ----------------------------------------------------------------------------------------


def test_openai_tool_call_round_trip():
    script = [reply("Let me look.", tool_calls=[tool_call("search", {"q": "tl.dot"}, id="call_7")]),
              lambda body: reply("found: " + body["messages"][-1]["content"])]
    with LoopbackServer(script) as srv:
        p = provider(srv, "openai")
        msgs = user("how do I multiply?")
        first = p.complete(msgs, tools=[SEARCH])
        assert first.finish_reason == "tool_calls" and first.text == "Let me look."
        assert first.tool_calls == [ToolCall(id="call_7", name="search", arguments={"q": "tl.dot"})]
        msgs += [Message(role="assistant", content=first.text, tool_calls=first.tool_calls),
                 Message(role="tool", tool_call_id="call_7", name="search", content="tl.dot(a, b)")]
        second = p.complete(msgs, tools=[SEARCH])
    assert second.text == "found: tl.dot(a, b)"
    b1, b2 = srv.bodies()
    assert b1["tools"] == [{"type": "function", "function": {"name": "search", "description": "Search the docs.",
                                                             "parameters": SEARCH.parameters}}]
    assert b2["messages"][2:] == [
        {"role": "assistant", "content": "Let me look.",
         "tool_calls": [{"id": "call_7", "type": "function",
                         "function": {"name": "search", "arguments": json.dumps({"q": "tl.dot"})}}]},
        {"role": "tool", "tool_call_id": "call_7", "content": "tl.dot(a, b)"}]


def test_openai_malformed_tool_arguments_are_kept():
    with LoopbackServer([reply(tool_calls=[tool_call("search", '{"q": unquoted')])]) as srv:
        r = provider(srv, "openai").complete(user("x"), tools=[SEARCH])
    assert r.tool_calls[0].arguments == {"_invalid_json": '{"q": unquoted'}


def test_anthropic_tool_call_round_trip(monkeypatch):
    script = [reply("Checking.", tool_calls=[tool_call("search", {"q": "smem"}, id="toolu_1"),
                                             tool_call("search", {"q": "l2"}, id="toolu_2")]),
              reply("done")]
    with LoopbackServer(script) as srv:
        p = provider(srv, "anthropic")
        msgs = user("tune it")
        first = p.complete(msgs, tools=[SEARCH])
        assert first.finish_reason == "tool_calls" and first.text == "Checking."
        assert [(c.id, c.arguments) for c in first.tool_calls] == [("toolu_1", {"q": "smem"}),
                                                                    ("toolu_2", {"q": "l2"})]
        msgs += [Message(role="assistant", content=first.text, tool_calls=first.tool_calls),
                 Message(role="tool", tool_call_id="toolu_1", name="search", content="228 KiB"),
                 Message(role="tool", tool_call_id="toolu_2", name="search", content="60 MiB"),
                 Message(role="user", content="continue")]
        assert p.complete(msgs, tools=[SEARCH]).text == "done"
    b1, b2 = srv.bodies()
    assert b1["tools"] == [{"name": "search", "description": "Search the docs.", "input_schema": SEARCH.parameters}]
    assert b2["messages"][1:] == [
        {"role": "assistant", "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "smem"}},
            {"type": "tool_use", "id": "toolu_2", "name": "search", "input": {"q": "l2"}}]},
        {"role": "user", "content": [  # both results and the follow-up in ONE user turn, results first
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "228 KiB"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "60 MiB"},
            {"type": "text", "text": "continue"}]}]


# -- retries ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_429_retried_honouring_retry_after(protocol):
    with LoopbackServer([http_error(429, "slow down", retry_after=0.25), reply("ok")]) as srv:
        p = provider(srv, protocol)
        t0 = time.monotonic()
        r = p.complete(user("x"))
        waited = time.monotonic() - t0
    assert r.text == "ok" and srv.calls == 2 and p.calls == 2
    assert waited >= 0.25  # back-off alone is ~1 ms here: the header set the wait
    assert srv.bodies()[0] == srv.bodies()[1]  # the same request, re-sent


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_500_twice_then_success(protocol):
    with LoopbackServer([http_error(500), http_error(503), reply("third time")]) as srv:
        p = provider(srv, protocol)
        seen = []
        p.on_retry = lambda failure, wait: seen.append((failure.status, wait))
        r = p.complete(user("x"))
    assert r.text == "third time" and srv.calls == 3
    assert [s for s, _ in seen] == [500, 503] and all(0 < w <= 0.015 for _, w in seen)


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_400_is_one_line_provider_error_without_retry(protocol):
    with LoopbackServer([http_error(400, "max_tokens: too large\nfor this model"), reply("never")]) as srv:
        with pytest.raises(ProviderError) as e:
            provider(srv, protocol).complete(user("x"))
        assert srv.calls == 1 and srv.remaining == 1
    msg = str(e.value)
    assert "\n" not in msg and f"'{protocol}-test'" in msg and "HTTP 400" in msg
    assert "max_tokens: too large for this model" in msg and isinstance(e.value, UserError)


def test_retries_are_bounded_by_max_retries():
    with LoopbackServer([http_error(429)] * 5) as srv:
        with pytest.raises(ProviderError, match=r"after 3 tries.*HTTP 429.*raise max_retries"):
            provider(srv, "openai", max_retries=2).complete(user("x"))
        assert srv.calls == 3


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_slow_reply_beyond_timeout_is_retried_then_fails(protocol):
    with LoopbackServer([delay(3), delay(3), reply("late")]) as srv:
        p = provider(srv, protocol, timeout_s=0.3, max_retries=1)
        t0 = time.monotonic()
        with pytest.raises(ProviderError, match=r"after 2 tries.*within the timeout.*timeout_s") as e:
            p.complete(user("x"))
        assert time.monotonic() - t0 < 5.0  # two tries that waited for their replies would take 6 s
        assert srv.calls == 2 and srv.remaining == 1
    assert "\n" not in str(e.value)


def test_slow_reply_then_success():
    with LoopbackServer([delay(3), reply("in time")]) as srv:
        r = provider(srv, "openai", timeout_s=0.3).complete(user("x"))
    assert r.text == "in time" and srv.calls == 2


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_unreachable_endpoint(protocol):
    url = f"http://127.0.0.1:{closed_port()}" + ("/v1" if protocol == "openai" else "")
    p = provider(None, protocol, base_url=url, max_retries=2)
    with pytest.raises(ProviderError, match=r"after 3 tries, cannot reach .*check base_url") as e:
        p.complete(user("x"))
    assert p.calls == 3 and url in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_missing_api_key_names_the_variable(protocol, monkeypatch):
    monkeypatch.delenv("SOLBENCH_TEST_NO_SUCH_KEY", raising=False)
    cfg = ModelConfig(name="paid", provider=protocol, model="m", api_key_env="SOLBENCH_TEST_NO_SUCH_KEY")
    with pytest.raises(ProviderError, match=r"'paid' needs an API key in \$SOLBENCH_TEST_NO_SUCH_KEY"):
        make_provider(cfg)


def test_official_endpoint_defaults_to_the_usual_key_variable(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ProviderError, match=r"\$OPENAI_API_KEY"):
        make_provider(ModelConfig(name="gpt", provider="openai", model="gpt-5"))


def test_missing_sdk_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "openai", None)  # makes `import openai` fail
    cfg = ModelConfig(name="local", provider="openai", model="m", base_url="http://127.0.0.1:1/v1")
    with pytest.raises(ProviderError, match=r"pip install 'solbench\[agents\]'"):
        make_provider(cfg)


def test_solbench_imports_without_the_sdks():
    code = ("import sys; sys.modules['openai'] = sys.modules['anthropic'] = None\n"
            "import solbench.agents.models, solbench.agents.providers, solbench.agents.providers.replay\n"
            "import solbench.agents.providers.openai_chat, solbench.agents.providers.anthropic_messages\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_retry_policy_and_retry_after_parsing():
    p = RetryPolicy(base_s=1.0, cap_s=8.0, rng=lambda: 0.5)  # jitter factor exactly 1
    assert [p.delay(i) for i in range(5)] == [1.0, 2.0, 4.0, 8.0, 8.0]
    assert RetryPolicy(base_s=1.0, rng=lambda: 0.0).delay(0) == 0.5
    assert RetryPolicy(base_s=1.0, rng=lambda: 0.0).delay(0, retry_after=7) == 7.0
    assert RetryPolicy(max_retry_after_s=30, rng=lambda: 0.0).delay(0, retry_after=3600) == 30.0
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert 25 <= parse_retry_after({"retry-after": formatdate(time.time() + 30, usegmt=True)}) <= 31
    assert parse_retry_after({"retry-after": "soon"}) is None and parse_retry_after({}) is None


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_endpoint_that_is_not_a_model_server(protocol):
    with LoopbackServer([raw_answer("<html>It works!</html>")]) as srv:
        with pytest.raises(ProviderError, match=r"did not answer JSON .*It works.*check that base_url") as e:
            provider(srv, protocol).complete(user("x"))
        assert srv.calls == 1
    assert "\n" not in str(e.value)


def test_loopback_script_exhausted_is_not_retried():
    with LoopbackServer([]) as srv:
        with pytest.raises(ProviderError, match="loopback script exhausted"):
            provider(srv, "openai").complete(user("x"))
        assert srv.calls == 1


# -- replay -------------------------------------------------------------------------------------------------------


def _write_trajectory(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_replay_returns_recorded_replies_in_order(tmp_path):
    recorded = [Reply(text=f"reply {i}", usage=Usage(input=10 * i, output=i), cost_usd=0.01 * i,
                      finish_reason="stop") for i in range(3)]
    f = _write_trajectory(tmp_path / "run.jsonl", [
        {"problem": "axpy", "attempt": 0, "turn": 0, "reply": recorded[0].model_dump()},
        {"event": "graded", "verdict": "PASSED"},  # not a reply: skipped
        {"problem": "softmax", "attempt": 0, "turn": 0, "reply": recorded[1].model_dump()},
        {"problem": "axpy", "attempt": 0, "turn": 1, "reply": recorded[2].model_dump()}])
    p = make_provider(ModelConfig(name="rp", provider="replay", replay_file=str(f)))
    assert [p.complete(user("anything")) for _ in range(3)] == recorded
    with pytest.raises(ProviderError, match=r"replay file exhausted: .*3 replies.*'rp'"):
        p.complete(user("more"))
    only = make_provider(ModelConfig(name="rp", provider="replay", replay_file=str(f)), problem="axpy")
    assert [only.complete([]).text for _ in range(2)] == ["reply 0", "reply 2"]
    assert only.last_record["turn"] == 1
    with pytest.raises(ProviderError, match=r"exhausted.*for problem 'axpy'"):
        only.complete([])


def test_replay_file_errors(tmp_path):
    with pytest.raises(ProviderError, match="not found"):
        make_provider(ModelConfig(name="rp", provider="replay", replay_file=str(tmp_path / "none.jsonl")))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"reply": {"text": "a"}}\n{oops\n')
    with pytest.raises(ProviderError, match="line 2 is not JSON"):
        make_provider(ModelConfig(name="rp", provider="replay", replay_file=str(bad)))


# -- the registry -------------------------------------------------------------------------------------------------

REGISTRY = """
[models.qwen-local]
provider = "openai"
base_url = "http://localhost:8000/v1"
model = "Qwen/Qwen3-Coder"
temperature = 0.8
price = { input = 0.0, cached = 0.0, output = 0.0 }
extra = { top_k = 20, chat_template_kwargs = { enable_thinking = false } }

[models.claude]
provider = "anthropic"
model = "claude-sonnet-4-5"
api_key_env = "ANTHROPIC_API_KEY"
price = { input = 3.0, cached = 0.3, output = 15.0 }

[models.again]
provider = "replay"
replay_file = "runs/claude.jsonl"
"""


def test_load_models(tmp_path):
    f = tmp_path / "models.toml"
    f.write_text(REGISTRY)
    models = load_models(f)
    assert list(models) == ["qwen-local", "claude", "again"]
    q, c = models["qwen-local"], models["claude"]
    assert (q.name, q.provider, q.model, q.base_url, q.temperature) == (
        "qwen-local", "openai", "Qwen/Qwen3-Coder", "http://localhost:8000/v1", 0.8)
    assert q.api_key_env is None and q.timeout_s == 600 and q.max_retries == 6 and q.max_tokens is None
    assert q.extra == {"top_k": 20, "chat_template_kwargs": {"enable_thinking": False}}
    assert c.price == Price(input=3.0, cached=0.3, output=15.0) and c.api_key_env == "ANTHROPIC_API_KEY"
    assert models["again"].replay_file == str(tmp_path / "runs" / "claude.jsonl")
    assert load_model(f, "claude") == c


@pytest.mark.parametrize("text, match", [
    ("[models.x\nprovider = 1", r"not valid TOML"),
    ("[models.x]\nprovider = \"gemini\"\nmodel = \"g\"", r"\[models.x\] provider: 'gemini' is not one of openai"),
    ("[models.x]\nmodel = \"g\"", r"\[models.x\] needs provider"),
    ("[models.x]\nprovider = \"openai\"", r"\[models.x\] provider 'openai' needs model = "),
    ("[models.x]\nprovider = \"replay\"", r"needs replay_file"),
    ("[models.x]\nprovider = \"openai\"\nmodel = \"m\"\ntemprature = 0.5", r"temprature: unknown setting"),
    ("[models.x]\nprovider = \"openai\"\nmodel = \"m\"\ntimeout_s = -1", r"timeout_s: Input should be greater"),
    ("[other]\nx = 1", r"no \[models.<name>\] tables"),
])
def test_load_models_user_errors(tmp_path, text, match):
    f = tmp_path / "models.toml"
    f.write_text(text)
    with pytest.raises(UserError, match=match) as e:
        load_models(f)
    assert "\n" not in str(e.value) and str(f) in str(e.value)


def test_missing_registry_and_unknown_model(tmp_path):
    with pytest.raises(UserError, match=r"models.toml not found"):
        load_models(tmp_path / "models.toml")
    f = tmp_path / "models.toml"
    f.write_text(REGISTRY)
    with pytest.raises(UserError, match=r"unknown model 'gpt-9' in .*models.toml \(known: again, claude, qwen-local\)"):
        load_model(f, "gpt-9")
    with pytest.raises(UserError, match=r"unknown model 'gpt-9' \(known: none\)"):
        get_model({}, "gpt-9")
