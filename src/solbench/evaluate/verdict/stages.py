"""Judging one subject on one workload, in the trusted worker, by named stages (``judge_workload`` reads as their
outline): the workload's time limit; correctness over fresh draws, with the repeat call of the first draw, the
language proof and the ghost replay; the timing with its re-checks; the result message for the runner.

Correctness: ``draws`` draws, each with inputs from its own secret seed; the candidate runs before the
reference (stale memory of a reference output cannot help it); the first draw is called twice (an output left
over from earlier memory, or a lazy one, shows as a disagreement); inputs are compared with the pristine copies
kept here. Language proof (DSL solutions, its verdicts in ``proof``): on one draw picked from the run's secret,
the ghost replay (``integrity.ghost``), and the DSL kernels' own account of the work: the profiler's share of
device time on the GPU (one workload per solution by default), the interpreter's count of stored elements on the
CPU.
"""

from __future__ import annotations

import math
import random
from typing import Any

from solbench.evaluate.boundary.calls import short_traceback
from solbench.evaluate.boundary.protocol import MAX_BATCH
from solbench.evaluate.trusted.outcomes import Called
from solbench.evaluate.trusted.local import LocalSubject
from solbench.evaluate.verdict.limits import workload_limit
from solbench.evaluate.verdict.proof import ghost_proof, language_proof, store_proof
from solbench.evaluate.verdict.rechecks import Rechecks

#: the draw number of the reference call that sets a workload's time limit (``limits``), apart from the others
LIMIT_DRAW = 999_999
#: the most arena bytes (inputs and outputs' rooms) of a workload's checked calls made in one exchange (``batch``)
BATCH_BYTES = 512 << 20


def _nanmax(a: float | None, b: float | None) -> float:
    """The larger error, a NaN counting as infinitely large (max() would drop it)."""
    vals = [math.inf if (x is not None and x != x) else x for x in (a, b) if x is not None]
    return max(vals) if vals else 0.0


def judge_workload(ctx, subject, uuid: str) -> dict[str, Any]:
    """Check and time one subject on one workload; the result message's fields (``lost``: this process's CUDA
    context is gone)."""
    judging = WorkloadJudging(ctx, subject, uuid)
    try:
        subject.begin(uuid, ctx.reference)
        judging.limit()
        judging.batch()
        for d in range(judging.draws):  # correctness; with the repeat call, the language proof, the ghost replay
            if not judging.draw(d):
                break
        timed = judging.timing()
        if timed is not None:
            judging.rechecks(timed)
            judging.timed_result(timed)
    except Exception as exc:
        judging.crashed(exc)
    subject.end()
    return judging.final()


class WorkloadJudging(Rechecks):
    """One subject judged on one workload: the workload, its tolerances, the result message so far, the warnings
    and the memory peaks, and the stages that fill them (a stage returns False once it has set a verdict)."""

    def __init__(self, ctx, subject, uuid: str):
        from solbench.evaluate.verdict.correctness import tolerance_for
        from solbench.problems.roles import torch_dtype

        self.ctx, self.subject, self.uuid = ctx, subject, uuid
        self.job, self.definition, self.dev = ctx.job, ctx.definition, ctx.dev
        self.out_specs, self.inplace, self.input_names = ctx.out_specs, ctx.inplace, ctx.input_names
        definition, out_specs, inplace = self.definition, self.out_specs, self.inplace
        self.untrusted = subject.untrusted
        self.workload = w = ctx.problem.workload(uuid)
        self.axes = definition.resolve_axes(w.axes)
        tf32 = bool(definition.allow_tf32)
        self.tols = [tolerance_for(spec.dtype, definition.tolerance, w.tolerance, tf32=tf32) for _, spec in out_specs]
        self.tols += [tolerance_for(definition.inputs[n].dtype, definition.tolerance, w.tolerance, tf32=tf32)
                      for n in inplace]
        self.names = [n for n, _ in out_specs] + inplace
        self.modes = [spec.compare for _, spec in out_specs] + [None] * len(inplace)
        self.dtypes = ([torch_dtype(s.dtype) for _, s in out_specs]
                       + [torch_dtype(definition.inputs[n].dtype) for n in inplace])
        self.result: dict[str, Any] = {"verdict": "passed", "reasons": [], "interpreted": subject.interpreted}
        self.warnings: list[str] = []
        self.peaks: list[int] = []
        self.draws = int(self.job.get("draws", 5))
        secret = random.Random(f"{self.job.get('seed')}:{uuid}:proof")
        self.ghost_draw = secret.randrange(self.draws)  # which draw the ghost replay repeats: not always the same call
        self.ph = ctx.phases
        #: what ``batch`` made ahead: each draw's inputs (by draw) and calls (by draw, and "repeat" for the repeat)
        self.drawn: dict[int, list[Any]] = {}
        self.ahead: dict[Any, Called] = {}

    # ---- the stages, in the order judge_workload runs them ----------------------------------------------------

    def limit(self) -> None:
        """An untrusted subject's time limit on this workload, scaled from one reference call (``limits``); no
        verdict."""
        if self.untrusted:
            self.result["limit_s"] = workload_limit(self.reference_seconds(), self.job.get("workload_timeout_s"),
                                                    interpreted=self.subject.interpreted)
            self.subject.limit(self.result["limit_s"])

    def batch(self) -> None:
        """An untrusted subject's checked calls of every draw, the repeat of the first beside it, and for a DSL
        solution the ghost replay's call, in one exchange (``RemoteSubject.calls``) where they fit
        ``BATCH_BYTES``: the candidate's calls before every reference call of the workload, in the order the draws
        make them (the repeat right after the first draw's call, the ghost replay last). Each draw then judges its
        call as if made alone (``draw``); a batch that did not come back leaves the draws to call one at a time.
        No verdict."""
        if not self.untrusted or self.draws < 1:
            return
        self.drawn[0] = self.inputs(self.ctx.seed_for(self.uuid, 0))
        draws = min(self.draws, MAX_BATCH - 2)  # a workload of more draws calls the others one at a time
        ghost = self.subject.is_dsl and self.ghost_draw < draws
        if (draws + 1 + ghost) * self.subject.call_bytes(self.drawn[0], self.axes) > BATCH_BYTES:
            return
        for d in range(1, draws):
            self.drawn[d] = self.inputs(self.ctx.seed_for(self.uuid, d))
        keys = [0, "repeat", *range(1, draws)] + (["ghost"] if ghost else [])
        of = {"repeat": 0, "ghost": self.ghost_draw}  # the draw whose inputs a call takes: its own, else these
        sets = [self.drawn[of.get(k, k)] for k in keys]
        with self.ph("calls"):
            got = self.subject.calls(sets, self.axes, profile_first=self.profiled(0),
                                     modes=["ghost" if k == "ghost" else "normal" for k in keys])
        for key, called in zip(keys, got or []):
            self.ahead[key] = called

    def profiled(self, d: int) -> bool:
        """Whether draw ``d``'s call is profiled for the language proof."""
        return d == 0 and self.subject.proves and self.untrusted and self.ctx.profiled(self.uuid)

    def draw(self, d: int) -> bool:
        """Draw ``d`` of correctness, the candidate before the reference, and the checks that ride on it; False once
        one of them set a verdict (the draws stop)."""
        seed = self.ctx.seed_for(self.uuid, d)
        base = self.drawn.pop(d) if d in self.drawn else self.inputs(seed)
        profiled = self.profiled(d)
        first = self.ahead.pop(d) if d in self.ahead else self.call(base, profile=profiled)
        got = self.judged(base, first, f"draw {d}")
        if got is None or not self.proof_share(first, profiled):
            return False
        refs = self.reference(base, d)
        if refs is None:
            return False
        verdict = self.check(got, base, *refs)
        if self.untrusted and d == 0:
            verdict = self.repeat_call(base, refs, verdict)
            if verdict is None:
                return False
        dsl = self.subject.is_dsl and self.untrusted and verdict.ok
        if dsl and first.dsl_stores is not None and not self.proof_stores(first.dsl_stores, got, base):
            return False
        if dsl and d == self.ghost_draw and not self.ghost_replay(base, got):
            return False
        return self.draw_verdict(d, seed, verdict)

    def proof_share(self, first: Called, profiled) -> bool:
        """The profiled call's share of device time by whose kernels ran (``proof.language_proof``): reward_hack
        (foreign_kernel, no_dsl_kernel, dsl_share_low) or warnings; marks the result ``profiled`` on the GPU."""
        if profiled and self.dev.type == "cuda":
            self.result["profiled"] = True  # the trusted side warns when this call gave the proof no evidence
        if profiled and first.dsl_share is not None:
            self.result["dsl_share"] = first.dsl_share
            hack = language_proof(first.account, self.subject.language, bool(self.job.get("single_language")),
                                  self.warnings)
            if hack:
                self.fail("reward_hack", [hack[0]], hack[1])
                return False
        return True

    def reference(self, given: list[Any], d: int) -> tuple[Any, Any] | None:
        """The reference's outputs and fp64 anchor on the draw's inputs, on the first draw of an untrusted subject
        checked fit to judge by: invalid_reference (reference_failed or the unfit reason), or None after it."""
        try:
            ref, anchor = self.reference_of(given)
            unfit = self.ctx.reference_unfit(given, ref, anchor, self.check) if d == 0 and self.untrusted else None
        except Exception as exc:
            self.fail("invalid_reference", ["reference_failed"], short_traceback(exc))
            return None
        if unfit:
            self.fail("invalid_reference", [unfit[0]], unfit[1])
            return None
        return ref, anchor

    def repeat_call(self, given: list[Any], refs: tuple[Any, Any], verdict):
        """The first draw called again must agree: reward_hack (stale_memory) when only the repeat is right, or the
        repeat's verdict when only it is wrong; None after a verdict update."""
        # an output left over from earlier memory, or a lazy one, shows here
        again = self.judged(given, self.ahead.pop("repeat") if "repeat" in self.ahead else self.call(given),
                            "the repeat call")
        if again is None:
            return None
        verdict2 = self.check(again, given, *refs)
        if verdict2.ok and not verdict.ok:
            self.fail("reward_hack", ["stale_memory"], "wrong on the first call, right on the repeat: the output "
                                                       "came from memory left behind, not from this call's work")
            return None
        return verdict2 if verdict.ok and not verdict2.ok else verdict  # wrong on the repeat: judged as incorrect

    def proof_stores(self, stores: int, got: list[Any], given: list[Any]) -> bool:
        """On the CPU, the elements the DSL kernels stored against those the call produced (``proof.store_proof``):
        reward_hack (dsl_work_low)."""
        hack = store_proof(stores, got, self.before_of(given))
        if hack:
            self.fail("reward_hack", [hack[0]], hack[1])
            return False
        return True

    def ghost_replay(self, given: list[Any], got: list[Any]) -> bool:
        """The draw again with the DSL kernels as no-ops: the output must not come out the same
        (``proof.ghost_proof``): reward_hack (ghost_replay), or the warning ghost_inconclusive."""
        shot = self.ahead.pop("ghost") if "ghost" in self.ahead else self.call(given, mode="ghost")
        share = None
        if shot.failed is None and shot.outputs is not None and not shot.codes:
            from solbench.evaluate.integrity import ghost

            share = ghost.reproduced_share(got, self.ctx.with_inplace(shot.outputs, shot.inputs_after),
                                           self.before_of(given))
        elif shot.lost:
            self.subject.stop()  # its CUDA context did not survive the no-op kernels: the next call restarts it
        hack = ghost_proof(share, self.warnings)
        if hack:
            self.fail("reward_hack", [hack[0]], hack[1])
            return False
        return True

    def draw_verdict(self, d: int, seed: int, verdict) -> bool:
        """The draw's errors kept (the largest so far); the comparison's verdict (incorrect_*) and failure when it
        is not ok."""
        self.result["max_abs_err"] = _nanmax(self.result.get("max_abs_err"), verdict.max_abs_err)
        self.result["max_rel_err"] = _nanmax(self.result.get("max_rel_err"), verdict.max_rel_err)
        if not verdict.ok:
            self.fail(verdict.verdict, [verdict.code or verdict.verdict], verdict.reason,
                      failure={"draw": d, "seed": seed, "worst": verdict.worst})
            return False
        return True

    def timing(self):
        """The timing, when every draw passed and it is asked for (not for an interpreted subject), each timed call
        on fresh inputs and some re-checked (``recheck``): the subject's ``Timed``, or None."""
        if not (self.result["verdict"] == "passed" and self.job.get("time", True) and not self.subject.interpreted):
            return None
        with self.ph("timing"):
            return self.subject.time(self.uuid, self.axes, self.ctx.timing, _Draw(self), self.recheck)

    def rechecks(self, timed) -> None:
        """The timing's verdict: a failed timing's own (lost for a trusted subject), a failed re-check relabelled
        (``relabel``), or reward_hack for the dynamic checks' codes."""
        if timed.failed:
            self.result.update(timed.failed)
            self.result["lost"] = timed.lost and not self.untrusted
        elif timed.codes == ["output_recheck"] and timed.failure and isinstance(timed.failure.get("seed"), int):
            self.relabel(timed)
        elif timed.codes:
            self.fail("reward_hack", timed.codes, timed.message or f"dynamic checks after timing: {timed.codes}",
                      **({"failure": timed.failure} if timed.failure else {}))

    def timed_result(self, timed) -> None:
        """A clean timing's measurement and the audit's confirmation, into the result; no verdict."""
        if timed.timing is not None and not timed.codes and not timed.failed:
            t = timed.timing
            self.result.update(samples_ms=t.samples_ms, wall_ms=t.wall_ms, wall_event_ms=t.wall_event_ms,
                               graph_ms=t.graph_ms, graph_error=t.graph_error, clocks=t.clocks,
                               timing_method=t.method, unjoined_ms=t.unjoined_ms, timed_calls=t.calls,
                               rechecked=timed.rechecked, event_ms=t.event_ms, clock_notes=t.clock_notes[:3],
                               stray_records=t.stray, event_gaps=t.event_gaps)
            if timed.audit:
                self.result.update(timed.audit)

    def crashed(self, exc: Exception) -> None:
        """An exception out of any stage: runtime_error (out_of_memory, or exception, with cuda_fault and lost when
        this process's CUDA context broke)."""
        if isinstance(exc, self.ctx.torch.OutOfMemoryError):  # the solution's own comes back as a failed call
            self.fail("runtime_error", ["out_of_memory"], "device memory ran out in the trusted worker while it "
                      "judged this workload (its input draws, copies, reference or comparisons beside what the "
                      "solution's process holds)" if self.untrusted else None)
            return
        from solbench.evaluate.boundary.calls import cuda_healthy

        self.fail("runtime_error", ["exception"], short_traceback(exc))
        if self.dev.type == "cuda" and not cuda_healthy(self.ctx.torch):
            self.result["reasons"].append("cuda_fault")
            self.result["lost"] = True

    def final(self) -> dict[str, Any]:
        """The result message, once the subject has ended: the memory peak, warnings, phases; lost when a trusted
        subject broke this process's CUDA context."""
        result = self.result
        if self.peaks:
            result["peak_memory_bytes"] = max(self.peaks)
        if self.warnings:
            result["warnings"] = sorted(set(self.warnings))
        result["phases"] = self.ph.take()
        if isinstance(self.subject, LocalSubject) and self.dev.type == "cuda":
            from solbench.evaluate.boundary.calls import cuda_healthy

            if not cuda_healthy(self.ctx.torch):
                result["lost"] = True  # a trusted subject broke this process's context
        return result

    # ---- what the stages share: timed phases of calls, one call judged, comparison, re-checks --------------

    def inputs(self, seed: int) -> list[Any]:
        """The workload's inputs drawn from ``seed`` (phase ``inputs``)."""
        from solbench.problems.inputs import make_inputs

        with self.ph("inputs"):
            return make_inputs(self.definition, self.workload, seed, self.dev, self.ctx.problem.directory,
                               self.ctx.custom)

    def call(self, given: list[Any], **kw) -> Called:
        """One call of the subject (phase ``calls``)."""
        with self.ph("calls"):
            return self.subject.call(given, self.axes, **kw)

    def input_sets(self, seed: int, count: int) -> list[list[Any]]:
        """``count`` input sets of one draw of ``seed`` (phase ``inputs``; ``make_input_sets``)."""
        from solbench.problems.inputs import make_input_sets

        with self.ph("inputs"):
            return make_input_sets(self.definition, self.workload, seed, count, self.dev, self.ctx.problem.directory,
                                   self.ctx.custom)

    def redrawn(self, key: dict[str, Any]) -> list[Any]:
        """The inputs a failure's record names (``ring.set_key``): set ``set`` of a draw of ``sets``, or one draw."""
        if key.get("sets", 1) > 1:
            return self.input_sets(key["seed"], key["sets"])[key["set"]]
        return self.inputs(key["seed"])

    def reference_of(self, given: list[Any], anchor: list[Any] | None = None, ref: list[Any] | None = None):
        """The reference's outputs and fp64 anchor on ``given`` (``anchor`` and ``ref`` where already made; phase
        ``reference``)."""
        with self.ph("reference"):
            return self.ctx.reference_of(given, anchor, ref)

    def reference_seconds(self) -> float | None:
        """One reference call's wall time on a draw of its own: the scale of the workload's time limit."""
        given = self.inputs(self.ctx.seed_for(self.uuid, LIMIT_DRAW))
        with self.ph("limit"):
            try:
                return self.ctx.time_reference(given)
            except Exception:  # the reference's failure is judged on the first draw
                return None

    def fail(self, verdict: str, reasons: list[str], message: str | None, **extra) -> None:
        """Sets the result's verdict, its reason codes (sorted, once each), message and any extra fields."""
        self.result.update(verdict=verdict, reasons=sorted(set(reasons)), message=message, **extra)

    def judged(self, given: list[Any], called: Called, what: str) -> list[Any] | None:
        """One call's outputs (in-place inputs appended), or None after a verdict update."""
        if called.failed:
            self.result.update(called.failed)
            if called.codes and called.failed.get("verdict") != "reward_hack":
                self.fail("reward_hack", called.codes, f"dynamic checks after {what}: {', '.join(called.codes)}")
            return None
        if called.peak_memory_bytes is not None:
            self.peaks.append(called.peak_memory_bytes)
        codes = list(called.codes)
        if self.untrusted and self.mutated(given, called.inputs_after):
            codes.append("input_mutation")
        if codes:
            self.fail("reward_hack", codes, f"dynamic checks after {what}: {', '.join(sorted(set(codes)))}")
            return None
        return self.ctx.with_inplace(called.outputs, called.inputs_after)

    def mutated(self, pristine: list[Any], after: list[Any]) -> list[str]:
        """The inputs, other than in-place ones, that a call left different from their pristine copies."""
        from solbench.evaluate.integrity import dynamic

        return dynamic.mutated_inputs(pristine, after, self.input_names, set(self.inplace))

    def check(self, got: list[Any], given: list[Any], ref: list[Any], anchor: list[Any]):
        """Outputs against the reference and its anchor, or an answer the problem accepts (phase ``compare``)."""
        from solbench.evaluate.verdict.correctness import accept_alternative, compare

        named = dict(zip(self.input_names, given))
        with self.ph("compare"):
            return accept_alternative(compare(got, ref, anchor, self.names, self.dtypes, self.tols, self.modes, named,
                                              anchor_of=self.ctx.anchor_of), self.ctx.accept,
                                      named, got, ref, self.dtypes)

    def before_of(self, given: list[Any]) -> list[Any]:
        """Each output's value before the call: None for a fresh output, the pristine input for an in-place one."""
        return [None] * len(self.out_specs) + [given[self.input_names.index(n)] for n in self.inplace]


class _Draw:
    """A workload's draw for the timing: ``draw(seed)`` one input set, ``draw.sets(seed, count)`` a batch
    (``ring.draw_sets``)."""

    def __init__(self, judging: WorkloadJudging):
        self.judging = judging

    def __call__(self, seed: int) -> list[Any]:
        return self.judging.inputs(seed)

    def sets(self, seed: int, count: int) -> list[list[Any]]:
        return self.judging.input_sets(seed, count)
