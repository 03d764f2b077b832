"""Named suites of bundled problems and filters over them."""

from __future__ import annotations

from solbench.errors import UserError
from solbench.problems.problem import Problem, bundled_problem_dirs, load_problem

#: suites by name; a family name or `source:<s>` also works as a suite
SUITES = ("starter", "full")


def all_problems() -> list[Problem]:
    return [load_problem(d) for d in bundled_problem_dirs()]


def select_problems(suite: str = "starter", family: str | None = None, tags: list[str] | None = None) -> list[Problem]:
    problems = all_problems()
    families = sorted({p.family for p in problems})
    if suite in SUITES:
        # every bundled problem carries the tag of the smallest suite it belongs to; starter is in full
        if suite == "starter":
            problems = [p for p in problems if "suite:starter" in p.definition.tags or not p.definition.tag_value("suite")]
    elif suite in families:
        problems = [p for p in problems if p.family == suite]
    elif ":" in suite:
        problems = [p for p in problems if suite in p.definition.tags]
    else:
        raise UserError(f"unknown suite {suite!r}; known: {', '.join(SUITES + tuple(families))}, or a tag such as source:aten")
    if family:
        if family not in families:
            raise UserError(f"unknown family {family!r}; known: {', '.join(families)}")
        problems = [p for p in problems if p.family == family]
    for tag in tags or []:
        problems = [p for p in problems if tag in p.definition.tags or any(t.startswith(tag) for t in p.definition.tags)]
    return problems
