"""The trusted worker's report of one workload, as the runner reads it (``verdict.decision.judge``).

The worker sends it as one JSON line; the keeper validates it into a ``WorkloadReport`` before anything reads it,
and a line that does not validate becomes a ``result_forgery`` report (a candidate that reached the worker's pipe
could write one). Fields the runner does not read are dropped; every field read has a type and a default.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from solbench.records.verdict import VERDICT_ORDER


class WorkloadReport(BaseModel):
    model_config = ConfigDict(extra="ignore")

    uuid: str
    subject: int | None = 0  # which of the job's subjects (0: the solution; baselines count from 0 too)
    verdict: str
    reasons: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)  # only those ``records.reasons`` lets the worker set are kept
    message: str | None = None
    failure: dict[str, Any] | None = None  # the failing draw (its seed) for a replay
    interpreted: bool = False
    # correctness
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    peak_memory_bytes: int | None = None
    limit_s: float | None = None
    # the language proof
    profiled: bool = False
    dsl_share: float | None = None
    # timing
    samples_ms: list[float] = Field(default_factory=list)
    wall_ms: list[float] = Field(default_factory=list)
    wall_event_ms: list[float] = Field(default_factory=list)
    event_ms: list[float | None] = Field(default_factory=list)
    unjoined_ms: list[float | None] = Field(default_factory=list)
    graph_ms: float | None = None
    graph_error: str | None = None
    timing_method: str | None = None
    clock_notes: list[str] = Field(default_factory=list)
    clocks: list[dict[str, Any]] = Field(default_factory=list)
    timed_calls: int | None = None
    rechecked: int | None = None
    stray_records: int = 0
    event_gaps: int = 0
    phases: dict[str, float] = Field(default_factory=dict)
    # the audit
    audit_ms: float | None = None
    audit_calls: int | None = None
    audit_group: int | None = None
    audit_method: str | None = None
    audit_overhead_ms: float | None = None
    audit_resolution_ms: float | None = None
    audit_unconfirmed: str | None = None
    audit_looks: int | None = None

    @field_validator("verdict")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in VERDICT_ORDER:
            raise ValueError(f"unknown verdict {v!r}")
        return v

    @field_validator("samples_ms", "wall_ms", "wall_event_ms", mode="before")
    @classmethod
    def _plausible(cls, v: Any) -> Any:
        if v is None:
            return []
        if isinstance(v, list) and any(isinstance(x, (int, float)) and (not (x >= 0) or x != x) for x in v):
            raise ValueError("negative or NaN time")
        return v

    @field_validator("event_ms", "unjoined_ms", "clock_notes", "clocks", "reasons", "warnings", mode="before")
    @classmethod
    def _none_is_empty(cls, v: Any) -> Any:
        return [] if v is None else v

    @field_validator("stray_records", "event_gaps", "interpreted", "profiled", mode="before")
    @classmethod
    def _none_is_zero(cls, v: Any) -> Any:
        return 0 if v is None else v

    @field_validator("phases", mode="before")
    @classmethod
    def _numbers_only(cls, v: Any) -> Any:
        if not isinstance(v, dict):
            return {}
        return {k: x for k, x in v.items() if isinstance(x, (int, float))}

    @field_validator("limit_s", mode="before")
    @classmethod
    def _a_number(cls, v: Any) -> Any:
        return v if isinstance(v, (int, float)) else None

    @classmethod
    def failed(cls, uuid: str, verdict: str, reasons: list[str], message: str | None = None) -> WorkloadReport:
        """A report the runner's side writes itself: no result came from the worker, or nothing could run."""
        return cls(uuid=uuid, verdict=verdict, reasons=reasons, message=message)
