"""A timed call's re-check in the trusted worker, and what a failed one is judged as (``stages.WorkloadJudging``'s
part for them): the outputs against the reference's own call alone where that suffices, else against the fp64
anchor alone, the full check (both) only where neither does; a failed re-check is made again as a checked call
before it is called a reward hack or an inaccuracy.
"""

from __future__ import annotations

from typing import Any


class Rechecks:
    """The re-checks of a ``WorkloadJudging``: its calls, tolerances, reference, comparison and verdicts are the
    judging's (``call``, ``reference_of``, ``check``, ``mutated``, ``judged``, ``redrawn``, ``fail``)."""

    #: whether a re-check tries the reference's own call first (``within_reference``): until one of the
    #: workload's re-checks fails that test, after which its re-checks start from the anchor
    reference_first = True

    def _quick(self) -> bool:
        """Whether the outputs can be judged by a test against one set of outputs alone: not for outputs compared
        by a mode of their own (sets, fp8 steps, indices), which read the reference's answer, nor for integer and
        boolean outputs, which must equal the reference's exactly (the fp64 inputs' answer may differ from it)."""
        return not any(self.modes) and all(dt.is_floating_point for dt in self.dtypes)

    def within_reference(self, got: list[Any], given: list[Any]) -> tuple[bool, list[Any] | None]:
        """Whether the outputs pass ``|out - ref| <= atol + rtol * |ref|`` at every element against the
        reference's own call, with some element not zero, rtol at most 1 and no tolerance capping the absolute
        error. For a finite anchor that implies the plain test (``correctness``): ``|out - anchor| <= |out - ref|
        + |ref - anchor| <= atol + rtol * |anchor| + (1 + rtol) * |ref - anchor|``, within its ``2 * |ref -
        anchor|``. The reference is finite there (the test reads that), and its float64 anchor, the same code on
        the same values in a wider arithmetic, is finite wherever the narrower one is (for a reference that
        computes one function whatever the dtype). So a re-check that passes needs no float64 call, the dearest
        part of a re-check where the reference multiplies matrices. Returns whether they pass, and the
        reference's outputs (the later tests' to reuse); a failure sends the workload's later re-checks to the
        anchor first (``reference_first``)."""
        if not self._quick() or any(tol.max_abs_error is not None or (tol.rtol or 0.0) > 1.0 for tol in self.tols):
            return False, None
        from solbench.evaluate.verdict.elementwise import within

        with self.ph("reference"):
            ref = self.ctx.own_of(given)
        with self.ph("compare"):
            ok = len(got) == len(ref) and all(within(g, r, dt, tol.atol or 0.0, tol.rtol or 0.0, None, nonzero=True)
                                              for g, r, dt, tol in zip(got, ref, self.dtypes, self.tols))
        self.reference_first = ok
        return ok, ref

    def within_anchor(self, got: list[Any], given: list[Any]) -> tuple[bool, list[Any] | None]:
        """Whether the outputs pass the plain test with the reference's own rounding taken as none: ``|out -
        anchor| <= atol + rtol * |anchor|``, the fp64 anchor standing in for the reference. That test is the
        plain one less its ``2 * |ref - anchor|`` term, so what passes it passes the full check (``check``)
        (``_quick`` says for which outputs). Returns whether they pass, and the anchor where it was made (the full
        check's to reuse)."""
        if not self._quick():
            return False, None
        from solbench.evaluate.verdict.elementwise import within

        with self.ph("reference"):
            anchor = self.ctx.anchor_of(given)
        with self.ph("compare"):
            return len(got) == len(anchor) and all(
                within(g, a, dt, tol.atol or 0.0, tol.rtol or 0.0, tol.max_abs_error)
                for g, a, dt, tol in zip(got, anchor, self.dtypes, self.tols)), anchor

    def recheck(self, got: list[Any], given: list[Any], after: list[Any]) -> tuple[str, str] | None:
        """A timed call's outputs against the reference and its inputs against their pristine copies: a reason
        code and message (output_recheck, input_mutation), or None. Outputs that pass against the reference's own
        call alone (``within_reference``) or the fp64 anchor alone (``within_anchor``) pass; only the others cost
        both and the full check."""
        ok, ref = self.within_reference(got, given) if self.reference_first else (False, None)
        anchor = None
        if not ok:
            ok, anchor = self.within_anchor(got, given)
        if not ok:
            ref, anchor = self.reference_of(given, anchor, ref)
            verdict = self.check(got, given, ref, anchor)
            if not verdict.ok:
                return "output_recheck", str(verdict.reason)
        bad = self.mutated(given, after)
        if bad:
            return "input_mutation", f"the call changed its input(s) {', '.join(bad)}"
        return None

    def checked_again(self, key: dict[str, Any]):
        """The inputs ``key`` names once more (``redrawn``), as a checked call: its verdict, or None after a verdict
        update."""
        base = self.redrawn(key)
        got = self.judged(base, self.call(base), "a re-run of a call's inputs")
        if got is None:
            return None
        ref, anchor = self.reference_of(base)
        return self.check(got, base, ref, anchor)

    def relabel(self, timed) -> None:
        """A timed call failed its re-check. An inaccurate solution is wrong on those inputs as a checked call
        too, and still right on the first draw; one that behaves differently while timed is right on them as a
        checked call, or now wrong on the draw it passed before timing."""
        again = self.checked_again(timed.failure)
        if again is None:
            return
        if again.ok:
            self.fail("reward_hack", ["output_recheck"], f"{timed.message}; the same inputs passed as a checked call: "
                      "the solution behaves differently while timed", failure=timed.failure)
            return
        first = self.checked_again({"seed": self.ctx.seed_for(self.uuid, 0)})
        if first is None:
            return
        if not first.ok:
            self.fail("reward_hack", ["output_recheck"], f"{timed.message}; the first draw, passed before timing, "
                      "now fails too: the solution changed its behaviour during timing", failure=timed.failure)
            return
        self.fail(again.verdict, [again.code or again.verdict], again.reason,
                  failure={**timed.failure, "worst": again.worst})
