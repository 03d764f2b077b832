"""What an evaluation concludes: verdicts, per-workload measurements, the evaluation as a whole."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field


class Verdict(StrEnum):
    """A workload's or an evaluation's verdict, worst first: an evaluation's is the worst of its workloads'. A
    member is its string, so stored results, JSON and comparisons with plain strings read the same."""

    INVALID_REFERENCE = "invalid_reference"
    """The problem's reference failed on the trusted side: nothing can be judged against it."""
    REWARD_HACK = "reward_hack"
    """The solution gamed the harness (its reasons say how): a forged time, tampering, work done elsewhere."""
    COMPILE_ERROR = "compile_error"
    """The solution did not build or load (a compiler's error, a refused compile option, a missing symbol)."""
    TIMEOUT = "timeout"
    """A call did not answer within the workload's time limit."""
    RUNTIME_ERROR = "runtime_error"
    """A call raised, or the candidate's process crashed."""
    INCORRECT_SHAPE = "incorrect_shape"
    """An output has another shape than the reference's."""
    INCORRECT_DTYPE = "incorrect_dtype"
    """An output has another dtype than the reference's."""
    INCORRECT_NUMERICAL = "incorrect_numerical"
    """An output's values are outside the tolerance of the float64 anchor."""
    UNSUPPORTED = "unsupported"
    """This machine cannot judge the solution (its language, toolchain or device is missing); never a pass."""
    PASSED = "passed"
    """Correct on every draw, with a time where one was asked for."""


#: worst first; an evaluation's verdict is the worst of its workloads'
VERDICT_ORDER = tuple(v.value for v in Verdict)
INCORRECT = {"incorrect_shape", "incorrect_dtype", "incorrect_numerical", "reward_hack", "runtime_error",
             "timeout", "compile_error"}


def worst(verdicts: list[str]) -> str:
    if not verdicts:
        return "unsupported"
    return min(verdicts, key=VERDICT_ORDER.index)


class WorkloadResult(BaseModel):
    uuid: str
    label: str | None = None
    axes: dict[str, int] = Field(default_factory=dict)
    verdict: str
    reasons: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    message: str | None = None
    interpreted: bool = False
    # candidate timing (ms)
    time_ms: float | None = None
    iqr_ms: float | None = None
    n_samples: int = 0
    samples_ms: list[float] = Field(default_factory=list)
    wall_ms: list[float] = Field(default_factory=list)
    #: event time of the same wall-time calls, the stream not held (GPU)
    wall_event_ms: list[float] = Field(default_factory=list)
    graph_ms: float | None = None
    graph_error: str | None = None  # why there is no graph time where one was asked for
    #: "cupti" (each sample the span of the call's own device records), "cuda_events" (the interval between
    #: events around it; a fallback, ``timing_notes`` says why) or "wall_clock" (CPU)
    timing_method: str | None = None
    event_time_ms: float | None = None  # with CUPTI: the median event interval of the same samples
    timing_notes: list[str] = Field(default_factory=list)
    stray_records: int = 0  # device records of the solution's launched outside its calls, counted in their time
    event_gaps: int = 0  # CUPTI samples whose event interval held idle time beyond the events' overhead
    clocks: list[dict[str, Any]] = Field(default_factory=list)
    peak_memory_bytes: int | None = None
    dsl_share: float | None = None  # the solution's own DSL kernels' share of device time (when profiled)
    timed_calls: int | None = None  # every call the timing made, warm-up included
    phases: dict[str, float] = Field(default_factory=dict)  # seconds per phase in the trusted worker (``phases``)
    limit_s: float | None = None  # the workload's time limit (``limits``)
    rechecked: int | None = None  # timed calls the trusted side re-checked against the reference
    #: the audit (``audit``): the trusted side's own time per call, from its clock, and how it was taken
    audit_ms: float | None = None
    audit_calls: int | None = None
    audit_group: int | None = None  # calls per bracket (GPU: a group of calls between two stamps)
    audit_method: str | None = None  # "stamps" (GPU: %globaltimer around each group) or "cpu_time" (CPU)
    audit_overhead_ms: float | None = None  # what was subtracted per call (hand-over, own work, gap between calls)
    audit_resolution_ms: float | None = None  # the least disagreement with the timing the audit tells from noise
    audit_looks: int | None = None  # audits made: a second on fresh inputs where the first disagreed with the timing
    # baselines (ms)
    eager_ms: float | None = None
    compile_ms: float | None = None
    baseline_file_ms: float | None = None
    baseline_ms: float | None = None
    baseline: str | None = None  # eager | compile | baseline.py
    # speed of light
    sol_ms: float | None = None
    calibrated_sol_ms: float | None = None
    bound: str | None = None
    flops: dict[str, float] = Field(default_factory=dict)
    bytes: float | None = None
    # scores
    sol_score: float | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_baseline: float | None = None
    # correctness
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    failure: dict[str, Any] | None = None  # seed, draw, worst element


class Evaluation(BaseModel):
    id: int | None = None
    problem: str
    problem_dir: str
    problem_digest: str
    solution: str
    solution_digest: str
    language: str
    author: str | None = None
    hardware: str
    device: str
    device_name: str | None = None
    verdict: str
    reasons: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    findings: list[str] = Field(default_factory=list)  # static analysis, "severity static:rule path:line: what"
    message: str | None = None
    workloads: list[WorkloadResult] = Field(default_factory=list)
    sol_score: float | None = None
    mean_speedup_vs_eager: float | None = None
    fast_p: dict[str, float] = Field(default_factory=dict)
    environment: dict[str, Any] = Field(default_factory=dict)
    seed: int | None = None
    started: str | None = None
    elapsed_s: float | None = None
    #: seconds per phase: the runner's own and the trusted worker's, summed over workloads (``phases``)
    phases: dict[str, float] = Field(default_factory=dict)
    log: str | None = None

    def public(self) -> dict[str, Any]:
        """The `eval --json` object: everything except raw samples and the log."""
        d = self.model_dump(exclude={"log"})
        for w in d["workloads"]:
            w.pop("samples_ms", None)
        return d
