"""Skill transfer between two variants of the same problems (MetaKernelBench's design, on solbench's evaluator).

A *variant* is what differs between the two sides of a pair: the kernel language (the usual case), the chip
(the device and hardware id), or the problem source (a map from each problem to its counterpart). For every
problem and replicate, four arms run with the same budget:

- ``solo-A`` and ``solo-B``: a fresh attempt in each variant, keeping a SKILL.md as it goes;
- ``A->B`` and ``B->A``: a fresh attempt in the target variant whose only extra input is the other variant's
  solo skill, handed on whether or not that attempt passed (unless the *gate* holds it back). The tokens and
  money spent writing the skill are charged to the receiving arm at its start, so the budgets stay equal.

Each direction gives pairs (skill arm, the target's solo arm, the source's solo arm), scored by the held-out
workloads of the best submission (``experiments.stats``). The gate (``none``, ``source_passed``,
``source_beat_solo``) tests whether skills from weak attempts mislead: a pair whose skill the gate holds back
counts the target's solo attempt for its skill arm (a lift of zero), so gated and ungated lifts are over the
same pairs. The language proof stays on in every arm (the evaluator's default).
"""

from __future__ import annotations

import concurrent.futures as cf
from typing import Any, Callable

from pydantic import BaseModel, Field

from solbench.agents.loop import AttemptResult
from solbench.agents.session import Setup, run_attempt
from solbench.experiments import stats

GATES = ("none", "source_passed", "source_beat_solo")


class Variant(BaseModel):
    name: str
    language: str
    device: str | None = None  # None: the experiment's device
    hardware: str | None = None
    problems: dict[str, str] = Field(default_factory=dict)  # a problem source's counterpart names


class Unit(BaseModel):
    """One problem and replicate: the four arms' results and whether each skill was handed on."""
    problem: str
    replicate: int
    arms: dict[str, AttemptResult] = Field(default_factory=dict)
    handed: dict[str, bool] = Field(default_factory=dict)


def arm_of(r: AttemptResult | None) -> stats.Arm:
    """An attempt as an arm: its best submission's held-out result, its verdict kept (an ``unsupported`` one
    never counts as passed); a missing attempt is a failed arm."""
    best = r.best if r is not None else None
    ok = bool(best and best.passed)
    return stats.Arm(passed=ok, speedup=best.score_speedup if ok else None, verdict=best.verdict if best else None)


def gate_allows(gate: str, source: AttemptResult, target_solo: AttemptResult) -> bool:
    if gate == "none":
        return True
    src = arm_of(source)
    if gate == "source_passed":
        return src.ok
    if gate == "source_beat_solo":
        return stats.tier(src) > stats.tier(arm_of(target_solo))
    raise ValueError(f"unknown gate {gate!r}: {', '.join(GATES)}")


def run_unit(problem_of: Callable[[Variant, str], Any], name: str, replicate: int, a: Variant, b: Variant,
             model: Any, setup: Setup, store: Any, gate: str = "none", provider_for=None) -> Unit:
    unit = Unit(problem=name, replicate=replicate)
    if store is not None:  # SQLite connections stay in their thread: each unit opens the database itself
        from solbench.store.db import Store

        store = Store(store.path)
    try:
        return _arms(unit, problem_of, name, replicate, a, b, model, setup, store, gate, provider_for)
    finally:
        if store is not None:
            store.close()


def _arms(unit, problem_of, name, replicate, a, b, model, setup, store, gate, provider_for) -> Unit:

    def go(arm: str, v: Variant, **kw) -> AttemptResult:
        s = setup.model_copy(update={k: x for k, x in (("device", v.device), ("hardware", v.hardware)) if x})
        provider = provider_for(arm, name, replicate) if provider_for else None
        return run_attempt(problem_of(v, name), v.language, model, s, store, arm=arm, replicate=replicate,
                           provider=provider, **kw)

    solo = {v.name: go(f"solo-{v.name}", v, keep_skill=True) for v in (a, b)}
    unit.arms.update({f"solo-{k}": r for k, r in solo.items()})
    for src, dst in ((a, b), (b, a)):
        arm = f"{src.name}->{dst.name}"
        source, target_solo = solo[src.name], solo[dst.name]
        allowed = gate_allows(gate, source, target_solo) and bool(source.skill)
        unit.handed[arm] = allowed
        if allowed:
            unit.arms[arm] = go(arm, dst, skill_in=source.skill, charge=(source.skill_usage, source.skill_usd))
    return unit


def pairs_of(units: list[Unit], a: Variant, b: Variant) -> dict[str, list[stats.Pair]]:
    """Per direction (and "both"), the pairs: the skill arm (the target's solo where the gate held the skill
    back), the target's solo arm, the source's solo arm."""
    out: dict[str, list[stats.Pair]] = {}
    for src, dst in ((a, b), (b, a)):
        arm = f"{src.name}->{dst.name}"
        out[arm] = [stats.Pair(problem=u.problem, replicate=u.replicate,
                               skill=arm_of(u.arms.get(arm) if u.handed.get(arm) else u.arms[f"solo-{dst.name}"]),
                               solo=arm_of(u.arms[f"solo-{dst.name}"]), source=arm_of(u.arms[f"solo-{src.name}"]))
                    for u in units]
    # both directions pooled: problems keep their identity per direction, so the bootstrap resamples them
    out["both"] = [p.model_copy(update={"problem": f"{p.problem}@{arm}"}) for arm in list(out) for p in out[arm]]
    return out


def report(units: list[Unit], a: Variant, b: Variant, resamples: int = 10000, seed: int = 0) -> dict[str, Any]:
    """The experiment's statistics per direction: S lift with its problem-bootstrap 95% interval, correctness
    lift over all pairs, speed lift over pairs where both passed, help / harm and win / tie / loss, the
    breakdown by the source's standing, and a sign-flip permutation p-value."""
    out: dict[str, Any] = {"variants": [a.model_dump(), b.model_dump()], "units": len(units), "directions": {}}
    for direction, pairs in pairs_of(units, a, b).items():
        d: dict[str, Any] = {"pairs": len(pairs)}
        for metric in ("S", "correct", "speed"):
            d[f"lift_{metric}"] = stats.paired_lift(pairs, metric, resamples=resamples, seed=seed).model_dump()
        d["help_harm"] = stats.help_harm(pairs)
        d["by_standing"] = stats.by_standing(pairs)
        d["p_value_S"] = stats.permutation_test(pairs, "S", seed=seed)
        if direction != "both":
            d["skills_handed_on"] = sum(1 for u in units if u.handed.get(direction))
        out["directions"][direction] = d
    tokens = {arm: sum(u.arms[arm].usage.total for u in units if arm in u.arms)
              for arm in sorted({k for u in units for k in u.arms})}
    out["tokens_by_arm"] = tokens
    # skills a gate held back were written all the same: their tokens, charged to no arm, are reported here
    out["skill_tokens_held_back"] = sum(u.arms[f"solo-{src}"].skill_usage.total for u in units
                                        for src, dst in ((a.name, b.name), (b.name, a.name))
                                        if not u.handed.get(f"{src}->{dst}") and f"solo-{src}" in u.arms)
    return out


def run_transfer(problem_of: Callable[[Variant, str], Any], problems: list[str], a: Variant, b: Variant,
                 model: Any, setup: Setup, store: Any = None, replicates: int = 1, gate: str = "none",
                 concurrency: int = 1, provider_for=None, progress: Callable[[str], None] | None = None) -> list[Unit]:
    """Every problem x replicate unit; units run concurrently up to ``concurrency`` (each evaluation still holds
    its device's lock). A unit already finished in ``store`` is read back, a half-done one resumes."""
    if gate not in GATES:
        raise ValueError(f"unknown gate {gate!r}: {', '.join(GATES)}")
    jobs = [(p, r) for p in problems for r in range(replicates)]
    units: dict[tuple[str, int], Unit] = {}
    with cf.ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        futures = {pool.submit(run_unit, problem_of, p, r, a, b, model, setup, store, gate, provider_for): (p, r)
                   for p, r in jobs}
        for f in cf.as_completed(futures):
            units[futures[f]] = f.result()
            if progress:
                p, r = futures[f]
                progress(f"{p} replicate {r}: " + ", ".join(
                    f"{arm} {'passed' if arm_of(x).ok else 'failed'}" for arm, x in units[(p, r)].arms.items()))
    return [units[j] for j in jobs]
