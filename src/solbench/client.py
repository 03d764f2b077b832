"""A client of ``solbench serve``, synchronous (``Client``) and asynchronous (``AsyncClient``), on httpx.

Both retry what may succeed later (a connection refused or reset, 429 with its Retry-After, 502/503/504), with
exponential backoff and jitter, and keep at most ``max_in_flight`` requests in flight. A submission carries an
idempotency key, so a retried one never queues its evaluations twice. ``evaluate`` submits and long-polls until
the evaluation ends and returns the job as the service shows it (``JobView``'s JSON: ``state``, ``error``,
``result`` with ``verdict``, ``passed``, ``sol_score``, ``speedup``, the public ``workloads``, ``heldout``)."""

from __future__ import annotations

import asyncio
import random
import threading
import time
import uuid
from typing import Any

import httpx

from solbench.errors import UserError

RETRY_STATUS = (429, 502, 503, 504)
ENDED = ("done", "failed", "cancelled")


def request_body(problem: str, solution: dict | None = None, sources: dict[str, str] | None = None,
                 language: str | None = None, entry_point: str | None = None, **fields: Any) -> dict:
    """An evaluation request: a Solution JSON, or sources with their language (``fields``: options,
    seed_group, problem_files, destination_passing_style)."""
    body: dict[str, Any] = {"problem": problem, **{k: v for k, v in fields.items() if v is not None}}
    if solution is not None:
        body["solution"] = solution
    else:
        body.update(sources=sources, language=language, **({"entry_point": entry_point} if entry_point else {}))
    return body


class _Policy:
    def __init__(self, retries: int, backoff_s: float):
        self.retries, self.backoff_s = retries, backoff_s

    def delay(self, attempt: int, response: httpx.Response | None) -> float:
        after = response.headers.get("retry-after") if response is not None else None
        if after and after.isdigit():
            return float(after)
        return self.backoff_s * (2 ** attempt) * (0.5 + random.random())

    def retryable(self, response: httpx.Response | None, exc: Exception | None) -> bool:
        if exc is not None:
            return isinstance(exc, (httpx.TransportError,))
        return response is not None and response.status_code in RETRY_STATUS


class ServiceError(UserError):
    """The service refused a request or failed: ``status`` is its HTTP status."""

    def __init__(self, status: int, detail: Any):
        self.status = status
        super().__init__(f"the service answered {status}: {detail}")


def _checked(response: httpx.Response) -> Any:
    if response.status_code >= 400:
        try:
            detail = response.json().get("detail")
        except ValueError:
            detail = response.text[:300]
        raise ServiceError(response.status_code, detail)
    return response.json()


class Client:
    """``transport``: httpx's, where a caller needs its own (a proxy, a test's faults)."""

    def __init__(self, url: str, token: str | None = None, timeout_s: float = 90.0, retries: int = 6,
                 backoff_s: float = 0.25, max_in_flight: int = 16, transport: httpx.BaseTransport | None = None):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=timeout_s, transport=transport)
        self.policy = _Policy(retries, backoff_s)
        self.slots = threading.BoundedSemaphore(max_in_flight)

    def _call(self, method: str, path: str, **kw) -> Any:
        with self.slots:
            for attempt in range(self.policy.retries + 1):
                response, exc = None, None
                try:
                    response = self.http.request(method, path, **kw)
                except httpx.HTTPError as e:
                    exc = e
                if attempt < self.policy.retries and self.policy.retryable(response, exc):
                    time.sleep(self.policy.delay(attempt, response))
                    continue
                if exc is not None:
                    raise UserError(f"cannot reach the service at {self.http.base_url}: {exc}") from None
                return _checked(response)

    def submit(self, problem: str, **kw) -> int:
        return self.submit_batch([request_body(problem, **kw)])[0]

    def submit_batch(self, bodies: list[dict]) -> list[int]:
        key = uuid.uuid4().hex  # the same key on every retry: queued once
        path = "/v1/evaluations" if len(bodies) == 1 else "/v1/evaluations/batch"
        payload = bodies[0] if len(bodies) == 1 else {"evaluations": bodies}
        return self._call("POST", path, json=payload, headers={"Idempotency-Key": key})["ids"]

    def job(self, job_id: int, wait_s: float = 0.0) -> dict:
        return self._call("GET", f"/v1/evaluations/{job_id}", params={"wait": wait_s})

    def wait(self, job_id: int, timeout_s: float = 4 * 3600.0, poll_s: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout_s
        while True:
            job = self.job(job_id, wait_s=max(0.0, min(poll_s, deadline - time.monotonic())))
            if job["state"] in ENDED or time.monotonic() >= deadline:
                return job

    def evaluate(self, problem: str, timeout_s: float = 4 * 3600.0, **kw) -> dict:
        return self.wait(self.submit(problem, **kw), timeout_s)

    def cancel(self, job_id: int) -> dict:
        return self._call("DELETE", f"/v1/evaluations/{job_id}")

    def health(self) -> dict:
        return self._call("GET", "/health")

    def problems(self) -> list[dict]:
        return self._call("GET", "/v1/problems")

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class AsyncClient:
    def __init__(self, url: str, token: str | None = None, timeout_s: float = 90.0, retries: int = 6,
                 backoff_s: float = 0.25, max_in_flight: int = 16,
                 transport: httpx.AsyncBaseTransport | None = None):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.AsyncClient(base_url=url.rstrip("/"), headers=headers, timeout=timeout_s,
                                      transport=transport)
        self.policy = _Policy(retries, backoff_s)
        self.slots = asyncio.Semaphore(max_in_flight)

    async def _call(self, method: str, path: str, **kw) -> Any:
        async with self.slots:
            for attempt in range(self.policy.retries + 1):
                response, exc = None, None
                try:
                    response = await self.http.request(method, path, **kw)
                except httpx.HTTPError as e:
                    exc = e
                if attempt < self.policy.retries and self.policy.retryable(response, exc):
                    await asyncio.sleep(self.policy.delay(attempt, response))
                    continue
                if exc is not None:
                    raise UserError(f"cannot reach the service at {self.http.base_url}: {exc}") from None
                return _checked(response)

    async def submit(self, problem: str, **kw) -> int:
        return (await self.submit_batch([request_body(problem, **kw)]))[0]

    async def submit_batch(self, bodies: list[dict]) -> list[int]:
        key = uuid.uuid4().hex
        path = "/v1/evaluations" if len(bodies) == 1 else "/v1/evaluations/batch"
        payload = bodies[0] if len(bodies) == 1 else {"evaluations": bodies}
        return (await self._call("POST", path, json=payload, headers={"Idempotency-Key": key}))["ids"]

    async def job(self, job_id: int, wait_s: float = 0.0) -> dict:
        return await self._call("GET", f"/v1/evaluations/{job_id}", params={"wait": wait_s})

    async def wait(self, job_id: int, timeout_s: float = 4 * 3600.0, poll_s: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout_s
        while True:
            job = await self.job(job_id, wait_s=max(0.0, min(poll_s, deadline - time.monotonic())))
            if job["state"] in ENDED or time.monotonic() >= deadline:
                return job

    async def evaluate(self, problem: str, timeout_s: float = 4 * 3600.0, **kw) -> dict:
        return await self.wait(await self.submit(problem, **kw), timeout_s)

    async def cancel(self, job_id: int) -> dict:
        return await self._call("DELETE", f"/v1/evaluations/{job_id}")

    async def health(self) -> dict:
        return await self._call("GET", "/health")

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()
