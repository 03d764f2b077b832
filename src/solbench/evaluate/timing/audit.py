"""The audit: a candidate's time confirmed by evidence its process cannot write.

The samples of a candidate's timing rounds (``cross_check``) are measured in its own process, where native code can
rewrite anything, and a round can hide work: its inputs are all in place before it starts, and outputs are read
after it ends. So after the rounds of every timed workload the trusted worker re-times ``AUDIT_CALLS`` calls
itself, one at a time, each with an input set that exists nowhere the candidate can read until that call's
clock has started:

- **GPU**: on a stream of its own the trusted worker holds the device (long enough for the candidate to enqueue
  the call: a call whose host side took longer is not counted), flushes the cache, stamps ``%globaltimer``
  (``globaltimer``), copies the call's inputs into its slot, fills the output room with the sentinel and
  raises the call's ``go`` flag (``memops``: a word of the arena); the candidate's stream waits for that flag,
  runs the call (its other streams joined) and raises the ``done`` flag; the trusted stream waits for it,
  stamps again and copies the slot's outputs out. The stamps bracket whatever ran between the flags, whoever
  launched it: without MPS two processes' kernels never run at once on a GPU, so nothing of the call runs
  outside them.
- **CPU**: the trusted worker writes the call's inputs into the slot, reads the candidate's CPU time from
  outside its process (``outside``: the kernel's per-thread accounting, which only running changes), sends
  ``go``, reads the candidate's ``ok``, reads its CPU time again and copies the outputs out. The candidate's
  process is sealed (``seccomp``: one thread, no new ones, no new processes), so all of a call's work is CPU
  time of that process between the two readings, however long the machine kept it waiting: unlike the wall
  clock around a pipe hand-over, this does not grow with the machine's load.

Every audited call's outputs are checked for presence, and a share of them, drawn after the call, judged against
the reference (``output_recheck``, ``audit_recheck``), so output written after a call's ``done`` flag (or after
``ok``) is not counted as output. The audit's time per call is the median bracket less the trusted side's own
work in it (on the GPU the copies in, the fill and the copy of a returned output into its slot, timed by the
trusted worker alone) and the hand-over between the two processes, calibrated against a null candidate (a
sandboxed process that never loads a solution). A timing whose median sample lies below the audit's time by more
than its resolution (``audit_verdict.verdict``), in a first audit and in a second on fresh inputs with the
hand-over calibrated anew, is ``reward_hack`` (``time_forgery``); where the audit cannot be made, the workload
passes unscored with the warning ``time_unconfirmed``. A first audit ends after ``SHORT_LOOK`` counted brackets
where the timing stands against even the slowest of them (``clearly_confirmed``: the common case of an honest
solution), judging proportionally more of their calls against the reference; any other first audit, and every
second one, counts all of its brackets. Where too few GPU brackets were on time (a call that waits on the device
inside itself is never queued whole behind a hold), the late ones, upper bounds of the call's time, can confirm
the timing but never convict it (``Audit.bounded``).
"""

from __future__ import annotations

import statistics
from typing import Any, Callable

from solbench.evaluate.boundary.ring import Layout, draw_sets, set_key
from solbench.evaluate.isolation.sandbox import CandidateGone
from solbench.evaluate.timing import audit_gpu
from solbench.evaluate.timing.audit_cpu import CpuAudit
from solbench.evaluate.timing.audit_gpu import OutOfRoom, Unaudited, out_of_memory
from solbench.evaluate.timing.audit_recheck import Recheck, unwritten_calls
from solbench.evaluate.timing.audit_verdict import (Audit, Calibration, center, clearly_confirmed, is_blind, resolution,
                                                     spread, verdict)
from solbench.evaluate.timing.handover import Ended
from solbench.evaluate.timing.slots import FLAG_STRIDE, Slots
from solbench.evaluate.trusted.outcomes import Rejected

AUDIT_CALLS = {"cuda": 12, "cpu": 16}
MIN_AUDIT_CALLS = 4  # a slow call is audited fewer times, never fewer than this
AUDIT_BUDGET_S = 1.0  # the audited calls' own time that sets how many a slow call gets
CALIB_GROUP = 32  # null calls in a bracket of the GPU's calibration (with brackets of one: the gap per call)
WARM_CALLS = 3  # the first calls of an audit are not counted (one for a slow call): ``warm_brackets``; the brackets
#: that hold them get the probe's inputs, no draw
AUDIT_DRAWS = 2_000_000  # draw numbers of audited calls (timed calls' are below)
#: a first audit ends after this many counted brackets where even its slowest bracket supports the timing
#: (``clearly_confirmed``); otherwise it goes on to its full count. Its brackets re-check their calls this many
#: times more often (``Recheck``), so that a short audit finds a call that skipped its work as surely as a full one.
#: A forged time lies below every bracket of the real work, so one bracket would decide; a second keeps one
#: whose hand-over read short by chance from ending an audit alone. Each costs a hand-over (on an H100 about 34 ms
#: for a group of 27 calls of 75 us), its fresh draws and its checks
SHORT_LOOK = 2
#: audits a disagreement gets before it convicts (``confirm``); each look draws its inputs this far from the last's
LOOKS = 2
LOOK_DRAWS = 100_000
#: audits too noisy to convict anything, looked past before the looks above (``confirm``); one more such leaves the
#: time unconfirmed. Under a load average of 5.5 on the 2-core machine three blind looks in a row happened
BLIND_LOOKS = 4


def _values(inputs: list[Any]) -> list[Any]:
    import torch

    return [None if isinstance(x, torch.Tensor) else x for x in inputs]


def _begin(sub, slots: Slots, values: list[list[Any]]) -> None:
    """The audit command, and the candidate's answer."""
    msg = {"op": "audit", "layout": slots.layout.describe(), "values": values, "flags": slots.flags,
           "flag_stride": FLAG_STRIDE}
    reply, gone = sub._exchange(msg, "audit_ready")
    if gone:
        if gone["verdict"] == "reward_hack":
            raise Rejected(gone["reasons"], gone.get("message") or "")
        raise Unaudited(gone.get("message") or "the candidate's process did not answer the audit")
    if reply.codes or reply.failed:
        raise Rejected(reply.codes or ["result_forgery"], f"dynamic checks at the audit: {reply.codes}")


def _end(sub, quiet: bool = False) -> None:
    """End the audit: the candidate's full reply, its checks and its harness digest (``quiet``: only end it)."""
    reply, gone = sub._exchange({"op": "audit_end"}, "audited")
    if quiet:
        return
    if gone:
        if gone["verdict"] == "reward_hack":
            raise Rejected(gone["reasons"], gone.get("message") or "")
        raise Unaudited(gone.get("message") or "the candidate's process did not end the audit")
    if reply.failed and not reply.codes:
        raise AuditFailed(sub._failure(reply), reply.lost)
    if reply.codes:
        raise Rejected(reply.codes, f"dynamic checks during the audit: {', '.join(reply.codes)}")
    if reply.refused:
        raise Rejected(["result_forgery"], "an audited call's result was refused, but no check reported why")


class AuditFailed(Exception):
    """The solution's call failed during the audit: a verdict like any failed call."""

    def __init__(self, failed: dict[str, Any], lost: bool):
        super().__init__(failed.get("message"))
        self.failed, self.lost = failed, lost


def run(sub, uuid: str, draw: Callable[[int], list[Any]], shapes, inplace: list[int], calib: Calibration,
        recheck: Callable | None, n: int, claimed_ms: float = 0.0, group: int | None = None,
        first_draw: int = 0, enough: Callable[[Audit], bool] | None = None) -> Audit:
    """Audit ``n`` counted brackets of ``sub`` on one workload: ``draw(seed)`` makes a call's inputs, ``shapes``
    are its outputs' (shape, dtype), ``inplace`` the positions of the inputs it updates (``recheck`` None: a null
    candidate, outputs unjudged). On the GPU a bracket holds a group of calls, as many as ``claimed_ms`` (the
    timing's median; 0 for one call) asks for (``audit_gpu.group_size``) or ``group``, fewer where their host side
    outlasts the longest hold; on the CPU one call. ``first_draw`` offsets the draws of its inputs (a second look
    sees none of the first's). ``enough(audit)``: asked after each counted bracket from the ``SHORT_LOOK``-th
    on, whether the audit may end there (its brackets then re-check ``n / SHORT_LOOK`` times as many calls)."""
    ctx = sub.ctx
    cuda = ctx.dev.type == "cuda"
    m = group or 1
    try:
        probe = draw(ctx.seed_for(uuid, AUDIT_DRAWS + first_draw))
        m = (group or _group(ctx, probe, shapes, inplace, claimed_ms)) if cuda else 1
        warm = warm_brackets(n, m, cuda)
        brackets = n + warm + (n if cuda else 0)  # on the GPU a bracket whose host side outlasted its hold is redone
        slots = Slots(sub, probe, shapes, inplace, m)
        engine = audit_gpu.GpuAudit(sub, slots, m) if cuda else CpuAudit(sub, slots)
    except Exception as exc:
        if out_of_memory(exc):
            raise OutOfRoom(m) from None
        raise
    values = [_values(probe)] * brackets  # plain values do not vary between draws of one workload
    _begin(sub, slots, values)
    audit = Audit(method="stamps" if cuda else "cpu_time", overhead_ms=calib.overhead_ms, call_ms=calib.call_ms,
                  group=m)
    check = Recheck(recheck, boost=max(1.0, n / SHORT_LOOK) if enough is not None else 1.0, every=not cuda)
    drawn = 0
    try:
        # the trusted side's own share is timed on a draw of m sets, as a counted bracket's (one batch: its copies
        # in are one per tensor); the brackets not counted get the same sets (no counted call sees them: its draws
        # come after them)
        unseen = _Unseen(ctx, uuid, draw, first_draw, probe, m)
        own = {m: engine.own_ms(unseen(m))}
        audit.own_ms = own[m]
        for k in range(brackets):
            if len(audit.trusted_ms) >= n:
                break
            m = engine.group
            seed = ctx.seed_for(uuid, AUDIT_DRAWS + first_draw + drawn)
            inputs = unseen(m) if k < warm else draw_sets(draw, seed, m)
            with ctx.phases("timing.audit.bracket"):  # the hand-over, the calls and the copies in and out
                outs, after, ms, late = engine.call(k, drawn % slots.layout.n, inputs, values[k])
            drawn += m
            audit.late += late
            if k < warm:
                if k == warm - 1:
                    unseen.drop()
                continue
            if m not in own:
                own[m] = engine.own_ms(unseen(m))
            per_call = (ms - own[m] - calib.overhead_ms) / m - calib.call_ms
            if late:  # an upper bound only (``Audit.bounded``); its calls are judged like any
                audit.bounds.append((per_call, m))
            else:
                audit.own_ms, audit.group, audit.calls = own[m], min(audit.group, m), audit.calls + m
                audit.trusted_ms.append(per_call)
            with ctx.phases("timing.audit.check"):
                left = unwritten_calls(outs)
                for j in range(m):  # every audited call left all of its output by its end
                    check(outs[j], inputs[j], after[j], set_key(seed, m, j), m, left[j])
            if not late and enough is not None and len(audit.trusted_ms) >= SHORT_LOOK and enough(audit):
                audit.short = True
                break
    except Ended:
        _end(sub)  # the candidate's full answer says why (a failure, a refused result, a check)
        raise Rejected(["result_forgery"], "an audited call was answered out of turn") from None
    except CandidateGone as gone:  # no answer within its limit (timeout), or its process ended (crash)
        raise AuditFailed(sub.gone(gone), True) from None
    except (Rejected, Unaudited):
        _end(sub, quiet=True)
        raise
    except Exception as exc:  # the trusted side's device memory ran out (the draws, the copies out, the checks)
        if not out_of_memory(exc):
            raise
        _end(sub, quiet=True)
        raise OutOfRoom(m) from None
    audit.rechecked = check.checked
    _end(sub)
    engine.finish(audit, warm)
    return audit


class _Unseen:
    """The input sets no counted call of an audit sees: ``self(k)`` is ``k`` sets of one draw of ``m`` or more
    (``k`` above that draws anew), made at the first ask, the probe itself for a group of one. Their draw number is
    the audit's first, the probe's, below every counted bracket's (the first counted bracket's draws start ``m``
    later). ``drop()`` lets them go once the brackets not counted are done."""

    def __init__(self, ctx, uuid: str, draw: Callable[[int], list[Any]], first_draw: int, probe: list[Any], m: int):
        self.draw, self.m, self.seed = draw, m, ctx.seed_for(uuid, AUDIT_DRAWS + first_draw)
        self.made: list[list[Any]] = [probe] if m == 1 else []

    def __call__(self, k: int) -> list[list[Any]]:
        if len(self.made) < k:
            self.made = draw_sets(self.draw, self.seed, max(k, self.m))
        return self.made[:k]

    def drop(self) -> None:
        self.made = []


def warm_brackets(n: int, m: int, cuda: bool) -> int:
    """The brackets of an audit of ``n`` counted ones of ``m`` calls that are not counted: enough for
    ``WARM_CALLS`` calls (one for a slow call, ``n`` under ``AUDIT_CALLS``), never fewer than one. A group's first
    bracket makes a call on every slot the later ones use, and its host side sets their hold."""
    calls = WARM_CALLS if n >= AUDIT_CALLS["cuda" if cuda else "cpu"] else 1
    return max(1, -(-calls // max(1, m)))


def _group(ctx, probe: list[Any], shapes, inplace: list[int], claimed_ms: float) -> int:
    """Calls per GPU bracket for this workload (``audit_gpu.group_size``); one for a null candidate's."""
    if claimed_ms <= 0:
        return 1
    import torch

    _, slot_bytes = Layout.plan(1, probe, shapes, set(inplace))
    free, _ = torch.cuda.mem_get_info(ctx.dev)
    return audit_gpu.group_size(claimed_ms, slot_bytes, free)


def calibrate(ctx, start_null: Callable[[], Any]) -> Calibration:
    """The GPU's hand-over against a null candidate (``start_null()`` returns a started null subject), from
    brackets of one null call and of ``CALIB_GROUP`` (each call one kernel of the least length): per bracket
    ``overhead_ms``, per call ``call_ms``: the gap between one call's kernels and the next's, which a CUPTI
    sample leaves out."""
    null = start_null()
    try:
        import torch

        args = ("solbench-calibration", _null_draw(ctx), [((64,), torch.float32)], [], Calibration(0.0, 0.0), None)
        one = run(null, *args, 24)
        many = run(null, *args, 24, group=CALIB_GROUP)
        x1, xm = center(one.trusted_ms, "cuda"), center(many.trusted_ms, "cuda") * CALIB_GROUP
        call = max(0.0, (xm - x1) / (CALIB_GROUP - 1))
        return Calibration(overhead_ms=x1 - call, spread_ms=spread(one.trusted_ms, "cuda"), call_ms=call)
    finally:
        null.close()


def _null_draw(ctx) -> Callable[[int], list[Any]]:
    import torch

    def draw(seed: int) -> list[Any]:
        return [torch.zeros(64, dtype=torch.float32, device=ctx.dev)]

    return draw


#: per worker process: the hand-over measured against a null candidate, by device and sandbox mode
_CALIBRATED: dict[tuple[str, str], Calibration] = {}


def calibrated(dev) -> bool:
    """Whether this worker has calibrated the hand-over on ``dev`` (in some sandbox mode)."""
    return any(key[0] == str(dev) for key in _CALIBRATED)


def calibration(sub, uuid: str, draw: Callable[[int], list[Any]], shapes, inplace: list[int],
                fresh: bool = False) -> Calibration:
    """What a call's bracket holds besides the call. On the GPU: the hand-over, measured once per worker against
    a null candidate (the trusted side's own work is timed per workload by the trusted side alone). On the CPU:
    the candidate's harness around the call (reading ``go``, storing a returned output, answering), measured
    per workload against the job's null candidate on the same slots, inputs and convention; ``fresh``: against
    a null candidate started anew (a later look: on the CPU machine one null process read 4 ms of harness per
    call, more than a candidate's whole call, look after look, while others read under 2)."""
    ctx = sub.ctx
    try:
        if ctx.dev.type != "cuda":
            if fresh:
                sub.drop_null_partner()
            null = sub.null_partner()
            one = draw(ctx.seed_for(uuid, AUDIT_DRAWS))  # a null call reads no value: one draw serves every call
            xs = run(null, uuid, lambda seed: one, shapes, inplace, Calibration(0.0, 0.0), None, 12).trusted_ms
            return Calibration(overhead_ms=center(xs, "cpu"), spread_ms=spread(xs, "cpu"))
        key = (str(ctx.dev), str(sub.isolation))
        if key not in _CALIBRATED:
            _CALIBRATED[key] = calibrate(ctx, sub.new_null_partner)
        return _CALIBRATED[key]
    except AuditFailed as failed:  # the null candidate's failure is not the solution's
        raise Unaudited(f"the null candidate did not answer: {failed.failed.get('message')}") from None


def audit_calls(samples_ms: list[float], kind: str) -> int:
    """How many calls to audit: ``AUDIT_CALLS``, fewer for a call so slow that they would take more than
    ``AUDIT_BUDGET_S``, never fewer than ``MIN_AUDIT_CALLS``."""
    claimed_s = statistics.median(samples_ms) / 1e3 if samples_ms else 0.0
    if claimed_s <= 0:
        return AUDIT_CALLS[kind]
    return max(MIN_AUDIT_CALLS, min(AUDIT_CALLS[kind], int(AUDIT_BUDGET_S / claimed_s)))


def confirm(sub, uuid: str, draw: Callable[[int], list[Any]], shapes, inplace: list[int], recheck: Callable,
            samples_ms: list[float]) -> dict[str, Any]:
    """Audit the workload and hold the timing's samples against it: the audit's record for the result, with
    ``audit_unconfirmed`` where it could not be made. A disagreement is looked at again before it convicts
    (``LOOKS``): a second audit on fresh inputs, its hand-over calibrated anew, so that a disturbance of one audit
    (another process's kernels in its brackets, a calibration taken while the device was busy) is not called a
    forgery; a forged time stays below every audit of the work, and one whose second audit cannot be made stands
    convicted by the first. An audit too noisy to tell its time from nothing (``is_blind``) confirms nothing and is
    followed by another look (``BLIND_LOOKS`` such at most). Raises ``Rejected`` (``time_forgery``, or what an
    audited call showed) and ``AuditFailed``."""
    kind = "cuda" if sub.ctx.dev.type == "cuda" else "cpu"
    n = audit_calls(samples_ms, kind)
    forged: list[tuple[str, str]] = []  # per look that found a forgery: its time per call, why
    blind = 0  # looks too noisy to tell their time from nothing, looked past (``BLIND_LOOKS`` at most)
    look = -1
    while look + 1 < LOOKS + blind:
        look += 1
        outcome, why, audit, calib = _look(sub, uuid, draw, shapes, inplace, recheck, samples_ms, n, look)
        if outcome == "forged":
            forged.append((f"{audit.median_ms:.4g} ms", why))
            continue
        if outcome == "confirmed" and is_blind(audit, calib, kind):
            if blind < BLIND_LOOKS:
                blind += 1
                continue
            # the last look allowed was blind too: it confirms nothing (the time is left unconfirmed, unscored)
            outcome, why = "unconfirmed", (f"{look + 1} audits were each too noisy to tell the time from none (the "
                                           f"last: {audit.median_ms:.4g} ms per call, resolution "
                                           f"{resolution(audit, calib, kind):.4g} ms)")
        if forged and outcome != "confirmed":  # a first audit found a forgery and the second was not made
            raise Rejected(["time_forgery"], f"{forged[0][1]} (a second audit could not be made: {why})")
        record = {"audit_unconfirmed": why} if audit is None else dict(audit.record())
        record["audit_looks"] = look + 1
        if outcome == "unconfirmed" and audit is not None:
            record.update(audit_ms=None, audit_unconfirmed=why)
        elif outcome == "confirmed":
            record["audit_resolution_ms"] = round(resolution(audit, calib, kind), 6)
        return record
    raise Rejected(["time_forgery"], f"{why} (audits: {', '.join(ms for ms, _ in forged)} per call, each on fresh "
                   "inputs)")


def _look(sub, uuid: str, draw: Callable[[int], list[Any]], shapes, inplace: list[int], recheck: Callable,
          samples_ms: list[float], n: int, look: int) -> tuple[str, str | None, Audit | None, Calibration | None]:
    """One audit (the ``look``-th: its own draws, and past the first a fresh calibration of the hand-over) held
    against the samples: (``verdict``'s outcome or "unconfirmed", why, the audit, its calibration)."""
    ctx = sub.ctx
    try:
        if look:
            _CALIBRATED.pop((str(ctx.dev), str(sub.isolation)), None)
        with ctx.phases("timing.audit.calibration"):
            calib = calibration(sub, uuid, draw, shapes, inplace, look > 0)
        kind = "cuda" if ctx.dev.type == "cuda" else "cpu"
        short = (lambda a: clearly_confirmed(samples_ms, a, kind)) if look == 0 else None  # a second look is whole
        with ctx.phases("timing.audit"):
            audit = _run_within_memory(sub, uuid, draw, shapes, inplace, calib, recheck, n,
                                       statistics.median(samples_ms) if samples_ms else 0.0,
                                       first_draw=look * LOOK_DRAWS, enough=short)
    except Unaudited as why:
        return "unconfirmed", str(why)[:300], None, None
    if not audit.short and len(audit.trusted_ms) < n // 2:
        return _bounded(samples_ms, audit, calib, n)
    outcome, why = verdict(samples_ms, audit, calib, ctx.dev.type)
    return outcome, why, audit, calib


def _bounded(samples_ms: list[float], audit: Audit, calib: Calibration,
             n: int) -> tuple[str, str | None, Audit | None, Calibration | None]:
    """An audit too few of whose brackets were on time (GPU: the candidate's host side outlasted the hold) judged
    on its late ones as upper bounds (``Audit.bounded``): confirmed where the timing stands against even the
    slowest of at least half the brackets asked for, else unconfirmed, never forged."""
    bounded = audit.bounded()
    if len(bounded.trusted_ms) >= max(1, n // 2) and clearly_confirmed(samples_ms, bounded, "cuda"):
        return "confirmed", None, bounded, calib
    seen = f" (as upper bounds {bounded.median_ms:.4g} ms per call)" if bounded.trusted_ms else ""
    return "unconfirmed", (f"{audit.late} audited brackets took longer on the host than the longest hold "
                           f"({audit_gpu.MAX_HOLD_S * 1e3:.0f} ms){seen}"), audit, calib


def _run_within_memory(sub, *args, **kw) -> Audit:
    """``run``, and where the trusted side's device memory did not hold its groups of calls, ``run`` again with
    one call per bracket (``OutOfRoom`` where even that does not fit: the time stays unconfirmed). On a device
    whose memory a workload nearly fills (an 8192-token cross-entropy over a 128k vocabulary on an 80 GB H100),
    a group's slots, fresh draws and copies out are the audit's largest demand, and a solution that fits is not
    failed for the harness's own."""
    try:
        return run(sub, *args, **kw)
    except OutOfRoom as full:
        if full.group <= 1:
            raise
    import gc

    import torch

    gc.collect()
    if sub.ctx.dev.type == "cuda":
        torch.cuda.empty_cache()  # what the first try's blocks held goes back before the slots are lent again
    return run(sub, *args, group=1, **kw)
