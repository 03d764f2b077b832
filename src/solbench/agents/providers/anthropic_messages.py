"""Anthropic's messages API, through the official ``anthropic`` client. Non-streaming; tool calls included.

The system prompt goes apart from the turns; tool calls are ``tool_use`` blocks on assistant turns and their
answers ``tool_result`` blocks on the next user turn, consecutive turns of one role merged into one.
"""
from __future__ import annotations

import time
from typing import Any

from solbench.agents.models import ModelConfig
from solbench.agents.providers import api_key, import_sdk
from solbench.agents.providers.retry import (ProviderError, RetryPolicy, call_with_retries, failure_from_sdk,
                                             one_line)
from solbench.agents.types import Message, Reply, Tool, ToolCall, Usage

#: ``max_tokens`` is required by the messages API; this is sent when the registry sets none
DEFAULT_MAX_TOKENS = 8192

STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
                "model_context_window_exceeded": "length"}


def tool_to_anthropic(t: Tool) -> dict[str, Any]:
    return {"name": t.name, "description": t.description, "input_schema": t.parameters}


def _blocks(m: Message) -> list[dict[str, Any]]:
    if m.role == "tool":
        return [{"type": "tool_result", "tool_use_id": m.tool_call_id or "", "content": m.content}]
    out: list[dict[str, Any]] = []
    if m.content:
        out.append({"type": "text", "text": m.content})
    if m.role == "assistant":
        out += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in m.tool_calls]
    return out


def messages_to_anthropic(messages: list[Message]) -> tuple[str, list[dict[str, Any]]]:
    """(system prompt, turns). Tool results become user turns; consecutive turns of one role are merged, with
    tool results first in a user turn, as the API asks."""
    system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
    turns: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue
        role = "assistant" if m.role == "assistant" else "user"
        blocks = _blocks(m)
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"] += blocks
        else:
            turns.append({"role": role, "content": blocks})
    for t in turns:
        # the API rejects empty turns; tool_result blocks must open a user turn
        t["content"].sort(key=lambda b: b["type"] != "tool_result")
        if not t["content"]:
            t["content"] = [{"type": "text", "text": "(empty)"}]
    return system, turns


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def usage_from_anthropic(u: Any) -> Usage:
    """``input_tokens`` excludes cache reads and writes; our ``input`` counts every prompt token, cache writes
    billed at the input rate."""
    if u is None:
        return Usage()
    read = _get(u, "cache_read_input_tokens") or 0
    written = _get(u, "cache_creation_input_tokens") or 0
    return Usage(input=(_get(u, "input_tokens") or 0) + read + written, cached=read,
                 output=_get(u, "output_tokens") or 0)


class AnthropicMessagesProvider:
    """Anthropic's messages endpoint. ``calls`` counts the HTTP requests made, retries included."""

    def __init__(self, cfg: ModelConfig, policy: RetryPolicy | None = None):
        self.cfg = cfg
        self.name = cfg.name
        self.policy = policy or RetryPolicy(max_retries=cfg.max_retries)
        self.calls = 0
        self.on_retry = None  # optional fn(CallFailure, wait_s), called before each back-off (for logging)
        self._sdk = import_sdk("anthropic", cfg.name)
        key, self.key_env = api_key(cfg)
        self.where = cfg.base_url or "the Anthropic API"
        kw: dict[str, Any] = {"api_key": key, "timeout": cfg.timeout_s, "max_retries": 0}
        if cfg.base_url:
            kw["base_url"] = cfg.base_url
        self.client = self._sdk.Anthropic(**kw)

    def request(self, messages: list[Message], tools: list[Tool] | None = None) -> dict[str, Any]:
        """The keyword arguments of ``messages.create``, ``extra`` merged into the body."""
        system, turns = messages_to_anthropic(messages)
        kw: dict[str, Any] = {"model": self.cfg.model, "messages": turns,
                              "max_tokens": self.cfg.max_tokens or DEFAULT_MAX_TOKENS,
                              "timeout": self.cfg.timeout_s}
        if system:
            kw["system"] = system
        if tools:
            kw["tools"] = [tool_to_anthropic(t) for t in tools]
        # sampling settings travel in the body: recent SDKs dropped them from create()'s signature
        body = {k: getattr(self.cfg, k) for k in ("temperature", "top_p") if getattr(self.cfg, k) is not None}
        body.update(self.cfg.extra)
        if body:
            kw["extra_body"] = body
        return kw

    def _once(self, kw: dict[str, Any]) -> Any:
        self.calls += 1
        try:
            resp = self.client.messages.create(**kw)
        except self._sdk.APIError as e:
            failure = failure_from_sdk(e, self._sdk)
            if failure is None:  # a response the SDK could not read
                raise ProviderError(one_line(f"model {self.name!r}: unreadable response from {self.where}: {e}; "
                                             f"check that base_url speaks this protocol")) from None
            raise failure from None
        if not hasattr(resp, "model_dump"):  # a 200 that is not JSON: some other server at that address
            raise ProviderError(one_line(f"model {self.name!r}: {self.where} did not answer JSON "
                                         f"({str(resp)[:60]!r}); check that base_url is Anthropic's messages API "
                                         f"(no /v1: the client adds it)"))
        return resp

    def complete(self, messages: list[Message], tools: list[Tool] | None = None) -> Reply:
        kw = self.request(messages, tools)
        t0 = time.monotonic()
        resp = call_with_retries(lambda: self._once(kw), self.policy, model=self.name, where=self.where,
                                 key_env=self.key_env, on_retry=self.on_retry)
        return self.reply_from(resp, time.monotonic() - t0)

    def reply_from(self, resp: Any, latency: float = 0.0) -> Reply:
        raw = resp.model_dump(mode="json", exclude_none=True) if hasattr(resp, "model_dump") else dict(resp)
        texts, calls = [], []
        for b in _get(resp, "content") or []:
            kind = _get(b, "type")
            if kind == "text":
                texts.append(_get(b, "text") or "")
            elif kind == "tool_use":
                args = _get(b, "input")
                calls.append(ToolCall(id=_get(b, "id") or f"toolu_{len(calls)}", name=_get(b, "name") or "",
                                      arguments=args if isinstance(args, dict) else {"_invalid_json": str(args)}))
        stop = _get(resp, "stop_reason")
        usage = usage_from_anthropic(_get(resp, "usage"))
        return Reply(text="\n".join(texts), tool_calls=calls, finish_reason=STOP_REASONS.get(stop, stop),
                     usage=usage, cost_usd=self.cfg.price.cost(usage), model=_get(resp, "model") or self.cfg.model,
                     latency_s=latency, raw=raw)
