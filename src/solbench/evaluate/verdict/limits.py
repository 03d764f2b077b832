"""How long a candidate may take: the time limit of each workload, and what happens after one is exceeded.

A workload's limit, unless the user sets one (``EvalOptions.workload_timeout_s``), follows the work:

    limit = min(CEILING_S, COMPILE_ALLOWANCE_S + MULTIPLE x t_ref)                              (native)
    limit = min(INTERPRETED_CEILING_S, COMPILE_ALLOWANCE_S + MULTIPLE x INTERPRETER_SLOWDOWN x t_ref)  (interpreted)

where ``t_ref`` is the wall time of one call of the trusted reference on the workload's inputs (taken by the
trusted worker before the candidate's first call, on a draw of its own). The compile allowance is also the floor:
a Triton solution compiles, and may autotune, on each workload's first call. ``MULTIPLE`` lets a candidate
take about 40 calls (correctness draws, repeat, ghost replay, timing) at 50 times the reference's time each.
The limit covers the whole workload's candidate time: every wait for the candidate's process (a call, an audit's
hand-over) gets what is left of it and uses it up; the trusted side's own work between the waits (input draws, the
reference and its float64 anchor, comparisons, re-checks) does not, since on a large output it can take longer
than the solution.

An interpreted run (a Triton kernel through Triton's interpreter on the CPU) executes every program of its grid
in Python, one numpy operation at a time, so its calls are slower than the native reference's by a factor that
depends on the grid and the kernel. Measured on this project's bundled Triton solutions on a 2-core CPU (a
call's time against the reference's call that sets the limit): rmsnorm 64x to 230x (4 x 256 to 2048 x 8192),
fused_add_rmsnorm 180x, softmax_vocab 210x to 270x, layernorm 480x to 900x, silu_and_mul 720x to 2,500x; under
the native formula layernorm at 512 x 4096 and silu_and_mul at 512 x 14336 time out. An interpreted run makes
about 7 calls (correctness draws, repeat, ghost replay; no timing), so ``INTERPRETER_SLOWDOWN`` = 30 gives each
of them about 8,500 times the reference's call, over three times the largest slowdown measured, and
``INTERPRETED_CEILING_S`` bounds what a hanging interpreted solution costs (30 minutes a workload, then the
remaining workloads are not run). ``OUTER_CEILING_S`` is the largest limit any workload gets (the trusted side's
own guard around a worker waits at least this long).

A candidate that exceeds its limit gets ``timeout`` on that workload, and its remaining workloads get ``timeout``
with ``not_run_after_timeout`` without being run (``EvalOptions.run_after_timeout`` runs them anyway): a hanging
solution costs one limit, not one per workload. Likewise a candidate the trusted worker catches as a reward hack
on one workload (``reward_hack``) is not run on the others, which get ``reward_hack`` with
``not_run_after_reward_hack`` (``EvalOptions.run_after_reward_hack`` runs them anyway): the evaluation's verdict is
already set, and a training loop's cheating candidates cost one workload, not all of them.
"""

from __future__ import annotations

COMPILE_ALLOWANCE_S = 30.0
MULTIPLE = 2000.0
CEILING_S = 300.0
#: an interpreted run's allowance over a native one's: MULTIPLE x 30 x t_ref is ~7 calls at ~8,500x the reference
#: (the interpreter was measured at 64x to 2,500x)
INTERPRETER_SLOWDOWN = 30.0
INTERPRETED_CEILING_S = 1800.0
OUTER_CEILING_S = max(CEILING_S, INTERPRETED_CEILING_S)


def workload_limit(reference_s: float | None, explicit_s: float | None = None, interpreted: bool = False) -> float:
    """The workload's time limit in seconds (see the module's formulas); ``explicit_s`` wins when given;
    ``interpreted``: the candidate's kernels run through an interpreter."""
    if explicit_s is not None:
        return float(explicit_s)
    ceiling = INTERPRETED_CEILING_S if interpreted else CEILING_S
    if reference_s is None or not reference_s >= 0:
        return ceiling
    scale = MULTIPLE * (INTERPRETER_SLOWDOWN if interpreted else 1.0)
    return min(ceiling, COMPILE_ALLOWANCE_S + scale * float(reference_s))


def not_run(after_uuid: str, verdict: str = "timeout") -> dict:
    """The verdict of a workload left out after the candidate's ``verdict`` (``timeout`` or ``reward_hack``) on
    ``after_uuid``."""
    if verdict == "reward_hack":
        return {"verdict": verdict, "reasons": ["not_run_after_reward_hack"],
                "message": f"not run: the solution was caught as a reward hack on {after_uuid} "
                           "(run_after_reward_hack runs the remaining workloads anyway)"}
    return {"verdict": "timeout", "reasons": ["not_run_after_timeout"],
            "message": f"not run: the solution exceeded its time limit on {after_uuid} (run_after_timeout runs "
                       "the remaining workloads anyway)"}
