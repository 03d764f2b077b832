"""A scripted model server on 127.0.0.1 for tests: real HTTP, both OpenAI's and Anthropic's protocols.

::

    from tests.agents.agents_loopback import LoopbackServer, code_reply, http_error

    with LoopbackServer([http_error(429, retry_after=0.05), code_reply("def run(x): return x")]) as srv:
        cfg = ModelConfig(name="m", provider="openai", model="m", base_url=srv.openai_base_url)
        reply = make_provider(cfg).complete([Message(role="user", content="hi")])
        assert srv.calls == 2 and srv.bodies()[1]["messages"][0]["content"] == "hi"

Endpoints: ``POST /v1/chat/completions`` (OpenAI chat completions) at ``.openai_base_url``
(``http://127.0.0.1:<port>/v1``) and ``POST /v1/messages`` (Anthropic messages) at ``.anthropic_base_url``
(``http://127.0.0.1:<port>``; the SDK appends ``/v1/messages``). Any key is accepted. A request with
``"stream": true`` is answered with server-sent events as each provider sends them: OpenAI's chunks (the usage in
a last chunk only when ``stream_options.include_usage`` asks for it, then ``[DONE]``), Anthropic's
``message_start`` (the input usage), content block events, ``message_delta`` (the cumulative output usage) and
``message_stop``.

The SCRIPT is a list of steps, one consumed per request in order, whichever protocol the request speaks (add more
with ``.add(...)``). A step is one of:

- a reply: ``{"type": "reply", "text": str, "tool_calls": [{"name": str, "arguments": dict | str, "id": str?}],
  "finish_reason": "stop" | "length" | "tool_calls" | ..., "usage": {"input": int, "cached": int, "output": int},
  "model": str?}``; every key but ``type`` optional. ``finish_reason`` is given in solbench's vocabulary and
  translated for Anthropic (length -> max_tokens, tool_calls -> tool_use, stop -> end_turn); left out it is
  "tool_calls" when there are tool calls, else "stop". ``usage.input`` counts every prompt token, cached ones
  included (Anthropic's body gets ``input_tokens = input - cached`` and ``cache_read_input_tokens = cached``).
  Default usage: 10 in, 0 cached, 5 out. A plain ``str`` step is a reply with that text.
- an HTTP error: ``{"type": "error", "status": 429, "message": str?, "retry_after": float | str?,
  "headers": dict?}``, with each protocol's error body.
- a delay: ``{"type": "delay", "seconds": float, "then": step?}``: sleeps, then answers with ``then`` (default
  a plain "ok" reply). A client that timed out meanwhile has gone; the step is consumed either way.
- a raw answer: ``{"type": "raw", "status": 200, "body": str, "content_type": "text/html"}``, for servers that
  are not model endpoints at all.
- a callable ``fn(request_json) -> step``, called with the request body, for replies that depend on the prompt.

Once the script is used up the server answers ``default`` if one was given, else HTTP 410 "loopback script
exhausted" (not retried by the providers, so a test asking for more than it scripted fails at once).

Every request is recorded in ``.requests`` (:class:`Recorded`: protocol, path, body, headers, step), malformed
ones too; ``.calls`` counts them; ``.bodies(protocol)`` lists the bodies (for "no paid call repeated" checks).
Fixture steps: :func:`reply`, :func:`tool_call`, :func:`code_reply`, :func:`no_code_reply`,
:func:`truncated_reply`, :func:`http_error`, :func:`delay`, :func:`raw_answer`; :func:`closed_port` gives a
port nothing listens on.
"""
from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterable

DEFAULT_USAGE = {"input": 10, "cached": 0, "output": 5}
_TO_ANTHROPIC_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}
_ANTHROPIC_ERROR_TYPE = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                         404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                         500: "api_error", 529: "overloaded_error"}
PATHS = {"/v1/chat/completions": "openai", "/v1/messages": "anthropic"}


# -- steps ---------------------------------------------------------------------------------------------------


def reply(text: str = "", tool_calls: Iterable[dict[str, Any]] | None = None, finish_reason: str | None = None,
          input: int = 10, cached: int = 0, output: int = 5, model: str | None = None) -> dict[str, Any]:
    step: dict[str, Any] = {"type": "reply", "text": text, "tool_calls": list(tool_calls or []),
                            "usage": {"input": input, "cached": cached, "output": output}}
    if finish_reason is not None:
        step["finish_reason"] = finish_reason
    if model is not None:
        step["model"] = model
    return step


def tool_call(name: str, arguments: dict[str, Any] | str | None = None, id: str | None = None) -> dict[str, Any]:
    call: dict[str, Any] = {"name": name, "arguments": {} if arguments is None else arguments}
    if id is not None:
        call["id"] = id
    return call


def fenced(code: str, lang: str = "python") -> str:
    return f"```{lang}\n{code.rstrip()}\n```"


def code_reply(code: str, lang: str = "python", prose: str = "Here is the kernel.", **kw: Any) -> dict[str, Any]:
    """A reply whose text holds one fenced code block with ``code``."""
    return reply(f"{prose}\n\n{fenced(code, lang)}\n", **kw)


def no_code_reply(text: str = "I need to think about the memory layout before writing any code.",
                  **kw: Any) -> dict[str, Any]:
    """A reply with prose and no code block."""
    return reply(text, **kw)


def truncated_reply(code: str, lang: str = "python", keep: float = 0.5, **kw: Any) -> dict[str, Any]:
    """A reply cut off mid code block: ``finish_reason`` "length", the fence opened and never closed."""
    cut = code[: max(1, int(len(code) * keep))]
    kw.setdefault("output", 4096)
    return reply(f"Here is the kernel.\n\n```{lang}\n{cut}", finish_reason="length", **kw)


def http_error(status: int, message: str | None = None, retry_after: float | str | None = None,
               headers: dict[str, str] | None = None) -> dict[str, Any]:
    step: dict[str, Any] = {"type": "error", "status": status, "message": message or f"loopback HTTP {status}"}
    if retry_after is not None:
        step["retry_after"] = retry_after
    if headers:
        step["headers"] = dict(headers)
    return step


def delay(seconds: float, then: Any = None) -> dict[str, Any]:
    return {"type": "delay", "seconds": seconds, "then": then if then is not None else reply("ok")}


def raw_answer(body: str, status: int = 200, content_type: str = "text/html") -> dict[str, Any]:
    return {"type": "raw", "status": status, "body": body, "content_type": content_type}


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- response bodies ---------------------------------------------------------------------------------------------


def _usage(step: dict[str, Any]) -> dict[str, int]:
    return {**DEFAULT_USAGE, **(step.get("usage") or {})}


def _finish(step: dict[str, Any]) -> str:
    return step.get("finish_reason") or ("tool_calls" if step.get("tool_calls") else "stop")


def openai_body(step: dict[str, Any], request: dict[str, Any], n: int) -> dict[str, Any]:
    u = _usage(step)
    message: dict[str, Any] = {"role": "assistant", "content": step.get("text") or None}
    calls = step.get("tool_calls") or []
    if calls:
        message["tool_calls"] = [
            {"id": c.get("id") or f"call_{n}_{i}", "type": "function",
             "function": {"name": c["name"], "arguments": c["arguments"] if isinstance(c.get("arguments"), str)
                          else json.dumps(c.get("arguments") or {})}} for i, c in enumerate(calls)]
    elif message["content"] is None:
        message["content"] = ""
    return {"id": f"chatcmpl-loopback-{n}", "object": "chat.completion", "created": int(time.time()),
            "model": step.get("model") or request.get("model") or "loopback",
            "choices": [{"index": 0, "message": message, "finish_reason": _finish(step), "logprobs": None}],
            "usage": {"prompt_tokens": u["input"], "completion_tokens": u["output"],
                      "total_tokens": u["input"] + u["output"],
                      "prompt_tokens_details": {"cached_tokens": u["cached"]}}}


def anthropic_body(step: dict[str, Any], request: dict[str, Any], n: int) -> dict[str, Any]:
    u = _usage(step)
    content: list[dict[str, Any]] = []
    if step.get("text"):
        content.append({"type": "text", "text": step["text"]})
    for i, c in enumerate(step.get("tool_calls") or []):
        args = c.get("arguments") or {}
        content.append({"type": "tool_use", "id": c.get("id") or f"toolu_{n}_{i}", "name": c["name"],
                        "input": json.loads(args) if isinstance(args, str) else args})
    finish = _finish(step)
    return {"id": f"msg_loopback_{n}", "type": "message", "role": "assistant",
            "model": step.get("model") or request.get("model") or "loopback", "content": content,
            "stop_reason": _TO_ANTHROPIC_STOP.get(finish, finish), "stop_sequence": None,
            "usage": {"input_tokens": u["input"] - u["cached"], "output_tokens": u["output"],
                      "cache_read_input_tokens": u["cached"], "cache_creation_input_tokens": 0}}


def error_body(protocol: str, status: int, message: str) -> dict[str, Any]:
    if protocol == "anthropic":
        return {"type": "error", "error": {"type": _ANTHROPIC_ERROR_TYPE.get(status, "api_error"),
                                           "message": message}}
    return {"error": {"message": message, "type": "loopback_error", "code": status}}


# -- the server --------------------------------------------------------------------------------------------------


@dataclass
class Recorded:
    protocol: str  # "openai", "anthropic", or "unknown"
    path: str
    body: Any  # the parsed JSON, or the raw text when it did not parse
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names
    step: Any = None  # the step that answered it, after callables were resolved


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._send(404, {"error": {"message": f"no GET {self.path} here"}})

    def do_POST(self) -> None:
        owner = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        text = self.rfile.read(length).decode("utf-8", "replace")
        path = self.path.split("?", 1)[0]
        protocol = PATHS.get(path, "unknown")
        try:
            body: Any = json.loads(text)
        except ValueError:
            body = text
        rec = Recorded(protocol, path, body, {k.lower(): v for k, v in self.headers.items()})
        step, n = owner._take(rec)
        if protocol == "unknown":
            return self._send(404, {"error": {"message": f"no endpoint {path}"}})
        if not isinstance(body, dict):
            return self._send(400, error_body(protocol, 400, "request body is not a JSON object"))
        try:
            while True:
                while callable(step):
                    step = step(body)
                if isinstance(step, str):
                    step = reply(step)
                rec.step = step
                if step.get("type") != "delay":
                    break
                if owner._closing.wait(float(step["seconds"])):
                    return
                step = step.get("then") or reply("ok")
            if step.get("type") == "raw":
                return self._send(int(step.get("status", 200)), None, raw=str(step.get("body", "")).encode(),
                                  content_type=step.get("content_type", "text/html"))
            if step.get("type") == "error":
                status = int(step["status"])
                headers = dict(step.get("headers") or {})
                if step.get("retry_after") is not None:
                    headers["Retry-After"] = str(step["retry_after"])
                return self._send(status, error_body(protocol, status, step.get("message") or ""), headers)
            make = openai_body if protocol == "openai" else anthropic_body
            if body.get("stream"):
                return self._stream(protocol, sse_events(protocol, make(step, body, n), body))
            self._send(200, make(step, body, n))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test)
        except Exception as e:  # a broken script: say so in the response rather than hang the test
            owner.errors.append(e)
            self._send(500, error_body(protocol, 500, f"loopback script error: {e!r}"))

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None, raw: bytes | None = None,
              content_type: str = "application/json") -> None:
        data = raw if raw is not None else json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _stream(self, protocol: str, events: list[dict[str, Any]]) -> None:
        if protocol == "anthropic":
            data = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
        else:
            data = b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events) + b"data: [DONE]\n\n"
        self._send(200, None, raw=data, content_type="text/event-stream")


def sse_events(protocol: str, whole: dict[str, Any], request: dict[str, Any]) -> list[dict[str, Any]]:
    """A whole response as the events a provider streams it in (see the module docstring)."""
    if protocol == "anthropic":
        u = dict(whole["usage"])
        start = {**whole, "content": [], "stop_reason": None, "usage": {**u, "output_tokens": 1}}
        events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
        for i, block in enumerate(whole["content"]):
            events.append({"type": "content_block_start", "index": i,
                           "content_block": {**block, "text": ""} if block["type"] == "text" else block})
            if block["type"] == "text":
                for part in (block["text"][:len(block["text"]) // 2], block["text"][len(block["text"]) // 2:]):
                    events.append({"type": "content_block_delta", "index": i,
                                   "delta": {"type": "text_delta", "text": part}})
            events.append({"type": "content_block_stop", "index": i})
        events.append({"type": "message_delta", "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": None},
                       "usage": {"output_tokens": u["output_tokens"]}})
        return events + [{"type": "message_stop"}]
    choice, head = whole["choices"][0], {k: whole[k] for k in ("id", "created", "model")}
    chunk = dict(head, object="chat.completion.chunk")
    text = choice["message"].get("content") or ""
    events = [dict(chunk, choices=[{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])]
    for part in (text[:len(text) // 2], text[len(text) // 2:]):
        events.append(dict(chunk, choices=[{"index": 0, "delta": {"content": part}, "finish_reason": None}]))
    if choice["message"].get("tool_calls"):
        calls = [dict(c, index=i) for i, c in enumerate(choice["message"]["tool_calls"])]
        events.append(dict(chunk, choices=[{"index": 0, "delta": {"tool_calls": calls}, "finish_reason": None}]))
    events.append(dict(chunk, choices=[{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]))
    if (request.get("stream_options") or {}).get("include_usage"):
        events.append(dict(chunk, choices=[], usage=whole["usage"]))
    return events


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: "LoopbackServer"


class LoopbackServer:
    """The scripted server; a context manager (or ``start()`` / ``close()``). See the module docstring."""

    def __init__(self, script: Iterable[Any] = (), *, default: Any = None):
        self.script: list[Any] = list(script)
        self.default = default
        self.requests: list[Recorded] = []
        self.errors: list[Exception] = []  # exceptions raised by callable steps
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # lifecycle
    def start(self) -> "LoopbackServer":
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="loopback-model-server", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> "LoopbackServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # addresses
    @property
    def port(self) -> int:
        assert self._httpd is not None, "the loopback server is not started"
        return self._httpd.server_address[1]

    @property
    def openai_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def base_url(self, protocol: str) -> str:
        return {"openai": self.openai_base_url, "anthropic": self.anthropic_base_url}[protocol]

    # the script and what came in
    def add(self, *steps: Any) -> None:
        with self._lock:
            self.script.extend(steps)

    @property
    def remaining(self) -> int:
        return len(self.script)

    @property
    def calls(self) -> int:
        return len(self.requests)

    def bodies(self, protocol: str | None = None) -> list[Any]:
        return [r.body for r in self.requests if protocol is None or r.protocol == protocol]

    def _take(self, rec: Recorded) -> tuple[Any, int]:
        with self._lock:
            self.requests.append(rec)
            n = len(self.requests)
            if rec.protocol == "unknown":
                return None, n
            if self.script:
                return self.script.pop(0), n
            if self.default is not None:
                return self.default, n
            return http_error(410, f"loopback script exhausted after {n - 1} replies"), n


def language_model(kernels: dict[str, str], skill: str, done=None):
    """A scripted model (a ``default`` step for ``LoopbackServer``) that writes the kernel of the language its
    system prompt names ("in triton": ``kernels["triton"]``, else ``kernels["pytorch"]``), answers with ``skill``
    when asked to keep SKILL.md, and stops ("Done.") once ``done(messages)`` holds (default: the feedback says
    every visible workload passed)."""

    def finished(msgs: list[dict]) -> bool:
        last = msgs[-1]["content"] if msgs else ""
        return "all visible workloads passed" in str(last).lower()

    def step(body: dict) -> dict:
        msgs = body.get("messages") or []
        system = msgs[0]["content"] if msgs and msgs[0]["role"] == "system" else ""
        if "You maintain SKILL.md" in system:
            return reply(skill)
        if (done or finished)(msgs):
            return no_code_reply("Done.")
        return code_reply(kernels["triton"] if "in triton" in system.lower() else kernels["pytorch"])

    return step

