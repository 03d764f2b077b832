"""How long a candidate may take: the time limit of each workload, and what happens after one is exceeded.

A workload's limit, unless the user sets one (``EvalOptions.workload_timeout_s``), follows the work:

    limit = min(CEILING_S, COMPILE_ALLOWANCE_S + MULTIPLE x t_ref)

where ``t_ref`` is the wall time of one call of the trusted reference on the workload's inputs (taken by the
trusted worker before the candidate's first call, on a draw of its own). The compile allowance is also the floor:
a Triton solution compiles, and may autotune, on each workload's first call. ``MULTIPLE`` lets a candidate
take about 40 calls (correctness draws, repeat, ghost replay, timing) at 50 times the reference's time each.
The limit covers the whole workload: every request to the candidate's process gets what is left of it.

A candidate that exceeds its limit gets ``timeout`` on that workload, and its remaining workloads get ``timeout``
with ``not_run_after_timeout`` without being run (``EvalOptions.run_after_timeout`` runs them anyway): a hanging
solution costs one limit, not one per workload.
"""

from __future__ import annotations

COMPILE_ALLOWANCE_S = 30.0
MULTIPLE = 2000.0
CEILING_S = 300.0


def workload_limit(reference_s: float | None, explicit_s: float | None = None) -> float:
    """The workload's time limit in seconds (see the module's formula); ``explicit_s`` wins when given."""
    if explicit_s is not None:
        return float(explicit_s)
    if reference_s is None or not reference_s >= 0:
        return CEILING_S
    return min(CEILING_S, COMPILE_ALLOWANCE_S + MULTIPLE * float(reference_s))


def not_run(after_uuid: str) -> dict:
    """The verdict of a workload left out after the candidate timed out on ``after_uuid``."""
    return {"verdict": "timeout", "reasons": ["not_run_after_timeout"],
            "message": f"not run: the solution exceeded its time limit on {after_uuid} (run_after_timeout runs "
                       "the remaining workloads anyway)"}
