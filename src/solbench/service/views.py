"""What the service reads from requests and shows in responses: the problem and solution of a request, and an
evaluation as its submitter may see it (``result_view``: the public workloads, the held-out ones in aggregate)."""

from __future__ import annotations

from functools import lru_cache

from solbench.errors import UserError
from solbench.records.verdict import Evaluation
from solbench.schedule import slot
from solbench.service.schemas import EvaluationRequest, HeldoutView, ResultView, WorkloadView


@lru_cache(maxsize=1)
def _bundled() -> dict[str, str]:
    """Bundled problems: name -> directory."""
    import json

    from solbench.problems.problem import bundled_problem_dirs

    out = {}
    for d in bundled_problem_dirs():
        out[d.name] = str(d)
        name = json.loads((d / "definition.json").read_text()).get("name")
        if name:
            out.setdefault(name, str(d))
    return out


@lru_cache(maxsize=512)
def load(directory: str):
    """A problem by its directory, loaded once."""
    from solbench.problems.problem import load_problem

    return load_problem(directory)


def request_problem(req: EvaluationRequest):
    """The request's problem: uploaded files (written once by digest), or a bundled problem by name (a path of
    this host is never read)."""
    if req.problem_files is not None:
        return load(str(slot.materialize(req.problem_files)))
    return bundled_problem(req.problem)


def bundled_problem(name: str):
    directory = _bundled().get(name)
    if directory is None:
        raise UserError(f"unknown problem {name!r}: GET /v1/problems lists them")
    return load(directory)


def request_solution(req: EvaluationRequest, problem, author: str):
    """The request's solution, checked: its schema, its language, its size."""
    from pydantic import ValidationError

    from solbench.evaluate.languages import get_language
    from solbench.problems.solution import BuildSpec, Solution, SourceFile

    try:
        if req.solution is not None:
            solution = Solution.model_validate(req.solution)
        else:
            files = req.sources or {}
            slot.check_files(files, "solution", plain=False)
            entry = req.entry_point or next((f"{p}::run" for p, t in files.items() if "def run(" in t), None)
            if entry is None:
                raise UserError("no entry_point given and no source defines run(...)")
            solution = Solution(name=f"{author}-submission", definition=problem.name, author=author,
                                spec=BuildSpec(language=req.language, entry_point=entry,
                                               destination_passing_style=req.destination_passing_style),
                                sources=[SourceFile(path=p, content=t) for p, t in files.items()])
    except (ValidationError, ValueError) as exc:
        first = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        raise UserError(f"solution: {first}") from None
    get_language(solution.language)  # an unknown language: a UserError naming the known ones
    slot.check_files({f.path: f.content for f in solution.sources}, "solution", plain=False)
    return solution


def result_view(ev: Evaluation) -> ResultView:
    """The evaluation as its submitter may see it (``agents.grader.graded_from`` decides what may be shown)."""
    from solbench.agents.grader import graded_from, is_heldout

    g = graded_from(ev, 0)
    hidden = [w for w in ev.workloads if is_heldout(w.uuid)]
    return ResultView(
        evaluation_id=ev.id or 0, problem=ev.problem, solution=ev.solution, solution_digest=ev.solution_digest,
        language=ev.language,
        verdict=ev.verdict, passed=g.passed, reasons=g.reasons,
        warnings=list(ev.warnings),
        message=g.message, log_tail=g.log_tail, sol_score=g.score_sol, speedup=g.score_speedup,
        workloads=[WorkloadView(uuid=w.uuid, label=w.label, verdict=w.verdict, reasons=w.reasons,
                                message=next((x.message for x in ev.workloads if x.uuid == w.uuid), None),
                                time_ms=w.time_ms, baseline_ms=w.baseline_ms, sol_ms=w.sol_ms, bound=w.bound,
                                sol_score=w.sol_score, max_abs_err=w.max_abs_err, failure=_unseeded(w.failure))
                   for w in g.visible],
        heldout=HeldoutView(count=len(hidden), passed=sum(w.verdict == "passed" for w in hidden),
                            sol_score=g.score_sol if hidden else None, speedup=g.score_speedup if hidden else None),
        elapsed_s=ev.elapsed_s)


def _unseeded(failure: dict | None) -> dict | None:
    """A failed comparison's worst element and draw, without the draw's seed (the trusted side's)."""
    return None if failure is None else {k: v for k, v in failure.items() if k != "seed"}


def public_error(error: str | None) -> str | None:
    """A failed job's error as its submitter sees it: the first line (no trusted-side traceback)."""
    return error.strip().splitlines()[0][:500] if error and error.strip() else error


def problem_list() -> list[dict]:
    out = []
    for name, directory in sorted(_bundled().items()):
        if name != directory.rsplit("/", 1)[-1]:
            continue  # a definition name that differs from its folder's: listed once, by folder
        p = load(directory)
        out.append({"name": name, "family": p.family, "workloads": len(p.workloads),
                    "description": (p.definition.description or "")[:300]})
    return out


def on_end(metrics):
    """The scheduler's hook as each job ends: its wait, its run, its evaluation's phases and what its environment
    says of the trusted worker into the metrics."""
    import json
    import time

    def hook(slot_, job, out) -> None:
        now = time.time()
        evaluation = json.loads(out.evaluation) if out.kind == "result" and out.evaluation else {}
        metrics.job_ended(max(0.0, (job.started or now) - job.created), now - (job.started or now),
                          evaluation.get("phases") or {}, evaluation.get("environment") or {})

    return hook
