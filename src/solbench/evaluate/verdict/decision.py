"""The runner's judgement of one workload: the trusted worker's report (``trusted.report``) becomes a
``WorkloadResult`` with statistics, the timing checks that need the whole picture, warnings, baselines, the SOL
bound and the score."""

from __future__ import annotations

from typing import Any

from solbench.analysis.roofline import Work, sol_time
from solbench.evaluate.baselines import BASELINE_LABEL
from solbench.evaluate.timing.stats import summarize
from solbench.evaluate.trusted.report import WorkloadReport
from solbench.hardware.spec import Ceilings
from solbench.hardware.telemetry import SLOWDOWN_REASONS
from solbench.problems.problem import Problem
from solbench.records import reasons, scoring
from solbench.records.verdict import INCORRECT, WorkloadResult

#: warnings the trusted worker may attach to a workload (records/reasons.py marks them)
WORKER_WARNINGS = reasons.worker_warnings()


def hack(res: WorkloadResult, code: str, message: str) -> None:
    """Make the verdict reward_hack with one more reason code; the first detection's message is kept."""
    if res.verdict != "reward_hack":
        res.verdict = "reward_hack"
        res.message = message
    if code not in res.reasons:
        res.reasons.append(code)


def hard_floor_ms(problem: Problem, axes: dict[str, int], datasheet: Ceilings, llc_bytes: int | None) -> float:
    """What no honest call can beat whatever the counted work: the latency floor, and writing the fresh outputs
    (every element is checked to be there) beyond what the last-level cache could hold back, at the datasheet's
    DRAM bandwidth. Unknown cache size: the largest known (256 MB)."""
    from solbench.evaluate.trusted.footprint import tensor_bytes

    d = problem.definition
    out_bytes = tensor_bytes(d, d.outputs, axes)
    llc = llc_bytes if llc_bytes is not None else 256 << 20
    return max(datasheet.launch_floor_s, max(0, out_bytes - llc) / datasheet.dram_bytes_per_s) * 1e3


def judge(problem: Problem, uuid: str, r: WorkloadReport | None, base: dict[str, dict[str, dict[str, Any]]],
          work: Work | str | None, datasheet: Ceilings, calibrated: Ceilings | None,
          llc_bytes: int | None = None) -> WorkloadResult:
    """One workload's result from the worker's report (None: no report came), the problem's baselines ``base``
    (kind -> uuid -> baseline result), its counted ``work`` (a string: why it could not be counted), and the
    datasheet's (and the calibrated) ceilings."""
    r = r or WorkloadReport.failed(uuid, "runtime_error", ["no_result"])
    res = _result(problem, uuid, r)
    if r.samples_ms:
        _timing(res, r)
        _telemetry(res)
    _proof(res, r)
    _baselines(res, base, uuid)
    _speed_of_light(res, work, datasheet, calibrated)
    _physics_floor(res, problem, datasheet, llc_bytes)
    _audit(res, r)
    _score(res)
    return res


def _result(problem: Problem, uuid: str, r: WorkloadReport) -> WorkloadResult:
    """The report's fields as a result; of its warnings only the worker's own (``records.reasons``)."""
    w = problem.workload(uuid)
    res = WorkloadResult(uuid=uuid, label=w.label, axes=problem.definition.resolve_axes(w.axes),
                         verdict=r.verdict, reasons=list(r.reasons), message=r.message, interpreted=r.interpreted,
                         max_abs_err=r.max_abs_err, max_rel_err=r.max_rel_err, failure=r.failure,
                         peak_memory_bytes=r.peak_memory_bytes, graph_ms=r.graph_ms, graph_error=r.graph_error,
                         timing_method=r.timing_method, clocks=r.clocks, wall_ms=r.wall_ms,
                         wall_event_ms=r.wall_event_ms, dsl_share=r.dsl_share, rechecked=r.rechecked,
                         timed_calls=r.timed_calls, timing_notes=r.clock_notes, stray_records=r.stray_records,
                         event_gaps=r.event_gaps, phases=r.phases, limit_s=r.limit_s, audit_ms=r.audit_ms,
                         audit_calls=r.audit_calls, audit_group=r.audit_group, audit_method=r.audit_method,
                         audit_overhead_ms=r.audit_overhead_ms, audit_resolution_ms=r.audit_resolution_ms,
                         audit_looks=r.audit_looks)
    res.warnings.extend(w for w in r.warnings if w in WORKER_WARNINGS)
    return res


def _timing(res: WorkloadResult, r: WorkloadReport) -> None:
    """The samples' statistics, and the timing defences that need the whole picture (``unaccounted_device_work``).
    Every defence adds its reason, also to a verdict another already made reward_hack, so a result names each
    pattern detected."""
    s = summarize(r.samples_ms)
    res.samples_ms = r.samples_ms
    res.time_ms, res.iqr_ms, res.n_samples = s.median, s.iqr, s.n
    if s.median > 0 and s.iqr / s.median > 0.10:
        res.warnings.append("noisy_timing")
    judged = res.verdict in ("passed", "reward_hack")
    events = [x for x in r.event_ms if x is not None]
    if r.timing_method == "cupti" and events:
        res.event_time_ms = summarize(events).median
    elif r.timing_method == "cuda_events" and res.timing_notes:
        res.warnings.append("timing_fallback")  # CUPTI was meant but could not time this workload
    if res.wall_ms and judged and r.timing_method in ("cuda_events", "cupti"):
        # synchronised wall time far above the event time of the same calls: work ran where the events did
        # not see it (0 of 164 honest suite measurements on the H200 came near this threshold). The samples
        # are taken with the stream held, so they leave out the host's launch time, which wall time keeps:
        # compare with the events of the wall-time calls themselves, which wait for the host as it does.
        pairs = list(zip(res.wall_ms, res.wall_event_ms)) or [(w, s.median) for w in res.wall_ms]
        # every call must show the unexplained time, so one slow host moment is not an accusation
        if all(w > 1.5 * e + 0.2 for w, e in pairs):
            wall, seen = min(pairs)
            hack(res, "unaccounted_device_work",
                 f"event time {seen:.4f} ms but synchronised wall time {wall:.4f} ms: work on another stream or thread")
    unjoined = summarize([x for x in r.unjoined_ms if x is not None])
    if unjoined and judged and unjoined.median > 0.1 * s.median + 0.005:
        # the end event was recorded before work the call started on its own streams had finished
        hack(res, "unaccounted_device_work",
             f"work on other streams ran {unjoined.median:.4f} ms past the end of the timed call "
             f"({s.median:.4f} ms): the call returned before its work was done")


def _telemetry(res: WorkloadResult) -> None:
    """The clocks read while the workload was timed: ``low_sm_clock``, ``clocks_throttled``."""
    if any(c.get("sm_clock_mhz") and c.get("max_sm_clock_mhz") and c["sm_clock_mhz"] < 0.75 * c["max_sm_clock_mhz"]
           for c in res.clocks):
        res.warnings.append("low_sm_clock")
    if any(set(c.get("throttle_reasons") or ()) & SLOWDOWN_REASONS for c in res.clocks):
        # a power cap or heat slowed the clocks while this was timed (a 3.3 ms bf16 GEMM ran 12% slower on
        # an H200 at its power cap): the time is real but not repeatable on a cooler chip
        res.warnings.append("clocks_throttled")


def _proof(res: WorkloadResult, r: WorkloadReport) -> None:
    """What the language proof and the interpreter leave as warnings."""
    if res.interpreted:
        res.warnings.append("interpreted")
    if res.dsl_share is not None and res.dsl_share < 0.5:
        res.warnings.append("dsl_share_low")  # most device time went to kernels that are not the solution's own
    if r.profiled and res.verdict == "passed" and res.dsl_share is None:
        # the profiled call ran but gave no device work: the profiler could not run (its error is in the
        # candidate's log), the call launched nothing, or it replaced the harness's session; the language proof
        # rests on the ghost replay alone
        res.warnings.append("language_proof_unavailable")


BASELINE_FIELDS = (("eager", "eager_ms"), ("compile", "compile_ms"), ("baseline_file", "baseline_file_ms"))


def _baselines(res: WorkloadResult, base: dict[str, dict[str, dict[str, Any]]], uuid: str) -> None:
    """Each passing baseline's time, the fastest as the score's baseline; a failing one as a warning."""
    options = []
    for kind, field_name in BASELINE_FIELDS:
        b = base.get(kind, {}).get(uuid) or {}
        if b.get("verdict") == "passed" and b.get("time_ms"):
            setattr(res, field_name, b["time_ms"])
            options.append((kind, b["time_ms"]))
        elif b.get("verdict") not in (None, "passed", "unsupported"):
            name = "reference" if kind == "eager" else BASELINE_LABEL[kind].replace(".py", "_file")
            res.warnings.append(f"{name}_{b['verdict']}")
    if options:
        kind, t = min(options, key=lambda kv: kv[1])
        res.baseline_ms, res.baseline = t, BASELINE_LABEL[kind]


def _speed_of_light(res: WorkloadResult, work: Work | str | None, datasheet: Ceilings,
                    calibrated: Ceilings | None) -> None:
    """T_SOL and its bound from the counted work (``no_sol_bound`` where it could not be counted)."""
    if isinstance(work, Work):
        sol = sol_time(work, datasheet)
        res.sol_ms, res.bound, res.flops, res.bytes = sol.sol_ms, sol.bound, work.flops, work.bytes
        if calibrated is not None:
            res.calibrated_sol_ms = sol_time(work, calibrated).sol_ms
    elif isinstance(work, str):
        res.warnings.append("no_sol_bound")


def _physics_floor(res: WorkloadResult, problem: Problem, datasheet: Ceilings, llc_bytes: int | None) -> None:
    """A time under T_SOL. Under the hard floor (latency, the outputs' own writes) it is impossible: the
    measurement was fooled (``below_floor``). Between it and T_SOL either the bound over-counts (our defect) or
    the time is forged: the workload passes but is left unscored, flagged for the bound's review
    (``bound_suspect``), so neither an honest kernel is accused nor a forged time rewarded (docs/SECURITY.md)."""
    below = res.time_ms is not None and res.sol_ms and res.time_ms < res.sol_ms
    if not below or res.verdict not in ("passed", "reward_hack"):
        return
    hard = hard_floor_ms(problem, res.axes, datasheet, llc_bytes)
    if res.time_ms < hard:
        hack(res, "below_floor", f"{res.time_ms:.4g} ms is below what any call takes here ({hard:.4g} ms: the "
                                 "latency floor and the outputs' own writes)")
    elif res.verdict == "reward_hack":
        res.reasons.append("below_sol")
    else:
        res.warnings += ["below_sol", "bound_suspect"]
        res.message = res.message or (f"{res.time_ms:.4g} ms is below the speed-of-light bound "
                                      f"{res.sol_ms:.4g} ms: left unscored until the bound is reviewed")


def _audit(res: WorkloadResult, r: WorkloadReport) -> None:
    """A time the trusted side's own clock did not confirm scores nothing (``timing.audit``); one it confirmed from
    upper bounds alone is said to be (``time_bounded``)."""
    if res.verdict == "passed" and res.time_ms is not None and not res.interpreted and res.audit_ms is None:
        res.warnings.append("time_unconfirmed")
        if r.audit_unconfirmed:
            res.message = res.message or f"the time is unconfirmed: {r.audit_unconfirmed}"
    elif res.audit_ms is not None and res.audit_method == "stamps_bound":
        res.warnings.append("time_bounded")


def _score(res: WorkloadResult) -> None:
    """The SOL score (0 for a failing verdict; none while the time is unconfirmed or the bound suspect) and the
    speedups (none for an unconfirmed time)."""
    if res.verdict in INCORRECT:
        res.sol_score = 0.0
    elif res.verdict == "passed" and not res.interpreted and not {"bound_suspect", "time_unconfirmed"} & set(
            res.warnings):
        score = scoring.sol_score(res.time_ms, res.baseline_ms, res.sol_ms, True)
        res.sol_score = score.value
        res.warnings.extend(f for f in score.flags if f not in res.warnings)
    if "time_unconfirmed" in res.warnings:  # a time the trusted side's clock did not confirm earns no speedup either
        return
    if res.time_ms and res.eager_ms:
        res.speedup_vs_eager = res.eager_ms / res.time_ms
    if res.time_ms and res.baseline_ms:
        res.speedup_vs_baseline = res.baseline_ms / res.time_ms
