"""Export stored evaluations as flashinfer-trace Trace objects (one per workload)."""

from __future__ import annotations

from typing import Any, Iterator

from solbench.problems.problem import load_problem


def _status(verdict: str) -> str:
    return verdict.upper()


def traces(store, evaluation_ids: list[int]) -> Iterator[dict[str, Any]]:
    for eid in evaluation_ids:
        ev, _ = store.evaluation(eid)
        try:
            workloads = {w.uuid: w for w in load_problem(ev.problem_dir).workloads}
        except Exception:
            workloads = {}
        env = ev.environment or {}
        for w in ev.workloads:
            src = workloads.get(w.uuid)
            yield {
                "definition": ev.problem,
                "workload": src.model_dump(exclude_none=True) if src else {"uuid": w.uuid, "axes": w.axes, "inputs": {}},
                "solution": ev.solution,
                "evaluation": {
                    "status": _status(w.verdict),
                    "log": w.message or "",
                    "correctness": {"max_relative_error": w.max_rel_err, "max_absolute_error": w.max_abs_err},
                    "performance": {
                        "latency_ms": w.time_ms,
                        "reference_latency_ms": w.baseline_ms,
                        "speedup_factor": w.speedup_vs_baseline,
                    },
                    "environment": {"hardware": env.get("device_name") or ev.hardware,
                                    "libs": {k: env.get(k) for k in ("torch", "triton", "cuda", "driver") if env.get(k)}},
                    "timestamp": ev.started,
                    # solbench extensions
                    "solbench": {"evaluation_id": ev.id, "sol_ms": w.sol_ms, "bound": w.bound, "sol_score": w.sol_score,
                                 "baseline": w.baseline, "reasons": w.reasons, "warnings": w.warnings,
                                 "hardware_id": ev.hardware},
                },
            }


def trajectory_lines(store, experiment: str | None = None, problem: str | None = None) -> Iterator[dict[str, Any]]:
    """Agent trajectories, one event per line with its trajectory's key, arm, problem, model and language: the
    format a ``replay`` model reads (its reply events carry ``reply``), and any JSONL tool reads."""
    from solbench.store.journal import trajectories

    for t in trajectories(store.conn, experiment):
        if problem and t["problem"] != problem:
            continue
        head = {k: t[k] for k in ("key", "experiment", "arm", "problem", "model", "language", "chip", "replicate")}
        for e in t["events"]:
            yield {**head, **e}
        yield {**head, "kind": "result", "status": t["status"], "result": t["result"]}
