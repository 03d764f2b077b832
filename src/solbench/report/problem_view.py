"""A problem as ``solbench show`` prints it: what it computes (description, signature, axes, the reference's
``run``) and its workloads' work counts and speed-of-light times on a chip, within the output's width."""

from __future__ import annotations

import ast
import textwrap
from typing import Any

from rich.text import Text

from solbench.report.results import clip, fit

#: lines of the reference's ``run`` shown
REFERENCE_LINES = 16


def _tensor(spec: Any) -> str:
    shape = getattr(spec, "shape", None)
    return f"{spec.dtype}[{', '.join(map(str, shape))}]" if shape else str(spec.dtype)


def signature(definition: Any) -> str:
    """``run(x: bfloat16[T, H], eps: float32) -> out: bfloat16[T, H]``."""
    ins = ", ".join(f"{k}: {_tensor(v)}" for k, v in definition.inputs.items())
    outs = ", ".join(f"{k}: {_tensor(v)}" for k, v in definition.outputs.items())
    return f"run({ins}) -> {outs}"


def axes(definition: Any) -> str:
    parts = []
    for name, axis in definition.axes.items():
        lo, hi, value = getattr(axis, "min", None), getattr(axis, "max", None), getattr(axis, "value", None)
        parts.append(f"{name} {lo}..{hi}" if lo is not None or hi is not None else
                     f"{name} = {value}" if value is not None else name)
    return ", ".join(parts)


def reference_run(source: str) -> list[str]:
    """The reference's ``run`` as written (its first lines)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run"), None)
    if fn is None:
        return []
    lines = textwrap.dedent(ast.get_source_segment(source, fn) or "").splitlines()
    return lines[:REFERENCE_LINES] + (["..."] if len(lines) > REFERENCE_LINES else [])


def _si(x: float | None) -> str:
    if not x:
        return "-"
    for unit, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{unit}"
    return f"{x:.3g}"


def _ms(x: float | None) -> str:
    return "-" if x is None else (f"{x:.4g}" if x >= 0.001 else f"{x:.2e}")


def problem_lines(problem: Any, report: dict[str, Any], width: int, where: str) -> list[Text]:
    """``show``'s lines: the problem, then its workloads on ``report``'s chip (``where``: how it was chosen)."""
    d = problem.definition
    out = [Text(f"{problem.name} ({problem.family}, {len(problem.workloads)} workloads)", style="bold")]
    out += [Text(line) for line in textwrap.wrap(d.description or "", width)]
    out += [Text(line) for line in textwrap.wrap("signature: " + signature(d), width, subsequent_indent="  ")]
    out += [Text(line) for line in textwrap.wrap("axes: " + axes(d), width, subsequent_indent="  ")]
    ref = reference_run(problem.reference_source)
    if ref:
        out.append(Text("reference:", style="bold"))
        out += [Text(clip("  " + line, width), style="cyan") for line in ref]
    if report.get("sol_note"):
        out += [Text(line, style="dim") for line in textwrap.wrap("SOL note: " + report["sol_note"], width)]
    out.append(Text(f"speed of light on {report['hardware']} ({where}; datasheet ceilings at max clock):",
                    style="bold"))
    name = max(12, width - 2 - 9 * 3 - 9 - 4)
    out.append(Text(f"  {'workload':<{name}} {'FLOP':>8} {'bytes':>8} {'T_SOL ms':>8} {'bound':<9}", style="bold"))
    for w in report["workloads"]:
        if "error" in w:
            out.append(Text(fit(f"  {w['uuid']}: {w['error']}", width), style="red"))
            continue
        flops = sum(v for v in (w.get("flops") or {}).values() if v)
        out.append(Text(f"  {fit(w['uuid'], name):<{name}} {_si(flops):>8} {_si(w['bytes']) + 'B':>8} "
                        f"{_ms(w['sol_ms']):>8} {w['bound']:<9}"))
    return out
