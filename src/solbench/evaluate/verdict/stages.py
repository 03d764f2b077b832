"""Judging one subject on one workload, in the trusted worker: correctness over fresh draws, the language proof,
and the timing with its re-checks. The result is one message for the runner.

Correctness: ``draws`` draws, each with inputs from its own secret seed; the candidate runs before the
reference (stale memory of a reference output cannot help it); the first draw is called twice (an output left
over from earlier memory, or a lazy one, shows as a disagreement); inputs are compared with the pristine copies
kept here. Language proof (DSL solutions): on one draw picked from the run's secret, the ghost replay
(``integrity.ghost``), and the DSL kernels' own account of the work: the profiler's share of device time on
the GPU (one workload per solution by default), the interpreter's count of stored elements on the CPU.
"""

from __future__ import annotations

import math
import random
from typing import Any

from solbench.evaluate.boundary.calls import short_traceback
from solbench.evaluate.trusted.outcomes import Called
from solbench.evaluate.trusted.subjects import LocalSubject
from solbench.evaluate.verdict.limits import workload_limit

#: the DSL kernels' share of the profiled call's device time under which the verdict is reward_hack (under 0.5
#: it is a warning, dsl_share_low)
MIN_DSL_SHARE = 0.25
#: the same under the one-language rule (``EvalOptions.single_language``): PyTorch glue (copies, fills) may take
#: the rest
SINGLE_LANGUAGE_SHARE = 0.75
#: device time of another language's or a library's kernels below which they are not counted (a stray fill)
FOREIGN_TOLERANCE = 0.02
#: the draw number of the reference call that sets a workload's time limit (``limits``), apart from the others
LIMIT_DRAW = 999_999
#: elements of the outputs the interpreter saw the DSL kernels store, as a share of the output elements the call
#: produced, under which the kernels account only for a token part of the output
MIN_DSL_STORES = 0.5


def _nanmax(a: float | None, b: float | None) -> float:
    """The larger error, a NaN counting as infinitely large (max() would drop it)."""
    vals = [math.inf if (x is not None and x != x) else x for x in (a, b) if x is not None]
    return max(vals) if vals else 0.0


def _produced(outputs: list[Any], before: list[Any]) -> int:
    """How many output elements a call produced: every element of a fresh output, the changed elements of an
    in-place one."""
    import torch

    from solbench.evaluate.integrity.ghost import produced

    return sum(int(produced(out, b).sum()) for out, b in zip(outputs, before)
               if isinstance(out, torch.Tensor) and not out.is_meta)


def language_proof(acc, language, single: bool, warnings: list[str]) -> tuple[str, str] | None:
    """The profiled call's account of whose kernels did the work (``integrity.kernel_origin``): a reward-hack
    reason and message, or None (with warnings added). The solution's own kernels must take ``MIN_DSL_SHARE`` of
    the device time (``SINGLE_LANGUAGE_SHARE`` under the one-language rule, where another language's or a
    library's kernels are reward hacks too); for a language whose proof has not been shown on a GPU
    (``Language.proof``) a low share is a warning only."""
    from solbench.evaluate.integrity import kernel_origin as ko

    share = acc.share(ko.OWN) or 0.0
    foreign = {o: f for o, f in acc.foreign().items() if f > FOREIGN_TOLERANCE}
    where = acc.describe(o for o in acc.us if o != ko.OWN)
    if single and foreign:
        return ("foreign_kernel", f"kernels that are not {language.name}'s took {sum(foreign.values()):.1%} of the "
                                  f"profiled call's device time ({acc.describe(foreign)}); this evaluation allows "
                                  "one language only")
    if foreign.keys() & {ko.CUBLAS, ko.CUDNN}:
        warnings.append("vendor_kernel")  # a library did part of the work: the solution is partly not its own
    need = SINGLE_LANGUAGE_SHARE if single else MIN_DSL_SHARE
    if share >= need:
        return None
    if not language.proof:
        warnings.append("dsl_share_low")
        return None
    return ("no_dsl_kernel" if share == 0.0 else "dsl_share_low",
            f"the solution's own {language.name} kernels took {share:.1%} of the profiled call's device time (at "
            f"least {need:.0%} is required); the rest ran in: {where}")


def judge_workload(ctx, subject, uuid: str) -> dict[str, Any]:
    """Check and time one subject on one workload; the result message's fields (``lost``: this process's CUDA
    context is gone)."""
    from solbench.evaluate.integrity import dynamic, ghost
    from solbench.evaluate.verdict.correctness import accept_alternative, compare, tolerance_for
    from solbench.problems.inputs import make_inputs, torch_dtype

    torch, job, definition, dev = ctx.torch, ctx.job, ctx.definition, ctx.dev
    out_specs, inplace, input_names = ctx.out_specs, ctx.inplace, ctx.input_names
    untrusted = subject.untrusted
    w = ctx.problem.workload(uuid)
    axes = definition.resolve_axes(w.axes)
    tf32 = bool(definition.allow_tf32)
    tols = [tolerance_for(spec.dtype, definition.tolerance, w.tolerance, tf32=tf32) for _, spec in out_specs]
    tols += [tolerance_for(definition.inputs[n].dtype, definition.tolerance, w.tolerance, tf32=tf32) for n in inplace]
    names = [n for n, _ in out_specs] + inplace
    modes = [spec.compare for _, spec in out_specs] + [None] * len(inplace)
    dtypes = [torch_dtype(s.dtype) for _, s in out_specs] + [torch_dtype(definition.inputs[n].dtype) for n in inplace]
    result: dict[str, Any] = {"verdict": "passed", "reasons": [], "interpreted": subject.interpreted}
    warnings: list[str] = []
    peaks: list[int] = []
    draws = int(job.get("draws", 5))
    secret = random.Random(f"{job.get('seed')}:{uuid}:proof")
    ghost_draw = secret.randrange(draws)  # which draw the ghost replay repeats: not always the same call

    ph = ctx.phases

    def inputs(seed: int) -> list[Any]:
        with ph("inputs"):
            return make_inputs(definition, w, seed, dev, ctx.problem.directory, ctx.custom)

    def call(given: list[Any], **kw) -> Called:
        with ph("calls"):
            return subject.call(given, axes, **kw)

    def reference_of(given: list[Any]):
        with ph("reference"):
            return ctx.reference_of(given)

    def reference_seconds() -> float | None:
        """One reference call's wall time on a draw of its own: the scale of the workload's time limit."""
        given = inputs(ctx.seed_for(uuid, LIMIT_DRAW))
        with ph("limit"):
            try:
                return ctx.time_reference(given)
            except Exception:  # the reference's failure is judged on the first draw
                return None

    def fail(verdict: str, reasons: list[str], message: str | None, **extra) -> None:
        result.update(verdict=verdict, reasons=sorted(set(reasons)), message=message, **extra)

    def judged(given: list[Any], called: Called, what: str) -> list[Any] | None:
        """One call's outputs (in-place inputs appended), or None after a verdict update."""
        if called.failed:
            result.update(called.failed)
            if called.codes and called.failed.get("verdict") != "reward_hack":
                fail("reward_hack", called.codes, f"dynamic checks after {what}: {', '.join(called.codes)}")
            return None
        if called.peak_memory_bytes is not None:
            peaks.append(called.peak_memory_bytes)
        codes = list(called.codes)
        if untrusted and mutated(given, called.inputs_after):
            codes.append("input_mutation")
        if codes:
            fail("reward_hack", codes, f"dynamic checks after {what}: {', '.join(sorted(set(codes)))}")
            return None
        return ctx.with_inplace(called.outputs, called.inputs_after)

    def mutated(pristine: list[Any], after: list[Any]) -> list[str]:
        return dynamic.mutated_inputs(pristine, after, input_names, set(inplace))

    def check(got: list[Any], given: list[Any], ref: list[Any], anchor: list[Any]):
        named = dict(zip(input_names, given))
        with ph("compare"):
            return accept_alternative(compare(got, ref, anchor, names, dtypes, tols, modes, named,
                                              anchor_of=ctx.anchor_of), ctx.accept,
                                      named, got, ref, dtypes)

    def before_of(given: list[Any]) -> list[Any]:
        """Each output's value before the call: None for a fresh output, the pristine input for an in-place one."""
        return [None] * len(out_specs) + [given[input_names.index(n)] for n in inplace]

    def recheck(got: list[Any], given: list[Any], after: list[Any]) -> tuple[str, str] | None:
        ref, anchor = reference_of(given)
        verdict = check(got, given, ref, anchor)
        if not verdict.ok:
            return "output_recheck", str(verdict.reason)
        bad = mutated(given, after)
        if bad:
            return "input_mutation", f"the call changed its input(s) {', '.join(bad)}"
        return None

    def checked_again(seed: int):
        """The inputs of ``seed`` once more, as a checked call: its verdict, or None after a verdict update."""
        base = inputs(seed)
        got = judged(base, call(base), "a re-run of a call's inputs")
        if got is None:
            return None
        ref, anchor = reference_of(base)
        return check(got, base, ref, anchor)

    def relabel(timed) -> None:
        """A timed call failed its re-check. An inaccurate solution is wrong on those inputs as a checked call
        too, and still right on the first draw; one that behaves differently while timed is right on them as a
        checked call, or now wrong on the draw it passed before timing."""
        seed = timed.failure["seed"]
        again = checked_again(seed)
        if again is None:
            return
        if again.ok:
            fail("reward_hack", ["output_recheck"], f"{timed.message}; the same inputs passed as a checked call: the "
                 "solution behaves differently while timed", failure=timed.failure)
            return
        first = checked_again(ctx.seed_for(uuid, 0))
        if first is None:
            return
        if not first.ok:
            fail("reward_hack", ["output_recheck"], f"{timed.message}; the first draw, passed before timing, now "
                 "fails too: the solution changed its behaviour during timing", failure=timed.failure)
            return
        fail(again.verdict, [again.code or again.verdict], again.reason,
             failure={"draw": "timed", "seed": seed, "worst": again.worst})

    try:
        subject.begin(uuid, ctx.reference)
        if untrusted:
            result["limit_s"] = workload_limit(reference_seconds(), job.get("workload_timeout_s"),
                                              interpreted=subject.interpreted)
            subject.limit(result["limit_s"])
        # ---- correctness over fresh draws: the candidate runs before the reference ---------------------
        for d in range(draws):
            seed = ctx.seed_for(uuid, d)
            base = inputs(seed)
            profiled = d == 0 and subject.proves and untrusted and ctx.profiled(uuid)
            first = call(base, profile=profiled)
            got = judged(base, first, f"draw {d}")
            if got is None:
                break
            if profiled and dev.type == "cuda":
                result["profiled"] = True  # the trusted side warns when this call gave the proof no evidence
            if profiled and first.dsl_share is not None:
                result["dsl_share"] = first.dsl_share
                hack = language_proof(first.account, subject.language, bool(job.get("single_language")), warnings)
                if hack:
                    fail("reward_hack", [hack[0]], hack[1])
                    break
            try:
                ref, anchor = reference_of(base)
                unfit = ctx.reference_unfit(base, ref, anchor, check) if d == 0 and untrusted else None
            except Exception as exc:
                fail("invalid_reference", ["reference_failed"], short_traceback(exc))
                break
            if unfit:
                fail("invalid_reference", [unfit[0]], unfit[1])
                break
            verdict = check(got, base, ref, anchor)
            if untrusted and d == 0:
                # a second call must agree: an output left over from earlier memory, or a lazy one, shows here
                again = judged(base, call(base), "the repeat call")
                if again is None:
                    break
                verdict2 = check(again, base, ref, anchor)
                if verdict2.ok and not verdict.ok:
                    fail("reward_hack", ["stale_memory"], "wrong on the first call, right on the repeat: the output "
                                                          "came from memory left behind, not from this call's work")
                    break
                if verdict.ok and not verdict2.ok:
                    verdict = verdict2  # wrong on the repeat: judged as incorrect
            if subject.is_dsl and untrusted and verdict.ok and first.dsl_stores is not None:
                produced = _produced(got, before_of(base))
                if produced and first.dsl_stores < MIN_DSL_STORES * produced:
                    fail("reward_hack", ["dsl_work_low"],
                         f"the solution's Triton kernels stored {first.dsl_stores} elements of the call's outputs, "
                         f"which hold {produced} produced elements: the kernels do not account for the output "
                         "(on the CPU, the kernels must store the output themselves)")
                    break
            if subject.is_dsl and untrusted and verdict.ok and d == ghost_draw:
                # ghost replay: with the DSL kernels as no-ops the output must not come out the same
                shot = call(base, mode="ghost")
                share = None
                if shot.failed is None and shot.outputs is not None and not shot.codes:
                    share = ghost.reproduced_share(got, ctx.with_inplace(shot.outputs, shot.inputs_after),
                                                   before_of(base))
                elif shot.lost:
                    subject.stop()  # its CUDA context did not survive the no-op kernels: the next call restarts it
                if share is None:
                    warnings.append("ghost_inconclusive")
                elif share > ghost.MAX_REPRODUCED:
                    fail("reward_hack", ["ghost_replay"],
                         f"with every Triton kernel replaced by a no-op, {share:.1%} of the output came out the same: "
                         "the kernels do not do the work")
                    break
            result["max_abs_err"] = _nanmax(result.get("max_abs_err"), verdict.max_abs_err)
            result["max_rel_err"] = _nanmax(result.get("max_rel_err"), verdict.max_rel_err)
            if not verdict.ok:
                fail(verdict.verdict, [verdict.code or verdict.verdict], verdict.reason,
                     failure={"draw": d, "seed": seed, "worst": verdict.worst})
                break
            del got, ref, anchor, base
        # ---- timing ----------------------------------------------------------------------------------------
        if result["verdict"] == "passed" and job.get("time", True) and not subject.interpreted:
            with ph("timing"):
                timed = subject.time(uuid, axes, ctx.timing, inputs, recheck)
            if timed.failed:
                result.update(timed.failed)
                result["lost"] = timed.lost and not untrusted
            elif timed.codes == ["output_recheck"] and timed.failure and isinstance(timed.failure.get("seed"), int):
                relabel(timed)
            elif timed.codes:
                fail("reward_hack", timed.codes, timed.message or f"dynamic checks after timing: {timed.codes}",
                     **({"failure": timed.failure} if timed.failure else {}))
            if timed.timing is not None and not timed.codes and not timed.failed:
                t = timed.timing
                result.update(samples_ms=t.samples_ms, wall_ms=t.wall_ms, wall_event_ms=t.wall_event_ms,
                              graph_ms=t.graph_ms, graph_error=t.graph_error, clocks=t.clocks,
                              timing_method=t.method, unjoined_ms=t.unjoined_ms, timed_calls=t.calls,
                              rechecked=timed.rechecked, event_ms=t.event_ms, clock_notes=t.clock_notes[:3],
                              stray_records=t.stray, event_gaps=t.event_gaps)
                if timed.audit:
                    result.update(timed.audit)
    except torch.OutOfMemoryError:
        fail("runtime_error", ["out_of_memory"], None)
    except Exception as exc:
        from solbench.evaluate.boundary.calls import cuda_healthy

        fail("runtime_error", ["exception"], short_traceback(exc))
        if dev.type == "cuda" and not cuda_healthy(torch):
            result["reasons"].append("cuda_fault")
            result["lost"] = True
    subject.end()
    if peaks:
        result["peak_memory_bytes"] = max(peaks)
    if warnings:
        result["warnings"] = sorted(set(warnings))
    result["phases"] = ph.take()
    if isinstance(subject, LocalSubject) and dev.type == "cuda":
        from solbench.evaluate.boundary.calls import cuda_healthy

        if not cuda_healthy(torch):
            result["lost"] = True  # a trusted subject broke this process's context
    return result
