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
        # starter problems carry the tag suite:starter; full is every bundled problem
        if suite == "starter":
            problems = [p for p in problems if "suite:starter" in p.definition.tags]
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
        if ":" in tag:  # key:value matches that tag exactly, or a value that starts with it (model:llama-3.1)
            problems = [p for p in problems if any(t == tag or t.startswith(tag) for t in p.definition.tags)]
        else:
            problems = [p for p in problems if any(t == tag or t.split(":", 1)[-1] == tag for t in p.definition.tags)]
    return problems
