"""The model-API proxy an external agent reaches its model through: the only way out of its sandbox but ``./submit``.

The proxy serves HTTP on a Unix socket in the attempt's run directory; inside the sandbox, process 1 relays
``127.0.0.1:PORT`` of the agent's own network namespace to it (``jail``). The agent is given
``ANTHROPIC_BASE_URL=http://127.0.0.1:PORT/anthropic`` and ``OPENAI_BASE_URL=http://127.0.0.1:PORT/openai`` with a
placeholder key; the proxy drops whatever credentials the request carries, adds the real key (which never enters
the sandbox) and forwards to the route's upstream. It counts tokens and money from the provider's responses as
they pass: the JSON ``usage`` of a response, or the usage fields of its server-sent events (Anthropic messages:
``message_start`` then the cumulative ``message_delta``; OpenAI chat completions: the final chunk's ``usage``,
which the proxy asks for with ``stream_options.include_usage``; OpenAI responses: ``response.completed``). Once
the token or money budget is spent, a request gets an error response (HTTP 403, the protocol's error body) and is
not forwarded. The agent's own log only ever raises the count (:class:`Meter`).
"""

from __future__ import annotations

import json
import os
import socketserver
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from solbench.agents.types import Price, Usage
from solbench.errors import UserError

PLACEHOLDER_KEY = "solbench-proxy"
DEFAULT_UPSTREAM = {"anthropic": "https://api.anthropic.com", "openai": "https://api.openai.com/v1"}
_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer", "trailers",
        "transfer-encoding", "upgrade", "host", "content-length"}
_CREDENTIALS = {"authorization", "x-api-key", "api-key"}
_DROPPED = _HOP | _CREDENTIALS | {"accept-encoding"}  # the upstream's encoding is the client's to decode
_COMPLETIONS = ("/messages", "/chat/completions", "/completions", "/responses")  # the calls that are billed
_MAX_BODY = 32 << 20
_SLOTS = 16  # connections served at once: an agent that opens more is answered by a closed connection


def _httpx():
    try:
        import httpx
    except ImportError:
        try:
            import httpx2 as httpx  # what recent openai and anthropic clients install under its own name
        except ImportError:
            raise UserError("the external agent's model proxy needs httpx: pip install 'solbench[agents]'") from None
    return httpx


@dataclass
class Route:
    """``/<name>/...`` forwarded to ``upstream + /...`` with the key in ``$key_env`` (or ``key``)."""
    name: str  # "anthropic" | "openai": the protocol and the path prefix
    upstream: str
    key: str | None = None

    def auth(self) -> dict[str, str]:
        if not self.key:
            return {}
        return {"x-api-key": self.key} if self.name == "anthropic" else {"authorization": f"Bearer {self.key}"}


def _n(d: Any, key: str) -> int:
    v = d.get(key) if isinstance(d, dict) else None
    return max(0, int(v)) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0


def usage_of(protocol: str, u: Any) -> Usage | None:
    """A provider's ``usage`` object as solbench's :class:`Usage` (input counts cached tokens)."""
    if not isinstance(u, dict) or not u:
        return None
    if protocol == "anthropic":
        read, made = _n(u, "cache_read_input_tokens"), _n(u, "cache_creation_input_tokens")
        return Usage(input=_n(u, "input_tokens") + read + made, cached=read, output=_n(u, "output_tokens"))
    if "prompt_tokens" in u or "completion_tokens" in u:  # chat completions
        cached = _n(u.get("prompt_tokens_details"), "cached_tokens")
        return Usage(input=max(_n(u, "prompt_tokens"), cached), cached=cached, output=_n(u, "completion_tokens"))
    cached = _n(u.get("input_tokens_details"), "cached_tokens")  # responses
    return Usage(input=max(_n(u, "input_tokens"), cached), cached=cached, output=_n(u, "output_tokens"))


class Stream:
    """Usage from a response's server-sent events, fed as the bytes pass."""

    def __init__(self, protocol: str):
        self.protocol, self.buf, self.fields, self.last = protocol, b"", {}, None

    def feed(self, chunk: bytes) -> None:
        self.buf += chunk
        *lines, self.buf = self.buf.split(b"\n")
        if len(self.buf) > _MAX_BODY:
            self.buf = b""
        for line in lines:
            data = line.strip()
            if data.startswith(b"data:") and data[5:].strip() not in (b"", b"[DONE]"):
                try:
                    self.event(json.loads(data[5:]))
                except ValueError:
                    continue

    def event(self, ev: Any) -> None:
        if not isinstance(ev, dict):
            return
        if self.protocol == "anthropic":
            u = (ev.get("message") or {}).get("usage") if ev.get("type") == "message_start" else ev.get("usage")
            for k, v in (u.items() if isinstance(u, dict) and ev.get("type") in ("message_start", "message_delta")
                         else ()):
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    self.fields[k] = max(self.fields.get(k, 0), v)  # message_delta's counts are cumulative
            return
        u = ev.get("usage") if isinstance(ev.get("usage"), dict) else (ev.get("response") or {}).get("usage")
        if isinstance(u, dict) and u:
            self.last = u

    def usage(self) -> Usage | None:
        return usage_of(self.protocol, self.fields if self.protocol == "anthropic" else self.last)


class Meter:
    """What the attempt spent: counted from responses, raised (never lowered) by what the agent's log claims."""

    def __init__(self, price: Price | None = None, tokens: int | None = None, usd: float | None = None):
        self.price, self.tokens, self.usd_limit = price or Price(), tokens, usd
        self.counted, self.counted_usd = Usage(), 0.0
        self.claimed, self.claimed_usd = Usage(), 0.0
        self.calls, self.uncounted, self.refused = 0, 0, 0
        self.lock = threading.Lock()

    def add(self, u: Usage | None) -> None:
        with self.lock:
            self.calls += 1
            if u is None:
                self.uncounted += 1
                return
            self.counted = self.counted + u
            self.counted_usd += self.price.cost(u)

    def claim(self, u: Usage, usd: float | None) -> None:
        with self.lock:
            self.claimed, self.claimed_usd = u, usd if usd is not None else self.price.cost(u)

    def usage(self) -> Usage:
        a, b = self.counted, self.claimed
        return Usage(input=max(a.input, b.input), cached=max(a.cached, b.cached), output=max(a.output, b.output))

    def usd(self) -> float:
        return max(self.counted_usd, self.claimed_usd)

    def spent(self) -> str | None:
        if self.tokens is not None and self.usage().total >= self.tokens:
            return "tokens"
        if self.usd_limit is not None and self.usd() >= self.usd_limit:
            return "usd"
        return None

    def summary(self) -> dict[str, Any]:
        return {"counted": self.counted.model_dump(), "counted_usd": self.counted_usd, "calls": self.calls,
                "uncounted": self.uncounted, "refused": self.refused, "claimed": self.claimed.model_dump(),
                "claimed_usd": self.claimed_usd}


def error_body(protocol: str, status: int, message: str) -> dict[str, Any]:
    if protocol == "anthropic":
        kind = {403: "permission_error", 404: "not_found_error", 413: "request_too_large"}.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": "solbench_proxy", "code": status}}


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    proxy: "Proxy"
    slots = None

    def process_request(self, request, client_address):
        if not self.slots.acquire(blocking=False):
            return self.shutdown_request(request)
        super().process_request(request, client_address)

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 900  # a connection that sends nothing for this long is closed
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
        pass

    def do_POST(self) -> None:
        self.server.proxy.forward(self)

    do_GET = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_POST


class Proxy:
    """The proxy for one attempt; ``start()`` binds ``socket_path`` (a name in ``directory``) and serves."""

    def __init__(self, routes: list[Route], meter: Meter, directory: str, name: str = "api.sock",
                 timeout_s: float = 600.0):
        self.routes = {r.name: r for r in routes}
        self.meter, self.directory, self.name, self.timeout_s = meter, directory, name, timeout_s
        self.records: list[dict[str, Any]] = []
        self._server: _Server | None = None
        self._client = None

    def start(self) -> "Proxy":
        httpx = _httpx()
        self._client = httpx.Client(timeout=httpx.Timeout(self.timeout_s, connect=30.0), follow_redirects=False)
        dir_fd = os.open(self.directory, os.O_PATH)
        try:  # through the directory's descriptor: a long temporary path still fits a Unix socket's address
            self._server = _Server(f"/proc/self/fd/{dir_fd}/{self.name}", _Handler)
        finally:
            os.close(dir_fd)
        self._server.proxy, self._server.slots = self, threading.BoundedSemaphore(_SLOTS)
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True,
                         name="solbench-model-proxy").start()
        return self

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._client is not None:
            self._client.close()
            self._client = None

    def forward(self, h: BaseHTTPRequestHandler) -> None:
        name, _, rest = h.path.lstrip("/").partition("/")
        route = self.routes.get(name)
        body = _read_body(h)
        if route is None:
            known = ", ".join(f"/{r}" for r in self.routes) or "none"
            return _send_json(h, 404, error_body("openai", 404, f"solbench proxy: no model API at {h.path} (routes: "
                                                                  f"{known})"))
        if body is None:
            return _send_json(h, 413, error_body(name, 413, "solbench proxy: the request is too large or "
                                                            "unreadable"))
        why = self.meter.spent()
        if why is not None:
            with self.meter.lock:
                self.meter.refused += 1
            self._record(h, 403, None, False)
            return _send_json(h, 403, error_body(name, 403, f"solbench: the {why} budget of this attempt is spent; "
                                                            "the request was not forwarded"))
        body = _ask_for_usage(name, rest, body)
        headers = {k: v for k, v in h.headers.items() if k.lower() not in _DROPPED}
        headers.update(route.auth())
        url = route.upstream.rstrip("/") + "/" + rest
        try:
            with self._client.stream(h.command, url, content=body, headers=headers) as r:
                if r.headers.get("content-type", "").startswith("text/event-stream"):
                    self._stream(h, r, name)
                else:
                    self._whole(h, r, name)
        except Exception as e:  # noqa: BLE001 (the upstream's failure reaches the agent as a 502, never us)
            _send_json(h, 502, error_body(name, 502, f"solbench proxy: the model API did not answer "
                                                      f"({type(e).__name__})"))

    def _whole(self, h, r, protocol: str) -> None:
        data = r.read()
        usage = None
        try:
            usage = usage_of(protocol, json.loads(data).get("usage"))
        except (ValueError, AttributeError):
            pass
        self._book(h, r.status_code, usage, False)
        _send(h, r.status_code, _back_headers(r.headers), data)

    def _stream(self, h, r, protocol: str) -> None:
        sse = Stream(protocol)
        try:
            h.send_response(r.status_code)
            for k, v in _back_headers(r.headers).items():
                h.send_header(k, v)
            h.send_header("Transfer-Encoding", "chunked")
            h.end_headers()
            for chunk in r.iter_bytes():
                sse.feed(chunk)
                h.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                h.wfile.flush()
            h.wfile.write(b"0\r\n\r\n")
        except OSError:
            h.close_connection = True  # the agent hung up: count what passed
        finally:
            self._book(h, r.status_code, sse.usage(), True)

    def _book(self, h, status: int, usage: Usage | None, stream: bool) -> None:
        billed = h.command == "POST" and h.path.split("?", 1)[0].endswith(_COMPLETIONS)
        if usage is not None or (status < 400 and billed):  # a completion without usage: counted as uncounted
            self.meter.add(usage)
        self._record(h, status, usage, stream)

    def _record(self, h, status: int, usage: Usage | None, stream: bool) -> None:
        with self.meter.lock:
            self.records.append({"t": time.time(), "method": h.command, "path": h.path.split("?", 1)[0],
                                 "status": status, "stream": stream,
                                 "usage": usage.model_dump() if usage is not None else None})


def _ask_for_usage(route: str, rest: str, body: bytes) -> bytes:
    """A streamed chat completion carries its usage only when asked (``stream_options.include_usage``)."""
    if route != "openai" or not rest.split("?", 1)[0].endswith("chat/completions"):
        return body
    try:
        req = json.loads(body)
    except ValueError:
        return body
    if not isinstance(req, dict) or not req.get("stream"):
        return body
    req["stream_options"] = {**(req.get("stream_options") or {}), "include_usage": True}
    return json.dumps(req).encode()


def _read_body(h: BaseHTTPRequestHandler) -> bytes | None:
    """The request's body (``None`` when it is too large or unreadable)."""
    try:
        return _body(h)
    except (ValueError, OSError):
        h.close_connection = True
        return None


def _body(h: BaseHTTPRequestHandler) -> bytes | None:
    if "chunked" in h.headers.get("Transfer-Encoding", "").lower():
        data = b""
        while (size := int(h.rfile.readline().split(b";")[0].strip() or b"0", 16)) > 0:
            if len(data) + size > _MAX_BODY:
                return None
            data += h.rfile.read(size)
            h.rfile.readline()
        while h.rfile.readline() not in (b"\r\n", b"\n", b""):
            pass
        return data
    length = int(h.headers.get("Content-Length") or 0)
    return None if length > _MAX_BODY else h.rfile.read(length)


def _back_headers(headers) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in _HOP | {"content-encoding"}}


def _send(h: BaseHTTPRequestHandler, status: int, headers: dict[str, str], data: bytes) -> None:
    try:
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)
    except OSError:
        h.close_connection = True


def _send_json(h: BaseHTTPRequestHandler, status: int, payload: dict) -> None:
    _send(h, status, {"Content-Type": "application/json"}, json.dumps(payload).encode())


def routes_for(provider: str | None, base_url: str | None = None, key: str | None = None) -> list[Route]:
    """The proxy's routes: one for a model's provider (its ``base_url`` and key), or, with ``provider`` None,
    both providers' own APIs with the keys in ``$ANTHROPIC_API_KEY`` and ``$OPENAI_API_KEY`` where set."""
    if provider is None:
        return [Route(p, url, os.environ.get(env) or None) for p, url, env in (
            ("anthropic", DEFAULT_UPSTREAM["anthropic"], "ANTHROPIC_API_KEY"),
            ("openai", DEFAULT_UPSTREAM["openai"], "OPENAI_API_KEY"))]
    if provider not in DEFAULT_UPSTREAM:
        return []
    return [Route(provider, base_url or DEFAULT_UPSTREAM[provider], key)]


def agent_env(port: int) -> dict[str, str]:
    """What the agent is told about its model API: the proxy's address and a placeholder key."""
    base = f"http://127.0.0.1:{port}"
    return {"ANTHROPIC_BASE_URL": f"{base}/anthropic", "ANTHROPIC_API_KEY": PLACEHOLDER_KEY,
            "OPENAI_BASE_URL": f"{base}/openai", "OPENAI_API_KEY": PLACEHOLDER_KEY}

