"""The messages between the trusted worker and a candidate's process, as the trusted side accepts them.

Every command carries a fresh nonce, and the one reply it gets must echo it, have exactly the fields its type
allows with the types they must have, and come alone: a reply that does not match the trusted side's record of
the exchange (another nonce, another type, an unknown field, a second line) is ``result_forgery``. The reply
descriptor is the candidate's, so this proves nothing about what the candidate's process did; it keeps a
solution from speaking for the harness without also replacing it, and every value a reply carries is then
cross-checked or bounded by the trusted side (``subjects``).
"""

from __future__ import annotations

import secrets
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError


def nonce() -> str:
    return secrets.token_hex(8)


class _Reply(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False)
    nonce: str
    codes: list[str] = Field(default_factory=list, max_length=32)
    harness: str | None = None
    failed: dict[str, Any] | None = None
    lost: bool = False


class Ready(_Reply):
    type: Literal["ready"]
    #: None: the system-call filter is installed; else why it could not be (checked from outside: ``outside``)
    seccomp: str | None = Field(default=None, max_length=400)


class Fatal(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["fatal"]
    nonce: str | None = None
    message: str = ""


class Called(_Reply):
    type: Literal["called"]
    outputs: list[dict[str, Any]] = Field(default_factory=list, max_length=64)
    count: int = 0
    peak_memory_bytes: int | None = None
    dsl_stores: int | None = Field(default=None, ge=0)
    #: with profiling: [kernel name, device microseconds] per distinct kernel (``integrity.language.by_name``)
    kernels: list[list[Any]] = Field(default_factory=list, max_length=256)


class CallResult(BaseModel):
    """One call's result in a ``called_batch`` reply: a ``called`` reply's fields of that call, and its own codes."""

    model_config = ConfigDict(extra="forbid", strict=False)
    codes: list[str] = Field(default_factory=list, max_length=32)
    failed: dict[str, Any] | None = None
    lost: bool = False
    outputs: list[dict[str, Any]] = Field(default_factory=list, max_length=64)
    count: int = 0
    peak_memory_bytes: int | None = None
    dsl_stores: int | None = Field(default=None, ge=0)
    kernels: list[list[Any]] = Field(default_factory=list, max_length=256)


#: the most calls one ``calls`` command asks for (a workload's checked draws, the repeat call, the ghost replay's)
MAX_BATCH = 16


class CalledBatch(_Reply):
    """The reply to ``calls``: the calls' results in the order asked, up to the first that failed or has codes of
    its own; the process's own checks (codes, harness digest) once, after the last."""

    type: Literal["called_batch"]
    results: list[CallResult] = Field(default_factory=list, max_length=MAX_BATCH)


class Timed(_Reply):
    type: Literal["timed"]
    samples_ms: list[float] = Field(default_factory=list)
    wall_ms: list[float] = Field(default_factory=list)
    wall_event_ms: list[float] = Field(default_factory=list)
    unjoined_ms: list[float] = Field(default_factory=list)
    event_ms: list[float] = Field(default_factory=list)
    method: Literal["cupti", "cuda_events", "wall_clock"] = "cuda_events"
    clock_note: str | None = Field(default=None, max_length=400)
    stray: int = Field(default=0, ge=0)
    l2_guarded: bool = False
    t_begin: float | None = None
    t_end: float | None = None
    refused: bool = False


class Graphed(_Reply):
    type: Literal["graphed"]
    graph_ms: float | None = None
    graph_error: str | None = None


class AuditReady(_Reply):
    type: Literal["audit_ready"]


class Audited(_Reply):
    type: Literal["audited"]
    refused: bool = False


_TYPES = {"ready": Ready, "audit_ready": AuditReady, "audited": Audited, "called": Called,
          "called_batch": CalledBatch, "timed": Timed, "graphed": Graphed, "fatal": Fatal}


class Forged(Exception):
    """A reply the trusted side's record of the exchange does not allow."""


def accept(msg: dict[str, Any], expected: str, sent_nonce: str, alone: bool = True) -> BaseModel:
    """The reply as a checked model, or ``Forged`` with the reason."""
    kind = msg.get("type")
    if kind == "garbled":
        raise Forged(f"an unreadable reply line: {str(msg.get('text'))[:120]}")
    allowed = (expected, "fatal") if expected == "ready" else (expected,)
    if kind not in allowed:
        raise Forged(f"a {kind!r} reply to a command that expects {expected!r}")
    try:
        reply = _TYPES[kind].model_validate(msg)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise Forged(f"a malformed {kind} reply: {'.'.join(str(x) for x in first['loc'])}: {first['msg']}") from None
    if getattr(reply, "nonce", None) != sent_nonce:
        raise Forged("a reply that answers another command (its nonce does not match)")
    if not alone:
        raise Forged("more than one reply to one command")
    return reply
