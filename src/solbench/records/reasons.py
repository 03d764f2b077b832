"""Every reason code and warning a result can carry: its id, its kind, who sets it and one line of rationale.

A **reason** says why a verdict is what it is (``output_recheck`` under ``reward_hack``, ``timeout`` under
``timeout``); a **warning** sits beside any verdict, a passing one too, and changes neither it nor the score
unless its rationale says it leaves the workload unscored. A few codes are both (``dsl_share_low``: a reason
where the language's proof holds, a warning where it has not been shown). Families stand for many codes:
``static:<rule>`` (a static rule of docs/STATIC_RULES.md), ``<baseline>_<verdict>`` (a baseline that failed).
docs/REASONS.md is generated from this registry (``python -m solbench.records.reasons``), and the tests check
both that it is current and that every code the evaluator sets is registered.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    REASON = "reason"
    WARNING = "warning"


@dataclass(frozen=True)
class Code:
    id: str
    kinds: frozenset[Kind]
    rationale: str  # one line, ending with a full stop
    verdicts: tuple[str, ...] = ()  # for a reason: the verdicts it comes with
    worker: bool = False  # set by the trusted worker (a warning of the worker's report is kept only if this is set)


def _c(id: str, kinds: str, rationale: str, verdicts: str = "", worker: bool = False) -> Code:
    return Code(id, frozenset(Kind(k) for k in kinds.split()), rationale, tuple(verdicts.split()), worker)


_R, _W, _RW = "reason", "warning", "reason warning"
_HACK = "reward_hack"

CODES: dict[str, Code] = {c.id: c for c in (
    # the call itself failed
    _c("exception", _R, "A call raised; the message holds the last lines of its traceback.", "runtime_error"),
    _c("crash", _R, "The candidate's process (or the trusted worker) died during a call.", "runtime_error"),
    _c("cuda_fault", _R, "A call hit a CUDA error that poisons its context (an illegal address, a device-side "
       "assert); the candidate's process is replaced.", "runtime_error"),
    _c("out_of_memory", _R, "A call, or the trusted worker, ran out of device or host memory.", "runtime_error"),
    _c("trusted_worker_killed", _R, "The trusted worker was killed while judging (most often by the kernel's "
       "out-of-memory killer).", "runtime_error"),
    _c("restart_failed", _R, "The candidate's process could not be started again after a crash.", "runtime_error"),
    _c("unreadable_output", _R, "A call's outputs could not be copied back into the output room.",
       "runtime_error"),
    _c("no_result", _R, "The trusted worker sent no result for the workload.", "runtime_error"),
    _c("timeout", _R, "A call did not answer within the workload's time limit.", "timeout"),
    _c("not_run_after_timeout", _R, "An earlier workload of the solution timed out, so this one was not run "
       "(the option ``run_after_timeout`` runs it).", "timeout"),
    _c("not_run_after_reward_hack", _R, "The trusted worker caught the solution as a reward hack on an earlier "
       "workload, so this one was not run (the option ``run_after_reward_hack`` runs it).", "reward_hack"),
    _c("compile_error", _R, "The solution did not build or load.", "compile_error"),
    # what this machine cannot judge
    _c("language_unavailable", _R, "The solution's language (its package or toolchain) is missing here.",
       "unsupported"),
    _c("too_large_for_device", _R, "The workload's estimated memory exceeds what the device can hold.",
       "unsupported"),
    _c("unsupported_language", _R, "Agent track: the submission names a language solbench does not know.",
       "unsupported"),
    _c("bad_submission", _R, "Agent track: the submission could not be read as a solution (no entry file, a path "
       "outside the solution).", "compile_error"),
    _c("service_failed", _R, "Agent track through a service (`--server`): the service could not evaluate the "
       "submission (its job failed or was cancelled; the job's error is the message).", "runtime_error"),
    # the reference cannot judge
    _c("reference_failed", _R, "The problem's reference raised on the trusted side.", "invalid_reference"),
    _c("reference_nan", _R, "The reference's output holds NaN on the first draw's inputs.", "invalid_reference"),
    _c("reference_random", _R, "Two reference calls on the same inputs disagree beyond its tolerance (dropout, an "
       "unseeded draw): nothing can be judged against it.", "invalid_reference"),
    # outputs and inputs
    _c("incorrect_shape", _R, "An output has another shape than the reference's (the verdict is its own reason).",
       "incorrect_shape"),
    _c("incorrect_dtype", _R, "An output has another dtype than the reference's (the verdict is its own reason).",
       "incorrect_dtype"),
    _c("incorrect_numerical", _R, "An output's values are outside the tolerance of the float64 anchor (the verdict "
       "is its own reason; the message names the worst element).", "incorrect_numerical"),
    _c("output_recheck", _R, "A timed or audited call, picked by the trusted side's secret, gave a wrong or "
       "missing output although the checked draws were right.", _HACK),
    _c("input_mutation", _R, "A call changed an input it does not declare as updated in place.", _HACK),
    _c("stale_memory", _R, "Wrong on the first call and right on the repeat call on the same inputs: the output "
       "came from memory left behind, not from the call's work.", _HACK),
    _c("result_forgery", _R, "A message from the candidate's process was malformed or out of turn, or a timed "
       "or audited call's result was refused (not of its slot's shape and dtype, or the slot's own memory).",
       _HACK),
    _c("tensor_subclass", _R, "A call returned a tensor subclass or a lazy object in place of a plain tensor.",
       _HACK),
    # time
    _c("time_forgery", _R, "The timing's median is below the trusted side's own clock by more than the audit's "
       "resolution: the time did not come from the work.", _HACK),
    _c("below_floor", _R, "The time is below what any call takes on this device (the launch floor and writing "
       "the outputs).", _HACK),
    _c("below_sol", _RW, "The time is below the speed-of-light bound: a reason beside another reward-hack "
       "reason; otherwise a warning, and the workload is left unscored until the bound is reviewed.", _HACK),
    _c("unaccounted_device_work", _R, "Work ran outside the timed window: wall time far above the event time, or "
       "work on other streams ending after the call.", _HACK),
    _c("persisting_l2", _R, "A persisting-L2 set-aside was made during timing, keeping data through the flush.",
       _HACK),
    # the candidate's process
    _c("harness_tamper", _R, "The harness's code in the candidate's process changed (its digest differs from "
       "the one taken before the solution loaded).", _HACK),
    _c("profiler_tamper", _R, "The language proof's profiler session was replaced or changed by the solution.",
       _HACK),
    _c("thread_injection", _R, "The solution started threads of its own.", _HACK),
    _c("process_spawn", _R, "The solution left live child processes.", _HACK),
    _c("seccomp_refused", _R, "The candidate's process ran without its system-call filter where this machine "
       "can load one (read from outside the process).", _HACK),
    _c("native_symbol", _R, "A native build imports a symbol outside its language's allowlist.", _HACK),
    _c("foreign_library", _R, "A CUDA C++ solution's object links a vendor library while the evaluation allows "
       "one language only.", _HACK),
    # the language proof
    _c("no_dsl_kernel", _R, "The profiled call ran none of the solution's own kernels.", _HACK),
    _c("dsl_share_low", _RW, "The solution's own kernels took too little of the profiled call's device time: "
       "a reason under 25% (50% under the one-language rule); a warning from 25% to 50%, or where the language's "
       "proof has not been shown on a GPU.", _HACK, worker=True),
    _c("dsl_work_low", _R, "Under the interpreter, the solution's own kernels stored fewer than half of the "
       "output elements the call produced.", _HACK),
    _c("ghost_replay", _R, "Replayed with the solution's kernels made inert, the call still gave right outputs: "
       "the work was done elsewhere.", _HACK),
    _c("foreign_kernel", _R, "Kernels that are not the solution's language's took part of the profiled call "
       "under the one-language rule.", _HACK),
    # warnings
    _c("noisy_timing", _W, "The samples' interquartile range is over 10% of their median (host-bound or "
       "bimodal timing; see ``graph_ms``)."),
    _c("timing_fallback", _W, "The CUPTI clock was meant but could not time this workload: the samples are event "
       "times (``timing_notes`` says why)."),
    _c("low_sm_clock", _W, "An NVML reading during timing showed the SM clock under 75% of its maximum."),
    _c("clocks_throttled", _W, "An NVML reading during timing named a power or thermal slowdown: the time is real "
       "but will not repeat on a cooler chip."),
    _c("interpreted", _W, "CPU mode ran a Triton kernel through the interpreter: correctness only, not scored."),
    _c("language_proof_unavailable", _W, "The profiled call gave no device work (the profiler could not run, or "
       "the call launched nothing): the language proof rests on the ghost replay alone."),
    _c("ghost_inconclusive", _W, "The ghost replay failed or returned outputs of another kind, so it gives no "
       "evidence; the profiler's share or the interpreter's store count decides alone.", worker=True),
    _c("vendor_kernel", _W, "A vendor library's kernels (cuBLAS, cuDNN) did part of the profiled call's work.",
       worker=True),
    _c("vendor_library", _W, "A CUDA C++ solution's object links a vendor library: part of the work is not its "
       "own."),
    _c("time_unconfirmed", _W, "The audit could not re-time the workload with the trusted side's own clock: it "
       "passes unscored, and no speedup is computed from its time."),
    _c("time_bounded", _W, "The audit confirmed the time only from upper bounds: the call waits on the device "
       "inside itself, so no bracket had it queued before the device was let go."),
    _c("no_sol_bound", _W, "The reference could not be traced on fake tensors: no speed-of-light bound, no score."),
    _c("invalid_bound", _W, "The baseline's time is within 5% of the bound: the workload is not scored."),
    _c("bound_suspect", _W, "The time is under the bound but above the hard floor: the bound is for review and the "
       "workload is left unscored."),
    _c("sandbox_rlimits_only", _W, "Evaluation: the machine refused the candidate's isolation, so it ran on "
       "rlimits alone."),
    _c("seccomp_unavailable", _W, "Evaluation: libseccomp or the kernel's seccomp is missing here, so the "
       "candidate ran without its system-call filter."),
    _c("language_unproven", _W, "Evaluation: the language's proof (whose kernels did the work) has not been shown "
       "on this device, so a low share of its own kernels is a warning only."),
)}

#: code families: a pattern, its kinds and rationale (``<...>`` stands for a name)
FAMILIES: dict[str, Code] = {c.id: c for c in (
    _c("static:<rule>", _RW, "A static rule matched the source (docs/STATIC_RULES.md): a reason when the rule "
       "rejects, a warning when it warns.", _HACK),
    _c("<baseline>_<verdict>", _W, "A baseline failed (``reference_runtime_error`` where the eager reference "
       "crashed, ``compile_runtime_error`` where Inductor did, ``baseline_file_timeout``): the baseline time comes "
       "from the others."),
)}

_BASELINES = ("reference", "compile", "baseline_file")
_VERDICTS = ("invalid_reference", "reward_hack", "compile_error", "timeout", "runtime_error", "incorrect_shape",
             "incorrect_dtype", "incorrect_numerical")
_FAMILY_PATTERNS = {
    "static:<rule>": re.compile(r"^static:[a-z][a-z0-9_]*$"),
    "<baseline>_<verdict>": re.compile(rf"^({'|'.join(_BASELINES)})_({'|'.join(_VERDICTS)})$"),
}


def lookup(code: str) -> Code | None:
    """The registry's entry for ``code``: its own, or its family's."""
    if code in CODES:
        return CODES[code]
    for name, pattern in _FAMILY_PATTERNS.items():
        if pattern.match(code):
            return FAMILIES[name]
    return None


def unknown(codes, kind: Kind) -> list[str]:
    """The codes in ``codes`` that the registry does not know as ``kind``."""
    return [c for c in codes if (e := lookup(c)) is None or kind not in e.kinds]


def worker_warnings() -> frozenset[str]:
    """The warnings the trusted worker may attach to a workload (any other from its report is dropped)."""
    return frozenset(c.id for c in CODES.values() if c.worker and Kind.WARNING in c.kinds)


def render() -> str:
    """docs/REASONS.md."""
    lines = ["# Reasons and warnings", "",
             "Generated from `src/solbench/records/reasons.py` (`python -m solbench.records.reasons > "
             "docs/REASONS.md`); a test checks that it is current.", "",
             "A **reason** says why a verdict is what it is; a **warning** sits beside any verdict and changes "
             "neither it nor the score, unless its line says the workload is left unscored. Per workload, and "
             "joined (sorted, without repeats) at the top of `eval --json`.", ""]
    for kind, title in ((Kind.REASON, "Reasons"), (Kind.WARNING, "Warnings")):
        lines += [f"## {title}", "", "| Code | Verdict | Meaning |" if kind == Kind.REASON else "| Code | Meaning |",
                  "| --- | --- | --- |" if kind == Kind.REASON else "| --- | --- |"]
        for c in [*CODES.values(), *FAMILIES.values()]:
            if kind not in c.kinds:
                continue
            why = c.rationale.replace("``", "`")
            if kind == Kind.REASON:
                lines.append(f"| `{c.id}` | {', '.join(f'`{v}`' for v in c.verdicts)} | {why} |")
            else:
                lines.append(f"| `{c.id}` | {why} |")
        lines.append("")
    n_r = sum(Kind.REASON in c.kinds for c in CODES.values())
    n_w = sum(Kind.WARNING in c.kinds for c in CODES.values())
    lines.append(f"{n_r} reasons and {n_w} warnings, besides the {len(FAMILIES)} families.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render(), end="")
