"""Evaluations as a terminal listing that fits its width: a line per evaluation (problem, solution, language,
verdict, SOL score), under it one row per workload, and under a row that did not pass one line saying why
(``why``); warnings under the row they belong to. Columns that do not fit are left out, the least needed first
(``--wide`` keeps them all); a name too long keeps its head and its tail, so rows that differ only at the end
stay apart. Solutions this machine cannot run (a language that needs a GPU, a toolchain not installed) are not
listed row by row: one line says which and why."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from rich.text import Text

from solbench.records.verdict import Evaluation, WorkloadResult
from solbench.report.why import notes, workload_why

_STYLE = {"passed": "green", "unsupported": "yellow", "invalid_reference": "magenta"}
INDENT = "  "


def fit(text: str, n: int) -> str:
    """``text`` in ``n`` characters: its head and tail around an ellipsis where too long."""
    if len(text) <= n:
        return text
    if n <= 3:
        return text[:n]
    tail = (n - 1) // 2
    return text[: n - 1 - tail] + "…" + text[len(text) - tail:]


def clip(text: str, n: int) -> str:
    """``text`` in ``n`` characters, cut at the end (a sentence: its start says most)."""
    return text if len(text) <= n else text[: max(0, n - 1)] + "…"


def _ms(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.4g}" if x >= 0.001 else f"{x:.2e}"


@dataclass
class Column:
    title: str
    width: int  # the least it takes
    cell: Callable[[WorkloadResult], str]
    keep: int  # lower: left out first
    right: bool = True


WORKLOAD = Column("workload", 18, lambda w: w.uuid, 9, False)
COLUMNS = [
    WORKLOAD,
    Column("T_k ms", 8, lambda w: "interp." if w.interpreted else _ms(w.time_ms), 8),
    Column("SOL", 4, lambda w: "-" if w.sol_score is None else f"{w.sol_score:.2f}", 7),
    Column("T_b ms", 8, lambda w: _ms(w.baseline_ms), 6),
    Column("T_SOL ms", 8, lambda w: _ms(w.sol_ms), 5),
    Column("baseline", 11, lambda w: w.baseline or "-", 2, False),
    Column("bound", 7, lambda w: w.bound or "-", 1, False),
    Column("verdict", 19, lambda w: w.verdict, 10, False),
]


def layout(width: int, wide: bool = False) -> list[tuple[Column, int]]:
    """The columns that fit ``width`` (every one where ``wide``), each with its width; the workload's name takes
    what is left."""
    cols = list(COLUMNS)
    room = width - len(INDENT)

    def need(cs):
        return sum(c.width for c in cs) + len(cs) - 1

    while not wide and need(cols) > room and len(cols) > 2:
        cols.remove(min(cols, key=lambda c: c.keep))
    spare = 24 if wide else max(0, room - need(cols))
    return [(c, c.width + (spare if c is WORKLOAD else 0)) for c in cols]


def not_run_here(ev: Evaluation) -> bool:
    """A solution this machine cannot run at all (its language or toolchain is missing)."""
    return ev.verdict == "unsupported" and "language_unavailable" in ev.reasons


def listing(evaluations: list[Evaluation], width: int = 80, wide: bool = False) -> list[Text]:
    """The lines of the listing (rich Text, verdicts styled)."""
    cols = layout(width, wide)
    full = len(INDENT) + sum(n for _, n in cols) + len(cols) - 1
    lines = [Text(INDENT + " ".join(_pad(c.title, n, c.right) for c, n in cols), style="bold")]
    for ev in (e for e in evaluations if not not_run_here(e)):
        lines.append(_heading(ev, full))
        said = None
        for w in ev.workloads:
            row = Text(INDENT)
            for j, (c, n) in enumerate(cols):
                style = _STYLE.get(w.verdict, "red") if c.title == "verdict" else None
                row.append(_pad(fit(c.cell(w), n), n, c.right), style=style)
                row.append(" " if j < len(cols) - 1 else "")
            lines.append(row)
            why = workload_why(w)
            if why and why != said:  # the same reason on the next workload: said once
                lines.append(Text(clip(INDENT * 2 + "why: " + why, full), style="dim"))
            said = why
            extra = notes(w)
            if extra:
                lines.append(Text(clip(INDENT * 2 + "note: " + ", ".join(extra), full), style="dim"))
    skipped = [e for e in evaluations if not_run_here(e)]
    if skipped:
        lines.append(Text(_not_run_line(skipped), style="yellow"))
    return lines


def _heading(ev: Evaluation, width: int) -> Text:
    right = ev.verdict + (f"  SOL {ev.sol_score:.3f}" if ev.sol_score is not None else "")
    left = clip(f"{ev.problem} / {ev.solution} ({ev.language})", max(10, width - len(right) - 1))
    text = Text(left.ljust(width - len(right)), style="bold")
    text.append(right, style=_STYLE.get(ev.verdict, "red"))
    return text


def _not_run_line(evaluations: list[Evaluation]) -> str:
    """One line for the solutions this machine cannot run: how many, in which languages, and why."""
    by: dict[str, int] = {}
    for ev in evaluations:
        by[ev.language] = by.get(ev.language, 0) + 1
    counts = ", ".join(f"{n} {lang}" for lang, n in sorted(by.items()))
    messages = [ev.message or "" for ev in evaluations]
    why = ("they need a CUDA GPU, and this machine evaluates on the CPU"
           if all("CUDA device" in m or "CUDA GPU" in m for m in messages) else
           "; ".join(sorted({m.splitlines()[0] for m in messages if m}))[:200] or "not available here")
    return f"not run here: {len(evaluations)} solution(s) ({counts}): {why}"


def _pad(text: str, n: int, right: bool) -> str:
    return text.rjust(n) if right else text.ljust(n)
