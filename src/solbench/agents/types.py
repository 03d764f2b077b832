"""The data every agent module shares: messages, token usage, budgets and graded submissions.

Schema first: providers, the loop, external scaffolds, the trajectory store and the metrics all read and write
these models, so a trajectory written by one tool is read by every other.
"""
from __future__ import annotations

import time
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field


class ToolCall(BaseModel):
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Message(BaseModel):
    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)  # on assistant messages
    tool_call_id: str | None = None  # on tool messages: which call this answers
    name: str | None = None  # on tool messages: the tool's name


class Usage(BaseModel):
    """Tokens of one or more model calls. ``cached`` input tokens are part of ``input``, billed at their own rate."""
    input: int = 0
    cached: int = 0
    output: int = 0

    @property
    def total(self) -> int:
        return self.input + self.output

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(input=self.input + other.input, cached=self.cached + other.cached,
                     output=self.output + other.output)


class Price(BaseModel):
    """US dollars per million tokens."""
    input: float = 0.0
    cached: float = 0.0
    output: float = 0.0

    def cost(self, u: Usage) -> float:
        fresh = max(0, u.input - u.cached)
        return (fresh * self.input + u.cached * self.cached + u.output * self.output) / 1e6


class Reply(BaseModel):
    """One model call's answer."""
    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: str | None = None  # "stop", "length" (truncated), "tool_calls", ...
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float = 0.0
    model: str | None = None
    latency_s: float = 0.0
    raw: dict[str, Any] | None = None  # the provider's response body, for the trajectory


class Tool(BaseModel):
    """A function the model may call (tool-calling mode), JSON-schema parameters."""
    name: str
    description: str
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class Provider(Protocol):
    """A chat model. Implementations raise ``ProviderError`` (one clear line) for what a user must fix."""
    name: str

    def complete(self, messages: list[Message], tools: list[Tool] | None = None) -> Reply: ...


class Budget(BaseModel):
    """Limits on one attempt; ``None`` means no limit. Every arm of an experiment gets the same one."""
    attempts: int | None = 10  # model turns
    submissions: int | None = 10  # graded evaluations
    tokens: int | None = None
    usd: float | None = None
    wall_s: float | None = None


class Spent(BaseModel):
    """What an attempt has used so far."""
    attempts: int = 0
    submissions: int = 0
    usage: Usage = Field(default_factory=Usage)
    usd: float = 0.0
    started: float = Field(default_factory=time.time)

    def wall_s(self) -> float:
        return time.time() - self.started

    def exhausted(self, b: Budget) -> str | None:
        """The first limit reached, by name, or None."""
        if b.attempts is not None and self.attempts >= b.attempts:
            return "attempts"
        if b.submissions is not None and self.submissions >= b.submissions:
            return "submissions"
        if b.tokens is not None and self.usage.total >= b.tokens:
            return "tokens"
        if b.usd is not None and self.usd >= b.usd:
            return "usd"
        if b.wall_s is not None and self.wall_s() >= b.wall_s:
            return "wall_s"
        return None


class WorkloadFeedback(BaseModel):
    """What a kernel engineer is told about one visible workload."""
    uuid: str
    label: str | None = None
    verdict: str
    reasons: list[str] = Field(default_factory=list)
    time_ms: float | None = None
    sol_ms: float | None = None
    bound: str | None = None
    sol_score: float | None = None
    baseline_ms: float | None = None
    max_abs_err: float | None = None
    failure: dict[str, Any] | None = None


class Graded(BaseModel):
    """One graded submission. ``visible`` is what feedback may show; ``score_*`` come from the held-out
    workloads alone, which no feedback ever shows."""
    submission: int
    solution_digest: str
    language: str
    verdict: str  # over every workload, held-out ones included
    reasons: list[str] = Field(default_factory=list)
    message: str | None = None
    log_tail: str | None = None  # compile errors and tracebacks (the candidate's log, trimmed)
    visible: list[WorkloadFeedback] = Field(default_factory=list)
    passed: bool = False  # every workload, held-out included, passed
    score_sol: float | None = None  # mean SOL score over the held-out workloads
    score_speedup: float | None = None  # geometric mean speedup over the baseline, held-out workloads
    heldout_speedups: list[float] = Field(default_factory=list)
    evaluation_id: int | None = None
    eval_s: float = 0.0


def submission_rank(g: Graded) -> tuple:
    """How submissions compare: passed first (an ``unsupported`` verdict never counts as one), then the held-out
    SOL score, then the held-out speedup."""
    return g.passed and g.verdict == "passed", *(float("-inf") if x is None else x for x in (g.score_sol, g.score_speedup))


class Grader(Protocol):
    """Grades a candidate's sources through the evaluator's public API."""

    def grade(self, files: dict[str, str], language: str, entry: str | None = None) -> Graded: ...
