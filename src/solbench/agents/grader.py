"""Grading an agent's sources through the evaluator's public API.

Every submission is a ``Solution`` evaluated by ``solbench.evaluate.runner.evaluate`` in the sandbox, with the
problem's public workloads (what feedback shows) and ``heldout`` extra workloads drawn from the axis ranges with
a seed the agent never sees. The score of a submission (``Graded.score_*``) comes from the held-out workloads
alone, so no feedback ever showed what it is scored on; ``passed`` needs every workload, held-out ones included.

One timed evaluation runs at a time per device: the evaluator holds the device's lease
(``solbench.evaluate.lease``), so attempts that run concurrently, in this process or another, wait for each
other's evaluations and never time kernels side by side.
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

#: the service's answers that refuse a submission itself (no entry file, an unknown language, too large): a
#: verdict on it; any other failure (the network, the token, the service) is not the agent's and is raised
REFUSED = (403, 404, 413, 422)
#: verdicts a workload gets when nothing of the candidate ran on it (its build failed, its language is missing)
NOT_RUN = ("compile_error", "unsupported")


def is_heldout(uuid: str) -> bool:
    return uuid.startswith(HELDOUT_PREFIX)


def graded_from(ev: Any, submission: int, eval_s: float = 0.0, log_chars: int = 4000) -> Graded:
    """A ``Graded`` from an ``Evaluation``: visible workloads as feedback, held-out ones as the score."""
    visible = [w for w in ev.workloads if not is_heldout(w.uuid)]
    hidden = [w for w in ev.workloads if is_heldout(w.uuid)]
    scored = hidden or visible  # a problem without variable axes has nothing to draw: its public workloads score
    passed = ev.verdict == "passed" and bool(ev.workloads) and all(w.verdict == "passed" for w in ev.workloads)
    failing = next((w for w in visible if w.verdict != "passed"), None)
    hidden_failing = next((w for w in hidden if w.verdict != "passed"), None)
    # what a held-out workload's run printed or failed with may name its shapes: the log only while none ran,
    # and a held-out failure by its verdict alone
    from solbench.evaluate.runner import TRUSTED_LOG

    # and the candidate's own output only: the trusted worker's log is the trusted side's
    log = (ev.log or "").split(TRUSTED_LOG)[0] if not any(w.verdict not in NOT_RUN for w in hidden) else ""
    message = (failing.message if failing else
               f"a held-out workload: {hidden_failing.verdict}" if hidden_failing else ev.message)
    return Graded(
        submission=submission, solution_digest=ev.solution_digest, language=ev.language, verdict=ev.verdict,
        reasons=list(ev.reasons), message=message,
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
            ev = evaluate(self.problem, solution, opts, store=self._store())
        except UserError as exc:  # an unsupported language, say: a verdict on the submission, not a crash
            return Graded(submission=self.count, solution_digest=solution.digest(), language=language,
                          verdict="unsupported", reasons=["unsupported_language"], message=str(exc)[:300])
        self.evaluations.append(ev)
        return graded_from(ev, self.count, time.perf_counter() - t0)


class RemoteGrader:
    """Grades submissions to one problem through ``solbench serve`` (``--server``): the service's scheduler runs
    them on its devices, and answers only what feedback may show. ``group`` names the held-out workloads:
    attempts with one group (the arms of a transfer experiment on one problem and replicate) meet the same ones,
    drawn from a seed only the service knows. The token comes from SOLBENCH_TOKEN."""

    def __init__(self, problem: Any, options: Any, server: str, group: str, heldout: int = 3,
                 entry: str = "run", dps: bool = True, client: Any = None, timeout_s: float = 4 * 3600.0):
        import os

        from solbench.client import Client

        self.problem, self.options, self.group, self.heldout = problem, options, group, heldout
        self.entry, self.dps, self.timeout_s = entry, dps, timeout_s
        self.client = client or Client(server, os.environ.get("SOLBENCH_TOKEN"))
        self.count = 0

    def grade(self, files: dict[str, str], language: str, entry: str | None = None) -> Graded:
        self.count += 1
        entry_file = entry or next((p for p, text in files.items() if f"def {self.entry}(" in text), None) \
            or next(iter(files), None)  # as EvalGrader: the first file, whose missing entry is the verdict
        options = {"heldout": self.heldout, "single_language": self.options.single_language,
                   "check_only": not self.options.time_candidate,
                   **({"baselines": list(self.options.baselines)} if self.options.baselines is not None else {})}
        body = {"problem": self.problem.name, "sources": files, "language": language, **self._upload(),
                "destination_passing_style": self.dps, "seed_group": self.group, "options": options,
                **({"entry_point": f"{entry_file}::{self.entry}"} if entry_file else {})}
        t0 = time.perf_counter()
        try:
            job_id = self.client.submit_batch([body])[0]
        except UserError as exc:
            if getattr(exc, "status", None) not in REFUSED:  # the service or the network failed: not the agent's
                raise
            return Graded(submission=self.count, solution_digest="", language=language, verdict="compile_error",
                          reasons=["bad_submission"], message=str(exc)[:300])
        job = self.client.wait(job_id, timeout_s=self.timeout_s)
        if job.get("state") not in ("done", "failed", "cancelled"):
            self.client.cancel(job_id)  # not left running on the service past the attempt's patience
        return graded_from_service(job, self.count, language, time.perf_counter() - t0)

    def _upload(self) -> dict:
        """A problem the service does not bundle travels with the submission (its token needs --uploads)."""
        from solbench.problems.problem import bundled_problem_dirs

        directory = self.problem.directory.resolve()
        if directory in {d.resolve() for d in bundled_problem_dirs()}:
            return {}
        return {"problem_files": {p.name: p.read_text() for p in sorted(directory.iterdir()) if p.is_file()}}


def graded_from_service(job: dict, submission: int, language: str, eval_s: float = 0.0) -> Graded:
    """A ``Graded`` from the service's answer for one job (a job the service could not evaluate: runtime_error)."""
    r = job.get("result")
    if job.get("state") != "done" or not r:
        return Graded(submission=submission, solution_digest="", language=language, verdict="runtime_error",
                      reasons=["service_failed"], message=f"{job.get('state')}: {job.get('error') or ''}"[:300],
                      eval_s=eval_s)
    visible = [WorkloadFeedback(**{k: w.get(k) for k in ("uuid", "label", "verdict", "time_ms", "sol_ms", "bound",
                                                          "sol_score", "baseline_ms", "max_abs_err", "failure")},
                                reasons=w.get("reasons") or []) for w in r.get("workloads") or []]
    passed = bool(r.get("passed"))
    return Graded(submission=submission, solution_digest=r.get("solution_digest") or "", language=r["language"],
                  verdict=r["verdict"], reasons=r.get("reasons") or [], message=r.get("message"),
                  log_tail=r.get("log_tail"), visible=visible, passed=passed,
                  score_sol=r.get("sol_score") if passed else 0.0, score_speedup=r.get("speedup") if passed else None,
                  evaluation_id=r.get("evaluation_id"), eval_s=eval_s)
