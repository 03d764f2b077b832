"""The runner's judgement of one workload: the trusted worker's result message becomes a ``WorkloadResult`` with
statistics, the timing checks that need the whole picture, warnings, baselines, the SOL bound and the score."""

from __future__ import annotations

from typing import Any

from solbench.analysis.roofline import Work, sol_time
from solbench.evaluate.baselines import BASELINE_LABEL
from solbench.evaluate.timing.stats import summarize
from solbench.hardware.spec import Ceilings
from solbench.hardware.telemetry import SLOWDOWN_REASONS
from solbench.problems.problem import Problem
from solbench.records import scoring
from solbench.records.verdict import INCORRECT, WorkloadResult

#: warnings the trusted worker may attach to a workload
WORKER_WARNINGS = frozenset({"ghost_inconclusive"})


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


def judge(problem: Problem, uuid: str, r: dict[str, Any] | None, base: dict[str, dict[str, dict[str, Any]]],
          work: Work | str | None, datasheet: Ceilings, calibrated: Ceilings | None,
          llc_bytes: int | None = None) -> WorkloadResult:
    w = problem.workload(uuid)
    r = r or {"verdict": "runtime_error", "reasons": ["no_result"]}
    res = WorkloadResult(uuid=uuid, label=w.label, axes=problem.definition.resolve_axes(w.axes),
                         verdict=r.get("verdict", "runtime_error"), reasons=list(r.get("reasons") or []),
                         message=r.get("message"), interpreted=bool(r.get("interpreted")),
                         max_abs_err=r.get("max_abs_err"), max_rel_err=r.get("max_rel_err"),
                         failure=r.get("failure"), peak_memory_bytes=r.get("peak_memory_bytes"),
                         graph_ms=r.get("graph_ms"), graph_error=r.get("graph_error"),
                         timing_method=r.get("timing_method"),
                         clocks=r.get("clocks") or [], wall_ms=r.get("wall_ms") or [],
                         wall_event_ms=r.get("wall_event_ms") or [],
                         dsl_share=r.get("dsl_share"), rechecked=r.get("rechecked"),
                         timed_calls=r.get("timed_calls"), timing_notes=list(r.get("clock_notes") or []),
                         stray_records=int(r.get("stray_records") or 0),
                         event_gaps=int(r.get("event_gaps") or 0),
                         phases={k: v for k, v in (r.get("phases") or {}).items() if isinstance(v, (int, float))},
                         limit_s=r.get("limit_s") if isinstance(r.get("limit_s"), (int, float)) else None,
                         audit_ms=r.get("audit_ms"), audit_calls=r.get("audit_calls"),
                         audit_group=r.get("audit_group"),
                         audit_method=r.get("audit_method"), audit_overhead_ms=r.get("audit_overhead_ms"),
                         audit_resolution_ms=r.get("audit_resolution_ms"))
    res.warnings.extend(w for w in (r.get("warnings") or []) if w in WORKER_WARNINGS)
    if res.verdict == "passed" and not res.reasons:
        res.reasons = []
    samples = [x for x in (r.get("samples_ms") or []) if x is not None]
    if samples:
        s = summarize(samples)
        res.samples_ms = samples
        res.time_ms, res.iqr_ms, res.n_samples = s.median, s.iqr, s.n
        if s.median > 0 and s.iqr / s.median > 0.10:
            res.warnings.append("noisy_timing")
        # every timing defence adds its reason code, also to a verdict another defence already made reward_hack,
        # so a result names each pattern detected
        judged = res.verdict in ("passed", "reward_hack")
        events = [x for x in (r.get("event_ms") or []) if isinstance(x, (int, float))]
        if r.get("timing_method") == "cupti" and events:
            res.event_time_ms = summarize(events).median
        elif r.get("timing_method") == "cuda_events" and res.timing_notes:
            res.warnings.append("timing_fallback")  # CUPTI was meant but could not time this workload
        if res.wall_ms and judged and r.get("timing_method") in ("cuda_events", "cupti"):
            # synchronised wall time far above the event time of the same calls: work ran where the events did
            # not see it (0 of 164 honest suite measurements on the H200 came near this threshold). The samples
            # are taken with the stream held, so they leave out the host's launch time, which wall time keeps:
            # compare with the events of the wall-time calls themselves, which wait for the host as it does.
            pairs = list(zip(res.wall_ms, res.wall_event_ms)) or [(w, s.median) for w in res.wall_ms]
            # every call must show the unexplained time, so one slow host moment is not an accusation
            if all(w > 1.5 * e + 0.2 for w, e in pairs):
                wall, seen = min(pairs)
                hack(res, "unaccounted_device_work",
                      f"event time {seen:.4f} ms but synchronised wall time {wall:.4f} ms: "
                      "work on another stream or thread")
        unjoined = summarize([x for x in (r.get("unjoined_ms") or []) if isinstance(x, (int, float))])
        if unjoined and judged and unjoined.median > 0.1 * s.median + 0.005:
            # the end event was recorded before work the call started on its own streams had finished
            hack(res, "unaccounted_device_work",
                  f"work on other streams ran {unjoined.median:.4f} ms past the end of the timed call "
                  f"({s.median:.4f} ms): the call returned before its work was done")
        low_clock = [c for c in res.clocks if c.get("sm_clock_mhz") and c.get("max_sm_clock_mhz")
                     and c["sm_clock_mhz"] < 0.75 * c["max_sm_clock_mhz"]]
        if low_clock:
            res.warnings.append("low_sm_clock")
        if any(set(c.get("throttle_reasons") or ()) & SLOWDOWN_REASONS for c in res.clocks):
            # a power cap or heat slowed the clocks while this was timed (a 3.3 ms bf16 GEMM ran 12% slower on
            # an H200 at its power cap): the time is real but not repeatable on a cooler chip
            res.warnings.append("clocks_throttled")
    if res.interpreted:
        res.warnings.append("interpreted")
    if res.dsl_share is not None and res.dsl_share < 0.5:
        res.warnings.append("dsl_share_low")  # most device time went to kernels that are not the solution's own
    if r.get("profiled") and res.verdict == "passed" and res.dsl_share is None:
        # the profiled call ran but gave no device work: the profiler could not run (its error is in the
        # candidate's log), the call launched nothing, or it replaced the harness's session; the language proof
        # rests on the ghost replay alone
        res.warnings.append("language_proof_unavailable")
    # baselines
    for kind, field_name in (("eager", "eager_ms"), ("compile", "compile_ms"), ("baseline_file", "baseline_file_ms")):
        b = base.get(kind, {}).get(uuid)
        if b and b.get("verdict") == "passed" and b.get("time_ms"):
            setattr(res, field_name, b["time_ms"])
    options = [(k, getattr(res, f)) for k, f in (("eager", "eager_ms"), ("compile", "compile_ms"),
                                                   ("baseline_file", "baseline_file_ms")) if getattr(res, f)]
    if options:
        kind, t = min(options, key=lambda kv: kv[1])
        res.baseline_ms, res.baseline = t, BASELINE_LABEL[kind]
    for kind in ("eager", "compile", "baseline_file"):
        b = base.get(kind, {}).get(uuid)
        if b and b.get("verdict") not in (None, "passed", "unsupported"):
            name = "reference" if kind == "eager" else BASELINE_LABEL[kind].replace(".py", "_file")
            res.warnings.append(f"{name}_{b.get('verdict')}")
    # speed of light
    if isinstance(work, Work):
        sol = sol_time(work, datasheet)
        res.sol_ms, res.bound, res.flops, res.bytes = sol.sol_ms, sol.bound, work.flops, work.bytes
        if calibrated is not None:
            res.calibrated_sol_ms = sol_time(work, calibrated).sol_ms
    elif isinstance(work, str):
        res.warnings.append("no_sol_bound")
    # physics floor. Under the hard floor (latency, the outputs' own writes) a time is impossible: the measurement
    # was fooled. Between it and T_SOL either the bound over-counts (our defect) or the time is forged: the
    # workload passes but is left unscored, flagged for the bound's review (``bound_suspect``), so neither an
    # honest kernel is accused nor a forged time rewarded (docs/SECURITY.md)
    below = res.time_ms is not None and res.sol_ms and res.time_ms < res.sol_ms
    if below and res.verdict in ("passed", "reward_hack"):
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
    # a time the trusted side's own clock did not confirm scores nothing (``audit``)
    if res.verdict == "passed" and res.time_ms is not None and not res.interpreted and res.audit_ms is None:
        res.warnings.append("time_unconfirmed")
        if r.get("audit_unconfirmed"):
            res.message = res.message or f"the time is unconfirmed: {r['audit_unconfirmed']}"
    # scores
    correct = res.verdict == "passed"
    if res.verdict in INCORRECT:
        res.sol_score = 0.0
    elif correct and not res.interpreted and not {"bound_suspect", "time_unconfirmed"} & set(res.warnings):
        score = scoring.sol_score(res.time_ms, res.baseline_ms, res.sol_ms, True)
        res.sol_score = score.value
        res.warnings.extend(f for f in score.flags if f not in res.warnings)
    if res.time_ms and res.eager_ms:
        res.speedup_vs_eager = res.eager_ms / res.time_ms
    if res.time_ms and res.baseline_ms:
        res.speedup_vs_baseline = res.baseline_ms / res.time_ms
    return res
