"""The service's requests and responses (the OpenAPI schema is made from these).

A response tells a submitter what feedback may show: the public workloads' results, and the held-out ones only
in aggregate (their count, how many passed, their SOL score and speedup). No seed, no held-out shape or message,
no log of a run that reached a held-out workload, and nothing of the trusted side's environment.
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

from solbench.schedule.jobs import State, SubmittedOptions

MAX_BATCH = 256


class EvaluationRequest(BaseModel):
    """One evaluation: a problem (a bundled name, or its files), and a solution (a Solution JSON, or its sources
    with a language and an entry point)."""

    model_config = ConfigDict(extra="forbid")
    problem: str = Field(..., min_length=1, max_length=128, description="a bundled problem's name, or a name for "
                                                                         "the uploaded problem_files")
    problem_files: Optional[dict[str, str]] = Field(
        None, description="an uploaded problem: definition.json, reference.py, workload.jsonl (and baseline.py)")
    solution: Optional[dict] = Field(None, description="a Solution JSON (flashinfer-trace / SOL-ExecBench schema)")
    sources: Optional[dict[str, str]] = Field(None, description="the solution's files, path -> text")
    language: Optional[str] = Field(None, max_length=32)
    entry_point: Optional[str] = Field(None, max_length=256, description="file::function (default: the file that "
                                                                         "defines run, ::run)")
    destination_passing_style: bool = True
    options: SubmittedOptions = Field(default_factory=SubmittedOptions)
    seed_group: Optional[str] = Field(None, max_length=128, description="submissions of one token and group meet "
                                                                        "the same held-out workloads")

    @model_validator(mode="after")
    def _one_solution(self) -> "EvaluationRequest":
        if (self.solution is None) == (self.sources is None):
            raise ValueError("give either solution or sources")
        if self.sources is not None and not self.language:
            raise ValueError("sources need a language")
        return self


class BatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    evaluations: list[EvaluationRequest] = Field(..., min_length=1, max_length=MAX_BATCH)


class Submitted(BaseModel):
    ids: list[int]


class WorkloadView(BaseModel):
    uuid: str
    label: Optional[str] = None
    verdict: str
    reasons: list[str] = Field(default_factory=list)
    message: Optional[str] = None
    time_ms: Optional[float] = None
    baseline_ms: Optional[float] = None
    sol_ms: Optional[float] = None
    bound: Optional[str] = None
    sol_score: Optional[float] = None
    max_abs_err: Optional[float] = None
    failure: Optional[dict] = Field(None, description="the worst element of a failed comparison")


class HeldoutView(BaseModel):
    count: int = 0
    passed: int = 0
    sol_score: Optional[float] = None
    speedup: Optional[float] = None


class ResultView(BaseModel):
    evaluation_id: int
    problem: str
    solution: str
    solution_digest: str
    language: str
    verdict: str
    passed: bool
    reasons: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    message: Optional[str] = None
    log_tail: Optional[str] = None
    sol_score: Optional[float] = Field(None, description="over the held-out workloads where any were drawn, else "
                                                         "over the public ones")
    speedup: Optional[float] = None
    workloads: list[WorkloadView] = Field(default_factory=list, description="the public workloads")
    heldout: HeldoutView = Field(default_factory=HeldoutView)
    elapsed_s: Optional[float] = None


class JobView(BaseModel):
    id: int
    state: State
    created: float
    started: Optional[float] = None
    finished: Optional[float] = None
    attempts: int = 0
    error: Optional[str] = None
    result: Optional[ResultView] = None


class SlotView(BaseModel):
    device: str
    state: Literal["starting", "idle", "running", "down"]
    job: Optional[int] = None
    restarts: int = 0


class Refusal(BaseModel):
    """Why a request was refused (4xx)."""

    detail: str


def refusals(*codes: int) -> dict:
    """The refusals a route may answer, for the OpenAPI schema."""
    why = {401: "no valid token", 403: "the token may not do this", 404: "no such problem or evaluation",
           411: "no Content-Length", 413: "too large", 422: "not a valid request", 429: "rate limit or quota"}
    return {c: {"model": Refusal, "description": why[c]} for c in codes}


class Health(BaseModel):
    status: Literal["ok", "degraded"]
    hardware: str = Field(..., description="the chip evaluations run on (solbench hardware's id)")
    slots: dict[str, SlotView]
    queue: dict[str, int]
