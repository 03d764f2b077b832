"""OpenAI's chat-completions API, through the official ``openai`` client: OpenAI itself and every server that
speaks the protocol (vLLM, SGLang, Ollama, llama.cpp, OpenRouter ...). Non-streaming; tool calls included."""
from __future__ import annotations

import json
from typing import Any

from solbench.agents.providers.sdk import SDKProvider, field
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



def usage_from_openai(u: Any) -> Usage:
    if u is None:
        return Usage()
    details = field(u, "prompt_tokens_details")
    cached = field(details, "cached_tokens") if details is not None else None
    return Usage(input=field(u, "prompt_tokens") or 0, cached=cached or 0, output=field(u, "completion_tokens") or 0)


class OpenAIChatProvider(SDKProvider):
    """A chat-completions endpoint. ``calls`` counts the HTTP requests made, retries included."""

    sdk_module = "openai"
    client_class = "OpenAI"
    default_where = "the OpenAI API"
    not_json_hint = "check that base_url is a chat-completions endpoint (usually ending in /v1)"

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

    def create(self, kw: dict[str, Any]) -> Any:
        return self.client.chat.completions.create(**kw)

    def reply_from(self, resp: Any, latency: float = 0.0) -> Reply:
        raw = self.raw_of(resp)
        choices = field(resp, "choices") or []
        text, calls, finish = "", [], None
        if choices:
            choice = choices[0]
            msg = field(choice, "message")
            finish = field(choice, "finish_reason")
            text = (field(msg, "content") or "") if msg is not None else ""
            for i, tc in enumerate((field(msg, "tool_calls") or []) if msg is not None else []):
                fn = field(tc, "function")
                calls.append(ToolCall(id=field(tc, "id") or f"call_{i}", name=field(fn, "name") or "",
                                      arguments=parse_arguments(field(fn, "arguments"))))
        usage = usage_from_openai(field(resp, "usage"))
        return Reply(text=text, tool_calls=calls, finish_reason=finish, usage=usage,
                     cost_usd=self.cfg.price.cost(usage), model=field(resp, "model") or self.cfg.model,
                     latency_s=latency, raw=raw)
