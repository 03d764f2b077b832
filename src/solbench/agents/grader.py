"""Grading an agent's sources through the evaluator's public API.

Every submission is a ``Solution`` evaluated by ``solbench.evaluate.runner.evaluate`` in the sandbox, with the
problem's public workloads (what feedback shows) and ``heldout`` extra workloads drawn from the axis ranges with
a seed the agent never sees. The score of a submission (``Graded.score_*``) comes from the held-out workloads
alone, so no feedback ever showed what it is scored on; ``passed`` needs every workload, held-out ones included.

One timed GPU evaluation runs at a time per device: ``grade`` holds the device's lock, so attempts that run
concurrently wait for each other's evaluations and never time kernels side by side.
"""

from __future__ import annotations

import dataclasses
import secrets
import threading
import time
from typing import Any

from solbench.agents.types import Graded, WorkloadFeedback
from solbench.analysis.heldout import HELDOUT_PREFIX
from solbench.errors import UserError
from solbench.problems.solution import BuildSpec, Solution, SourceFile
from solbench.records import scoring

_device_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def device_lock(device: str) -> threading.Lock:
    """The lock every timed evaluation on ``device`` holds (one GPU evaluation at a time per GPU)."""
    with _locks_guard:
        return _device_locks.setdefault(device, threading.Lock())


def is_heldout(uuid: str) -> bool:
    return uuid.startswith(HELDOUT_PREFIX)


def graded_from(ev: Any, submission: int, eval_s: float = 0.0, log_chars: int = 4000) -> Graded:
    """A ``Graded`` from an ``Evaluation``: visible workloads as feedback, held-out ones as the score."""
    visible = [w for w in ev.workloads if not is_heldout(w.uuid)]
    hidden = [w for w in ev.workloads if is_heldout(w.uuid)]
    scored = hidden or visible  # a problem without variable axes has nothing to draw: its public workloads score
    passed = ev.verdict == "passed" and bool(ev.workloads) and all(w.verdict == "passed" for w in ev.workloads)
    failing = next((w for w in visible if w.verdict != "passed"), None)
    log = ev.log or ""
    return Graded(
        submission=submission, solution_digest=ev.solution_digest, language=ev.language, verdict=ev.verdict,
        reasons=list(ev.reasons), message=(failing.message if failing else ev.message),
        log_tail=log[-log_chars:] if (failing is not None or not ev.workloads) and log.strip() else None,
        visible=[WorkloadFeedback(uuid=w.uuid, label=w.label, verdict=w.verdict, reasons=list(w.reasons),
                                  time_ms=w.time_ms, sol_ms=w.sol_ms, bound=w.bound, sol_score=w.sol_score,
                                  baseline_ms=w.baseline_ms, max_abs_err=w.max_abs_err, failure=w.failure)
                 for w in visible],
        passed=passed,
        score_sol=scoring.aggregate(scored) if passed else 0.0,
        score_speedup=scoring.geomean([w.speedup_vs_baseline for w in scored]) if passed else None,
        heldout_speedups=[w.speedup_vs_baseline for w in scored if w.speedup_vs_baseline is not None],
        evaluation_id=ev.id, eval_s=eval_s)


class EvalGrader:
    """Grades submissions to one problem, for one attempt or for several that must be scored alike.

    ``seed`` fixes the held-out workloads (and the run's input draws): attempts compared with each other, such
    as the arms of a transfer experiment, share one grader seed per problem. It is secret from the agent."""

    def __init__(self, problem: Any, options: Any, store: Any = None, heldout: int = 3, seed: int | None = None,
                 author: str = "agent", entry: str = "run", dps: bool = True, label: str = "agent"):
        self.problem = problem
        self.options = options
        self.store = store
        self.heldout = heldout
        self.seed = seed if seed is not None else secrets.randbits(63)
        self.author = author
        self.entry = entry
        self.dps = dps
        self.label = label
        self.count = 0
        self.evaluations: list[Any] = []
        self._owner = threading.get_ident()
        self._stores: dict[int, Any] = {}

    def _store(self) -> Any:
        """The store for this thread: SQLite connections stay in the thread that opened them (an external
        agent's submissions are graded in the scaffold's server thread)."""
        if self.store is None or threading.get_ident() == self._owner:
            return self.store
        from solbench.store.db import Store

        return self._stores.setdefault(threading.get_ident(), Store(self.store.path))

    def solution(self, files: dict[str, str], language: str, entry: str | None = None) -> Solution:
        entry_file = entry or next((p for p, text in files.items() if f"def {self.entry}(" in text), None) \
            or next(iter(files), "solution.py")
        return Solution(name=f"{self.label}-{self.count}", definition=self.problem.name, author=self.author,
                        spec=BuildSpec(language=language, entry_point=f"{entry_file}::{self.entry}",
                                       destination_passing_style=self.dps),
                        sources=[SourceFile(path=p, content=t) for p, t in files.items()] or
                        [SourceFile(path=entry_file, content="")])

    def grade(self, files: dict[str, str], language: str, entry: str | None = None) -> Graded:
        from solbench.evaluate.runner import evaluate

        self.count += 1
        try:
            solution = self.solution(files, language, entry)
        except ValueError as exc:  # no entry file among the sources, a path outside the solution
            return Graded(submission=self.count, solution_digest="", language=language, verdict="compile_error",
                          reasons=["bad_submission"], message=str(exc).splitlines()[-1][:300])
        opts = dataclasses.replace(self.options, seed=self.seed, heldout=self.heldout, progress=None)
        t0 = time.perf_counter()
        try:
            with device_lock(opts.device):
                ev = evaluate(self.problem, solution, opts, store=self._store())
        except UserError as exc:  # an unsupported language, say: a verdict on the submission, not a crash
            return Graded(submission=self.count, solution_digest=solution.digest(), language=language,
                          verdict="unsupported", reasons=["unsupported_language"], message=str(exc)[:300])
        self.evaluations.append(ev)
        return graded_from(ev, self.count, time.perf_counter() - t0)
