"""The typed records of the scheduler: what a submitter asks for (``JobSpec``, ``JobOptions``) and a job's state
in the queue (``Job``).

A submitter chooses the problem, the solution and a few options (``SubmittedOptions``, each bounded); the trusted
side chooses everything else: the seed, the held-out workloads' shapes, the device, the limits, the checks'
strength (``JobOptions`` adds what only its own commands set).
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

State = Literal["queued", "running", "done", "failed", "cancelled"]
ENDED = ("done", "failed", "cancelled")
#: bytes of a problem's or a solution's files a job may carry
MAX_FILES_BYTES = 1 << 20
MAX_FILES = 64


class SubmittedOptions(BaseModel):
    """What any submitter may choose (a service's too): never a check's strength."""

    model_config = ConfigDict(extra="forbid")
    check_only: bool = Field(False, description="correctness and integrity only: no timing, no baselines")
    heldout: int = Field(0, ge=0, le=8, description="extra workloads drawn from the axis ranges with a secret seed; "
                                                    "their shapes are never shown")
    baselines: Optional[list[Literal["eager", "compile", "baseline_file"]]] = Field(
        None, description="baselines to measure (default: all the device has)")
    workloads: Optional[list[str]] = Field(None, max_length=64, description="only these workload uuids")
    single_language: bool = Field(False, description="the solution's own language alone may do the work")

    def job_options(self) -> "JobOptions":
        """The job's options: these, each workload once, and the trusted side's defaults for the rest."""
        wanted = list(dict.fromkeys(self.workloads)) if self.workloads else None
        return JobOptions(**dict(self.model_dump(), workloads=wanted))


class JobOptions(SubmittedOptions):
    """A job's options: the submitter's, and those only the trusted side's own commands (``solbench run``) set."""

    draws: int = Field(5, ge=1, le=20, description="correctness draws per workload")
    profile_dsl: Literal["one", "all", "off"] = Field("one", description="the GPU language proof's workloads")
    hold: bool = Field(True, description="GPU: time the device behind a spin kernel, not the host's launches")
    fresh_baselines: bool = Field(False, description="measure the baselines again instead of reading the cache")


class JobSpec(BaseModel):
    """One evaluation to run: a problem (a bundled name, a directory on this host, or files carried inline), a
    solution (the flashinfer-trace / SOL-ExecBench Solution JSON) and options."""

    model_config = ConfigDict(extra="forbid")
    problem: str = Field(..., min_length=1, max_length=512)
    problem_files: Optional[dict[str, str]] = None
    solution: dict
    options: JobOptions = Field(default_factory=JobOptions)
    run_id: Optional[int] = None
    #: the trusted side's seed (a service derives one per token and seed group, so that attempts compared with
    #: each other meet the same held-out workloads); None: a fresh secret seed
    seed: Optional[int] = None


def spec_for(problem, solution, options: JobOptions, run_id: int | None = None, inline: bool = False) -> JobSpec:
    """The job of evaluating ``solution`` on ``problem``: a bundled problem by name, another by its directory or,
    ``inline`` (a job for another host), by its files."""
    from solbench.problems.problem import bundled_problem_dirs

    directory = problem.directory.resolve()
    bundled = directory in {d.resolve() for d in bundled_problem_dirs()}
    files = None
    if inline and not bundled:
        files = {p.name: p.read_text() for p in sorted(directory.iterdir()) if p.is_file()}
    return JobSpec(problem=problem.name if bundled else str(directory), problem_files=files,
                   solution=solution.model_dump(), options=options, run_id=run_id)


class Job(BaseModel):
    """A job as the queue holds it."""

    id: int
    state: State
    priority: int = 0
    token: Optional[str] = None  # the name of the API token that submitted it
    created: float
    started: Optional[float] = None
    finished: Optional[float] = None
    attempts: int = 0
    owner: Optional[str] = None  # the slot running it
    spec: JobSpec
    peak_bytes: int = 0  # the estimated device memory of its evaluation (admission)
    evaluation_id: Optional[int] = None
    error: Optional[str] = None
    cancel: bool = False
    batch: Optional[str] = None
