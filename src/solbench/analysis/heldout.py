"""Held-out shapes: extra workloads drawn per run from a definition's valid axis ranges.

A solution hard-coded to the public workload sizes fails on shapes it has never
seen. For each draw, every variable axis gets a value from its declared range
(``min``/``max`` on the axis; without one, the span of the public workloads of
the same device class), log-uniformly, nudged to an odd, non-power-of-two value
when the definition accepts one. A draw is kept only if the definition's
constraints hold and the reference traces at that shape on fake tensors (no
memory is used), so a held-out shape never makes a correct solution fail. Sizes
stay near the public workloads of the device class (no draw moves more than twice
the data of the largest public workload of its class), and the drawn workloads are recorded with the
results, never written into the problem's files.
"""

from __future__ import annotations

import hashlib
import math
import random
import re

from solbench.problems.definition import AxisVar
from solbench.problems.problem import Problem
from solbench.problems.workload import Workload


def _templates(problem: Problem, device: str) -> list[Workload]:
    want = "cpu" if device == "cpu" else "gpu"
    same = [w for w in problem.workloads if w.device in (want, "any")]
    return same or list(problem.workloads)


def _bounds(problem: Problem, axis: str, templates: list[Workload], device: str) -> tuple[int, int]:
    values = [w.axes[axis] for w in templates if axis in w.axes] or [1]
    spec = problem.definition.axes[axis]
    lo_decl = spec.min if isinstance(spec, AxisVar) and spec.min is not None else None
    hi_decl = spec.max if isinstance(spec, AxisVar) and spec.max is not None else None
    # stay near the public sizes of this device class (half the smallest to twice the largest), within the
    # declared range: a held-out shape tests generality, not the machine's memory
    lo = max(lo_decl or 1, max(1, min(values) // 2))
    hi = max(values) * 2
    if hi_decl is not None:
        hi = min(hi, hi_decl)
    return lo, max(lo, hi)


def _oddish(value: int, lo: int, hi: int) -> int:
    """Prefer an odd, non-power-of-two value near ``value``."""
    for candidate in (value | 1, value + 1, value - 1, value):
        if lo <= candidate <= hi and candidate & (candidate - 1):
            return candidate
    return value


_MULTIPLE = re.compile(r"^\s*(\w+)\s*%\s*(\w+)\s*==\s*0\s*$")


def _multiples(problem: Problem) -> dict[str, int]:
    """Axes a constraint says must be multiples of m (``"K % 128 == 0"``, ``"Hq % Hkv == 0"`` with Hkv const)."""
    from solbench.problems.definition import AxisConst

    out: dict[str, int] = {}
    for c in problem.definition.constraints or []:
        m = _MULTIPLE.match(c)
        if not m:
            continue
        modulus = m.group(2)
        if modulus.isdigit():
            out[m.group(1)] = int(modulus)
        elif isinstance(problem.definition.axes.get(modulus), AxisConst):
            out[m.group(1)] = problem.definition.axes[modulus].value
    return out


HELDOUT_PREFIX = "heldout-"  # every held-out workload's uuid starts so


def draw_heldout(problem: Problem, count: int, seed: int, device: str, max_tries: int = 40) -> list[Workload]:
    """``count`` new workloads for ``device``, reproducible from ``seed``."""
    from solbench.analysis.roofline import count_work

    rng = random.Random(seed)
    templates = _templates(problem, device)
    var_axes = problem.definition.var_axes
    multiples = _multiples(problem)
    # each axis may grow on its own; together they must not: cap the data at twice the largest public workload's
    try:
        byte_cap = 2 * max(count_work(problem, w).bytes for w in templates)
    except Exception:
        byte_cap = float("inf")
    drawn: list[Workload] = []
    tries = 0
    while len(drawn) < count and tries < max_tries * max(count, 1):
        tries += 1
        template = rng.choice(templates)
        axes = {}
        for axis in var_axes:
            lo, hi = _bounds(problem, axis, templates, device)
            raw = int(round(math.exp(rng.uniform(math.log(lo), math.log(hi + 1))))) if hi > lo else lo
            raw = min(max(raw, lo), hi)
            if axis in multiples:  # an odd number of blocks: off the power-of-two sizes, still valid
                m = multiples[axis]
                blocks = max(1, raw // m)
                blocks = blocks | 1 if (blocks | 1) * m <= hi else blocks
                axes[axis] = max(blocks * m, m * -(-lo // m))
            else:
                axes[axis] = _oddish(raw, lo, hi) if rng.random() < 0.8 else raw
        w = template.model_copy(update={"axes": dict(axes)})
        try:
            problem.definition.resolve_axes(axes)
            # the reference must trace at this shape (fake tensors, no memory); a held-out count stays in memory
            work = count_work(problem, w, persist=False)
            for _ in range(8):  # too much data together: halve the axis that grew most, keep it valid
                if work.bytes <= byte_cap:
                    break
                axis = max(axes, key=lambda a: axes[a] / _bounds(problem, a, templates, device)[0])
                lo, hi = _bounds(problem, axis, templates, device)
                if axes[axis] <= lo:
                    break
                m = multiples.get(axis, 1)
                axes[axis] = max(lo, (axes[axis] // 2) // m * m or m)
                w = w.model_copy(update={"axes": dict(axes)})
                problem.definition.resolve_axes(axes)
                work = count_work(problem, w, persist=False)
        except Exception:
            continue
        if work.bytes > byte_cap or any(axes == x.axes for x in list(problem.workloads) + drawn):
            continue
        key = hashlib.sha256(f"{problem.name}:{sorted(axes.items())}".encode()).hexdigest()[:10]
        w = w.model_copy(update={"uuid": f"{HELDOUT_PREFIX}{key}", "axes": dict(axes),
                                 "label": f"held-out {' '.join(f'{k}={v}' for k, v in axes.items())}"})
        drawn.append(w)
    return drawn
