"""A static reject: the verdict of a solution the static scan rejects, made before anything of it runs.

``static_findings`` scans the solution's sources under the problem's policy (``integrity.static``); a finding of
reject severity makes every selected workload ``reward_hack`` with the rule as its reason (``static:<rule>``),
and the evaluation is stored like any other.
"""

from __future__ import annotations

import time
from typing import Any

from solbench.hardware.platform import detect_platform
from solbench.problems.problem import Problem
from solbench.problems.solution import Solution
from solbench.records.verdict import Evaluation, WorkloadResult


def static_findings(problem: Problem, solution: Solution, language: str, single: bool = False) -> list:
    """The static scan's findings on the solution's sources, under the problem's policy (``single``: the
    one-language rule)."""
    from solbench.evaluate.integrity.static import Policy, scan_sources

    pol = problem.definition.policy
    policy = Policy(allow=frozenset(pol.allow) if pol else frozenset(),
                    forbid_calls=frozenset(pol.forbid_calls) if pol else frozenset(), single_language=single)
    return scan_sources([(s.path, s.content) for s in solution.sources], language, policy)


def rejected_statically(problem: Problem, solution: Solution, language: str, opts: Any, uuids: list[str],
                        findings: list, seed: int, started: str, t0: float, store, run_id) -> Evaluation:
    """A static reject: nothing of the solution runs; every workload gets the verdict (``opts``: the runner's
    options, for the hardware and the device)."""
    reasons = sorted({f"static:{f.rule}" for f in findings if f.severity == "reject"})
    first = next(f for f in findings if f.severity == "reject")
    message = f"{first.path}:{first.line}: {first.message}"
    results = [WorkloadResult(uuid=u, label=problem.workload(u).label, axes=problem.definition.resolve_axes(
        problem.workload(u).axes), verdict="reward_hack", reasons=reasons, message=message, sol_score=0.0)
        for u in uuids]
    ev = Evaluation(
        problem=problem.name, problem_dir=str(problem.directory), problem_digest=problem.digest(),
        solution=solution.name, solution_digest=solution.digest(), language=language, author=solution.author,
        hardware=opts.hardware.id, device=opts.device, verdict="reward_hack", reasons=reasons,
        warnings=sorted({f"static:{f.rule}" for f in findings if f.severity != "reject"}),
        findings=[f"{f.severity} static:{f.rule} {f.path}:{f.line}: {f.message}" for f in findings],
        message=message, workloads=results, seed=seed, started=started, sol_score=0.0,
        environment={"device": opts.device, "platform": detect_platform(opts.device).record()},
        elapsed_s=time.perf_counter() - t0)
    if store is not None:
        store.add_evaluation(ev, solution.model_dump_json(), run_id)
    return ev

