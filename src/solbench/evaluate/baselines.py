"""The baselines a candidate is scored against: the eager reference, the reference under ``torch.compile`` (per
workload, ``dynamic=False``) and an optional hand-optimised ``baseline.py``, timed in the trusted worker and
cached in the results database per problem digest, workload, device, software versions and harness digest."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Callable

from solbench.evaluate.timing.stats import summarize
from solbench.evaluate.trusted.report import WorkloadReport
from solbench.problems.problem import Problem

BASELINE_LABEL = {"eager": "eager", "compile": "compile", "baseline_file": "baseline.py"}
#: the files whose change makes every cached baseline stale (they judge or time a baseline)
_DIGESTED = ("trusted/worker.py", "verdict/stages.py", "trusted/subjects.py", "trusted/local.py",
             "timing/stopping.py", "verdict/correctness.py", "timing/rounds.py", "timing/cupti.py", "timing/stats.py")


def default_baselines(problem: Problem, device: str) -> tuple[str, ...]:
    kinds = ["eager"]
    if device != "cpu":
        kinds.append("compile")
    if problem.baseline_source:
        kinds.append("baseline_file")
    return tuple(kinds)


def harness_digest() -> str:
    """Changes whenever the code that judges or times a baseline changes, so stale cached verdicts are not reused."""
    here = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for name in _DIGESTED:
        h.update((here / name).read_bytes())
    for name in ("inputs.py", "roles.py"):  # what a baseline's inputs are drawn by
        h.update((here.parent / "problems" / name).read_bytes())
    return h.hexdigest()[:12]


def software_key(env: dict[str, Any]) -> str:
    return (f"torch={env.get('torch')};triton={env.get('triton')};cuda={env.get('cuda')};driver={env.get('driver')};"
            f"threads={env.get('cpu_threads')};platform={(env.get('platform') or {}).get('id')};"
            f"harness={harness_digest()}")


def _median(samples: list[float] | None) -> float | None:
    s = summarize(samples or [])
    return s.median if s else None


def measure_baselines(problem: Problem, uuids: list[str], kinds: tuple[str, ...], device: str, hold: bool,
                      env: dict[str, Any], run: Callable[[list[dict[str, Any]], list[tuple[int, str]]], Any],
                      store=None, use_cache: bool = True,
                      progress: Callable[[str], None] | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """kind -> uuid -> {verdict, time_ms}; ``run(subjects, pairs)`` runs a job on the trusted worker."""
    kinds = tuple(k for k in kinds if k != "baseline_file" or problem.baseline_source)
    device_name = env.get("device_name") or device
    soft = software_key(env) + (";hold" if hold else "")
    digest = problem.digest()
    out: dict[str, dict[str, dict[str, Any]]] = {k: {} for k in kinds}
    pairs = []
    for i, kind in enumerate(kinds):
        for uuid in uuids:
            cached = store.get_baseline(digest, uuid, device_name, soft, kind) if (store and use_cache) else None
            if cached is not None:
                out[kind][uuid] = dict(cached, cached=True)
            else:
                pairs.append((i, uuid))
    if pairs:
        if progress:
            progress(f"{problem.name}: baselines ({', '.join(BASELINE_LABEL[k] for k in kinds)}) "
                     f"on {len({u for _, u in pairs})} workload(s)")
        outcome = run([{"kind": k} for k in kinds], pairs)
        for i, uuid in pairs:
            r = outcome.results.get((i, uuid)) or WorkloadReport.failed(uuid, "runtime_error", ["no_result"])
            t = _median(r.samples_ms)
            out[kinds[i]][uuid] = {"verdict": r.verdict, "time_ms": t, "message": r.message}
            if store is not None:
                store.put_baseline(digest, uuid, device_name, soft, kinds[i], r.verdict, t, r.samples_ms, r.message)
    return out
