"""Retries for model calls, done here rather than in the SDKs so the behaviour is one thing, and testable.

A provider turns each SDK failure into a :class:`CallFailure` (``status`` None for a connection error or a timeout)
and hands the call to :func:`call_with_retries`. Rate limits (429), server errors (5xx), 408, dropped connections
and timeouts are retried with exponential back-off plus jitter, waiting at least what a ``Retry-After`` header
asks; anything else, and whatever is left after ``max_retries`` retries, becomes a one-line :class:`ProviderError`.
"""
from __future__ import annotations

import email.utils
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

from solbench.errors import UserError

T = TypeVar("T")


class ProviderError(UserError):
    """A model call that cannot succeed without the user doing something: one line, naming the model."""


@dataclass
class CallFailure(Exception):
    """One failed try. ``status`` is the HTTP status, None when no response came (refused, reset, timed out)."""
    status: int | None
    detail: str = ""
    retry_after: float | None = None  # seconds, from the response headers
    timeout: bool = False

    def __str__(self) -> str:
        return f"HTTP {self.status}: {self.detail}" if self.status is not None else self.detail

    @property
    def retryable(self) -> bool:
        return self.status is None or self.status in (408, 429) or self.status >= 500


@dataclass
class RetryPolicy:
    max_retries: int = 6  # retries after the first try
    base_s: float = 1.0  # first back-off; doubles each retry
    cap_s: float = 60.0  # longest back-off
    max_retry_after_s: float = 300.0  # longest wait a Retry-After header may impose
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    rng: Callable[[], float] = field(default=random.random, repr=False)

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (0 = the first)."""
        backoff = min(self.cap_s, self.base_s * 2 ** retry)
        backoff *= 0.5 + self.rng()  # jitter: 0.5x .. 1.5x, so parallel attempts spread out
        if retry_after is not None:
            return max(min(retry_after, self.max_retry_after_s), 0.0) + 0.1 * backoff * self.rng()
        return backoff


def parse_retry_after(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (seconds, possibly fractional, or an HTTP date)."""
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000)
    except (TypeError, ValueError):
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def one_line(text: Any, limit: int = 300) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _hint(status: int | None, model: str, where: str, key_env: str | None, f: CallFailure) -> str:
    if status is None and f.timeout:
        return f"no reply from {where} within the timeout; raise timeout_s for {model!r} or check the server"
    if status is None:
        return f"cannot reach {where} ({f.detail}); check base_url for {model!r} and that the server is running"
    if status in (401, 403):
        key = f"the key in ${key_env}" if key_env else "the API key"
        return f"{where} refused the credentials (HTTP {status}: {f.detail}); check {key}"
    if status == 404:
        return f"{where} answered 404 ({f.detail}); check base_url and model for {model!r}"
    if status == 429 or status >= 500:
        return f"{where} kept failing (HTTP {status}: {f.detail}); try again later or raise max_retries"
    return f"{where} rejected the request (HTTP {status}: {f.detail}); check the settings of {model!r}"


def call_with_retries(fn: Callable[[], T], policy: RetryPolicy, *, model: str, where: str,
                      key_env: str | None = None, on_retry: Callable[[CallFailure, float], None] | None = None) -> T:
    """``fn()``, retried on transient failures. ``fn`` raises :class:`CallFailure` for a failed try."""
    retry = 0
    while True:
        try:
            return fn()
        except CallFailure as f:
            if not f.retryable:
                raise ProviderError(one_line(f"model {model!r}: {_hint(f.status, model, where, key_env, f)}")) from None
            if retry >= policy.max_retries:
                tries = f"{retry + 1} tr{'y' if retry == 0 else 'ies'}"
                raise ProviderError(one_line(f"model {model!r}: after {tries}, "
                                             f"{_hint(f.status, model, where, key_env, f)}")) from None
            wait = policy.delay(retry, f.retry_after)
            if on_retry is not None:
                on_retry(f, wait)
            policy.sleep(wait)
            retry += 1


def failure_from_sdk(e: Exception, sdk: Any) -> CallFailure | None:
    """A :class:`CallFailure` for an ``openai``/``anthropic`` exception (same shapes in both), None for others."""
    if isinstance(e, sdk.APIStatusError):
        body = getattr(e, "body", None)
        detail = e.message
        if isinstance(body, dict):  # {"error": {"message": ...}}, or (some SDK versions) the inner object
            err = body.get("error", body)
            if isinstance(err, dict) and isinstance(err.get("message"), str):
                detail = err["message"]
            elif isinstance(err, str):
                detail = err
        return CallFailure(e.status_code, one_line(detail, 200), parse_retry_after(e.response.headers))
    if isinstance(e, sdk.APITimeoutError):
        return CallFailure(None, "timed out", timeout=True)
    if isinstance(e, sdk.APIConnectionError):
        cause = e.__cause__ or e.__context__
        return CallFailure(None, one_line(cause or e, 200) or type(e).__name__)
    return None
