"""OpenAI's chat-completions API, through the official ``openai`` client: OpenAI itself and every server that
speaks the protocol (vLLM, SGLang, Ollama, llama.cpp, OpenRouter ...). Non-streaming; tool calls included."""
from __future__ import annotations

import json
import time
from typing import Any

from solbench.agents.models import ModelConfig
from solbench.agents.providers import api_key, import_sdk
from solbench.agents.providers.retry import (ProviderError, RetryPolicy, call_with_retries, failure_from_sdk,
                                             one_line)
from solbench.agents.types import Message, Reply, Tool, ToolCall, Usage


def tool_to_openai(t: Tool) -> dict[str, Any]:
    return {"type": "function", "function": {"name": t.name, "description": t.description,
                                             "parameters": t.parameters}}


def message_to_openai(m: Message) -> dict[str, Any]:
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content}
    if m.role == "assistant" and m.tool_calls:
        return {"role": "assistant", "content": m.content or None,
                "tool_calls": [{"id": c.id, "type": "function",
                                "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                               for c in m.tool_calls]}
    return {"role": m.role, "content": m.content}


def parse_arguments(raw: Any) -> dict[str, Any]:
    """A tool call's arguments; text that is not a JSON object is kept under ``_invalid_json`` for the loop to
    report back to the model rather than crash on."""
    if isinstance(raw, dict):
        return raw
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return {"_invalid_json": str(raw)}
    return value if isinstance(value, dict) else {"_invalid_json": str(raw)}


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def usage_from_openai(u: Any) -> Usage:
    if u is None:
        return Usage()
    details = _get(u, "prompt_tokens_details")
    cached = _get(details, "cached_tokens") if details is not None else None
    return Usage(input=_get(u, "prompt_tokens") or 0, cached=cached or 0, output=_get(u, "completion_tokens") or 0)


class OpenAIChatProvider:
    """A chat-completions endpoint. ``calls`` counts the HTTP requests made, retries included."""

    def __init__(self, cfg: ModelConfig, policy: RetryPolicy | None = None):
        self.cfg = cfg
        self.name = cfg.name
        self.policy = policy or RetryPolicy(max_retries=cfg.max_retries)
        self.calls = 0
        self.on_retry = None  # optional fn(CallFailure, wait_s), called before each back-off (for logging)
        self._sdk = import_sdk("openai", cfg.name)
        key, self.key_env = api_key(cfg)
        self.where = cfg.base_url or "the OpenAI API"
        kw: dict[str, Any] = {"api_key": key, "timeout": cfg.timeout_s, "max_retries": 0}
        if cfg.base_url:
            kw["base_url"] = cfg.base_url
        self.client = self._sdk.OpenAI(**kw)

    def request(self, messages: list[Message], tools: list[Tool] | None = None) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create``, ``extra`` merged into the body."""
        kw: dict[str, Any] = {"model": self.cfg.model, "messages": [message_to_openai(m) for m in messages]}
        for k in ("temperature", "top_p", "max_tokens"):
            v = getattr(self.cfg, k)
            if v is not None:
                kw[k] = v
        if tools:
            kw["tools"] = [tool_to_openai(t) for t in tools]
        if self.cfg.extra:
            kw["extra_body"] = dict(self.cfg.extra)
        return kw

    def _once(self, kw: dict[str, Any]) -> Any:
        self.calls += 1
        try:
            resp = self.client.chat.completions.create(**kw)
        except self._sdk.APIError as e:
            failure = failure_from_sdk(e, self._sdk)
            if failure is None:  # a response the SDK could not read
                raise ProviderError(one_line(f"model {self.name!r}: unreadable response from {self.where}: {e}; "
                                             f"check that base_url speaks this protocol")) from None
            raise failure from None
        if not hasattr(resp, "model_dump"):  # a 200 that is not JSON: some other server at that address
            raise ProviderError(one_line(f"model {self.name!r}: {self.where} did not answer JSON "
                                         f"({str(resp)[:60]!r}); check that base_url is a chat-completions "
                                         f"endpoint (usually ending in /v1)"))
        return resp

    def complete(self, messages: list[Message], tools: list[Tool] | None = None) -> Reply:
        kw = self.request(messages, tools)
        t0 = time.monotonic()
        resp = call_with_retries(lambda: self._once(kw), self.policy, model=self.name, where=self.where,
                                 key_env=self.key_env, on_retry=self.on_retry)
        latency = time.monotonic() - t0
        return self.reply_from(resp, latency)

    def reply_from(self, resp: Any, latency: float = 0.0) -> Reply:
        raw = resp.model_dump(mode="json", exclude_none=True) if hasattr(resp, "model_dump") else dict(resp)
        choices = _get(resp, "choices") or []
        text, calls, finish = "", [], None
        if choices:
            choice = choices[0]
            msg = _get(choice, "message")
            finish = _get(choice, "finish_reason")
            text = (_get(msg, "content") or "") if msg is not None else ""
            for i, tc in enumerate((_get(msg, "tool_calls") or []) if msg is not None else []):
                fn = _get(tc, "function")
                calls.append(ToolCall(id=_get(tc, "id") or f"call_{i}", name=_get(fn, "name") or "",
                                      arguments=parse_arguments(_get(fn, "arguments"))))
        usage = usage_from_openai(_get(resp, "usage"))
        return Reply(text=text, tool_calls=calls, finish_reason=finish, usage=usage,
                     cost_usd=self.cfg.price.cost(usage), model=_get(resp, "model") or self.cfg.model,
                     latency_s=latency, raw=raw)
