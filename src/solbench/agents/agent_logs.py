"""Token usage and cost read from an external agent's OWN log, never from what the agent says about itself.

Formats (``fmt``):

* ``"claude"``: Claude Code ``--output-format stream-json`` (JSON lines). ``type: "assistant"`` events carry
  ``message.usage`` (``input_tokens``, ``cache_read_input_tokens``, ``cache_creation_input_tokens``,
  ``output_tokens``); Claude Code repeats one message (same ``message.id``) once per content block, so ids are
  counted once. The final ``type: "result"`` event carries the run's totals (``usage``, per-model
  ``modelUsage``) and ``total_cost_usd``; when present it wins over the assistant events.
* ``"opencode"``: ``opencode run --format json``: ``step_finish`` events whose ``part`` holds ``cost`` and
  ``tokens: {input, output, reasoning, cache: {read, write}}``; OpenCode's ``input`` excludes the cache, so the
  cache reads and writes are added back. Parts are counted once by ``part.id``.
* ``"codex"``: ``codex exec --json``: ``turn.completed`` events with ``usage: {input_tokens, cached_input_tokens,
  output_tokens}``, which are the thread's cumulative totals, so the last one of each thread counts. The
  rollout-file form (``payload``/``msg`` of type ``token_count`` with ``info.total_token_usage``) is read the
  same way. Codex reports no cost.
* ``"generic"``: lines holding ``SOLBENCH_USAGE {"input": .., "cached": .., "output": .., "usd": ..}`` (``usd``
  optional), summed.
* ``"auto"``: the first of claude, opencode, codex whose events count any tokens or cost, else the generic
  lines.

Our :class:`Usage` counts cached tokens inside ``input``. Lines that are not JSON, or not of the format, are
skipped; nothing here raises on a malformed log.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from solbench.agents.types import Usage

FORMATS = ("auto", "claude", "opencode", "codex", "generic")
_ALIASES = {"stream-json": "claude", "claude-code": "claude", "codex-cli": "codex", "solbench": "generic"}
GENERIC_TAG = "SOLBENCH_USAGE"


def _int(d: Any, key: str) -> int:
    v = d.get(key) if isinstance(d, dict) else None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return 0
    return max(0, int(v))


def _num(d: Any, key: str) -> float | None:
    v = d.get(key) if isinstance(d, dict) else None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def _events(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if isinstance(ev, dict):
            out.append(ev)
    return out


# --- Claude Code ------------------------------------------------------------------------------------------

def _claude_usage(u: Any) -> Usage:
    read, made = _int(u, "cache_read_input_tokens"), _int(u, "cache_creation_input_tokens")
    return Usage(input=_int(u, "input_tokens") + read + made, cached=read, output=_int(u, "output_tokens"))


def _claude_model_usage(mu: Any) -> Usage | None:
    if not isinstance(mu, dict) or not mu:
        return None
    total = Usage()
    for m in mu.values():
        read, made = _int(m, "cacheReadInputTokens"), _int(m, "cacheCreationInputTokens")
        total += Usage(input=_int(m, "inputTokens") + read + made, cached=read, output=_int(m, "outputTokens"))
    return total if total.total else None


def _is_claude(ev: dict) -> bool:
    return ev.get("type") in ("assistant", "result") and ("message" in ev or "session_id" in ev
                                                           or "total_cost_usd" in ev or "usage" in ev)


def parse_claude(events: Iterable[dict]) -> tuple[Usage, float | None, bool]:
    by_id: dict[str, Usage] = {}
    anon = Usage()
    results: dict[Any, dict] = {}  # the last result event of each session
    seen = False
    for ev in events:
        if not _is_claude(ev):
            continue
        seen = True
        if ev["type"] == "assistant":
            msg = ev.get("message")
            if not isinstance(msg, dict) or not isinstance(msg.get("usage"), dict):
                continue
            u, mid = _claude_usage(msg["usage"]), msg.get("id")
            if isinstance(mid, str) and mid:
                old = by_id.get(mid)  # a repeated message: keep the largest count seen, never add
                by_id[mid] = u if old is None else Usage(input=max(old.input, u.input),
                                                         cached=max(old.cached, u.cached),
                                                         output=max(old.output, u.output))
            else:
                anon += u
        else:
            results[ev.get("session_id")] = ev
    summed = sum(by_id.values(), anon)
    if not results:
        return summed, None, seen
    usage, usd, any_usage = Usage(), None, False
    for r in results.values():
        u = _claude_model_usage(r.get("modelUsage"))
        if u is None and isinstance(r.get("usage"), dict):
            u = _claude_usage(r["usage"])
        if u is not None and u.total:
            usage, any_usage = usage + u, True
        cost = _num(r, "total_cost_usd")
        cost = _num(r, "cost_usd") if cost is None else cost
        if cost is not None:
            usd = (usd or 0.0) + cost
    return (usage if any_usage else summed), usd, seen


# --- OpenCode ---------------------------------------------------------------------------------------------

def parse_opencode(events: Iterable[dict]) -> tuple[Usage, float | None, bool]:
    parts: dict[Any, dict] = {}
    seen = False
    for i, ev in enumerate(events):
        if ev.get("type") not in ("step_finish", "step_start"):
            continue
        seen = True
        part = ev.get("part")
        if ev["type"] == "step_finish" and isinstance(part, dict):
            parts[part.get("id") or ("#", i)] = part
    usage, usd = Usage(), None
    for p in parts.values():
        t = p.get("tokens") if isinstance(p.get("tokens"), dict) else {}
        cache = t.get("cache") if isinstance(t.get("cache"), dict) else {}
        read, write = _int(cache, "read"), _int(cache, "write")
        usage += Usage(input=_int(t, "input") + read + write, cached=read,
                       output=_int(t, "output") + _int(t, "reasoning"))
        cost = _num(p, "cost")
        if cost is not None:
            usd = (usd or 0.0) + cost
    return usage, usd, seen


# --- Codex CLI --------------------------------------------------------------------------------------------

def _codex_totals(ev: dict) -> dict | None:
    if ev.get("type") == "turn.completed" and isinstance(ev.get("usage"), dict):
        return ev["usage"]
    inner = ev.get("payload") if isinstance(ev.get("payload"), dict) else ev.get("msg")
    if isinstance(inner, dict) and inner.get("type") == "token_count":
        info = inner.get("info")
        if isinstance(info, dict) and isinstance(info.get("total_token_usage"), dict):
            return info["total_token_usage"]
    return None


def parse_codex(events: Iterable[dict]) -> tuple[Usage, float | None, bool]:
    threads: list[Usage | None] = [None]  # the last cumulative total of each thread
    seen = False
    for ev in events:
        if ev.get("type") == "thread.started":
            seen = True
            if threads[-1] is not None:
                threads.append(None)
            continue
        totals = _codex_totals(ev)
        if totals is None:
            seen = seen or ev.get("type") in ("turn.started", "turn.failed", "item.completed")
            continue
        seen = True
        cached = _int(totals, "cached_input_tokens")
        threads[-1] = Usage(input=max(_int(totals, "input_tokens"), cached), cached=cached,
                            output=_int(totals, "output_tokens"))
    return sum((u for u in threads if u is not None), Usage()), None, seen


# --- generic ----------------------------------------------------------------------------------------------

def parse_generic(text: str) -> tuple[Usage, float | None, bool]:
    usage, usd, seen = Usage(), None, False
    dec = json.JSONDecoder()
    for line in text.splitlines():
        at = line.find(GENERIC_TAG)
        if at < 0:
            continue
        try:
            d, _ = dec.raw_decode(line[at + len(GENERIC_TAG):].lstrip())
        except ValueError:
            continue
        if not isinstance(d, dict):
            continue
        seen = True
        cached = _int(d, "cached")
        usage += Usage(input=max(_int(d, "input"), cached), cached=cached, output=_int(d, "output"))
        cost = _num(d, "usd")
        if cost is not None:
            usd = (usd or 0.0) + cost
    return usage, usd, seen


_PARSERS = {"claude": parse_claude, "opencode": parse_opencode, "codex": parse_codex}


def parse_usage(text: str, fmt: str = "auto") -> tuple[Usage, float | None]:
    """Usage and US-dollar cost (``None`` where the log states none) from an agent's log text."""
    fmt = _ALIASES.get(fmt, fmt)
    if fmt not in FORMATS:
        raise ValueError(f"unknown agent log format {fmt!r}; one of {', '.join(FORMATS)}")
    if fmt == "generic":
        return parse_generic(text)[:2]
    events = _events(text)
    if fmt != "auto":
        return _PARSERS[fmt](events)[:2]
    for parse in _PARSERS.values():  # the first format that counted anything; else the generic lines
        usage, usd, seen = parse(events)
        if seen and (usage.total or usd is not None):
            return usage, usd
    return parse_generic(text)[:2]
