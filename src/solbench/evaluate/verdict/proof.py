"""The language proof's verdicts from its evidence (DSL solutions, judged in ``stages``): the profiled call's account
of whose kernels did the work (``integrity.kernel_origin``), the interpreter's count of the elements the DSL kernels
stored on the CPU, and the ghost replay's share of the output that came out the same with the kernels as no-ops
(``integrity.ghost``). Each check returns a reward-hack reason and message, or None (with warnings added)."""

from __future__ import annotations

from typing import Any

#: the DSL kernels' share of the profiled call's device time under which the verdict is reward_hack (under 0.5
#: it is a warning, dsl_share_low)
MIN_DSL_SHARE = 0.25
#: the same under the one-language rule (``EvalOptions.single_language``): PyTorch glue (copies, fills) may take
#: the rest
SINGLE_LANGUAGE_SHARE = 0.75
#: device time of another language's or a library's kernels below which they are not counted (a stray fill)
FOREIGN_TOLERANCE = 0.02
#: elements of the outputs the interpreter saw the DSL kernels store, as a share of the output elements the call
#: produced, under which the kernels account only for a token part of the output
MIN_DSL_STORES = 0.5


def produced_elements(outputs: list[Any], before: list[Any]) -> int:
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


def store_proof(stores: int, outputs: list[Any], before: list[Any]) -> tuple[str, str] | None:
    """The interpreter's count of elements the DSL kernels stored against the elements the call produced: under
    ``MIN_DSL_STORES`` of them, a reward-hack reason and message; else None."""
    produced = produced_elements(outputs, before)
    if produced and stores < MIN_DSL_STORES * produced:
        return ("dsl_work_low",
                f"the solution's Triton kernels stored {stores} elements of the call's outputs, which hold {produced} "
                "produced elements: the kernels do not account for the output (on the CPU, the kernels must store "
                "the output themselves)")
    return None


def ghost_proof(share: float | None, warnings: list[str]) -> tuple[str, str] | None:
    """The ghost replay's share of the output that came out the same with every DSL kernel a no-op: over
    ``ghost.MAX_REPRODUCED``, a reward-hack reason and message; None, with ``ghost_inconclusive`` added to the
    warnings where the replay gave no share."""
    from solbench.evaluate.integrity import ghost

    if share is None:
        warnings.append("ghost_inconclusive")
    elif share > ghost.MAX_REPRODUCED:
        return ("ghost_replay", f"with every Triton kernel replaced by a no-op, {share:.1%} of the output came out "
                                "the same: the kernels do not do the work")
    return None
