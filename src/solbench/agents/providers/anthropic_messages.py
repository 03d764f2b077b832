"""Anthropic's messages API, through the official ``anthropic`` client. Non-streaming; tool calls included.

The system prompt goes apart from the turns; tool calls are ``tool_use`` blocks on assistant turns and their
answers ``tool_result`` blocks on the next user turn, consecutive turns of one role merged into one.
"""
from __future__ import annotations

from typing import Any

from solbench.agents.providers.sdk import SDKProvider, field
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



def usage_from_anthropic(u: Any) -> Usage:
    """``input_tokens`` excludes cache reads and writes; our ``input`` counts every prompt token, cache writes
    billed at the input rate."""
    if u is None:
        return Usage()
    read = field(u, "cache_read_input_tokens") or 0
    written = field(u, "cache_creation_input_tokens") or 0
    return Usage(input=(field(u, "input_tokens") or 0) + read + written, cached=read,
                 output=field(u, "output_tokens") or 0)


class AnthropicMessagesProvider(SDKProvider):
    """Anthropic's messages endpoint. ``calls`` counts the HTTP requests made, retries included."""

    sdk_module = "anthropic"
    client_class = "Anthropic"
    default_where = "the Anthropic API"
    not_json_hint = "check that base_url is Anthropic's messages API (no /v1: the client adds it)"

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

    def create(self, kw: dict[str, Any]) -> Any:
        return self.client.messages.create(**kw)

    def reply_from(self, resp: Any, latency: float = 0.0) -> Reply:
        raw = self.raw_of(resp)
        texts, calls = [], []
        for b in field(resp, "content") or []:
            kind = field(b, "type")
            if kind == "text":
                texts.append(field(b, "text") or "")
            elif kind == "tool_use":
                args = field(b, "input")
                calls.append(ToolCall(id=field(b, "id") or f"toolu_{len(calls)}", name=field(b, "name") or "",
                                      arguments=args if isinstance(args, dict) else {"_invalid_json": str(args)}))
        stop = field(resp, "stop_reason")
        usage = usage_from_anthropic(field(resp, "usage"))
        return Reply(text="\n".join(texts), tool_calls=calls, finish_reason=STOP_REASONS.get(stop, stop),
                     usage=usage, cost_usd=self.cfg.price.cost(usage), model=field(resp, "model") or self.cfg.model,
                     latency_s=latency, raw=raw)
