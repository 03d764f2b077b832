"""The service's outermost layer, as plain ASGI (no per-request task group or stream, as Starlette's
``BaseHTTPMiddleware`` adds): a request body's bounds are checked before anything reads it, and every answer
carries the server's own time for it in a ``Server-Timing`` header (``app;dur=`` milliseconds, from the request
reaching the app to its answer's headers), which the metrics count by route; a load test reads it to tell the
service's overhead from its own client's."""

from __future__ import annotations

import json
import time
from typing import Callable


class Bounded:
    """``app`` behind the bounds: a POST or PUT without a Content-Length is a 411, one over ``max_bytes`` a 413.
    ``observe(route, status, seconds)`` is told of every HTTP request answered."""

    def __init__(self, app, max_bytes: int, observe: Callable[[str, int, float], None]):
        self.app, self.max_bytes, self.observe = app, max_bytes, observe

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        t0 = time.perf_counter()
        refusal = self.refusal(scope)
        status = [500]

        async def timed(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                dur = f"app;dur={(time.perf_counter() - t0) * 1e3:.3f}".encode()
                message = {**message, "headers": [*message.get("headers", []), (b"server-timing", dur)]}
            await send(message)

        try:
            if refusal is not None:
                await _answer(timed, *refusal)
            else:
                await self.app(scope, receive, timed)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            self.observe(route, status[0], time.perf_counter() - t0)

    def refusal(self, scope) -> tuple[int, str] | None:
        if scope.get("method") not in ("POST", "PUT"):
            return None
        size = dict(scope.get("headers") or []).get(b"content-length")
        if size is None:
            return 411, "a Content-Length header is needed"
        if not size.isdigit() or int(size) > self.max_bytes:
            return 413, f"request body over {self.max_bytes} bytes"
        return None


async def _answer(send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def server_ms(headers) -> float | None:
    """The server's own time (ms) from an answer's ``Server-Timing`` header, or None."""
    for part in (headers.get("server-timing") or "").split(","):
        name, _, params = part.strip().partition(";")
        if name == "app" and params.startswith("dur="):
            try:
                return float(params[4:])
            except ValueError:
                return None
    return None
