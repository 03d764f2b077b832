"""A candidate's timing, run by the trusted worker: rounds over a ring of fresh inputs, each round's report
cross-checked against the trusted side's clock and record of the round, and calls re-checked that the trusted
side picks after their outputs are written.

Per round the trusted side fills the ring (``ring.TrustedRing``: one independent draw per call, outputs
pre-filled), sends the round's call kinds, and on the reply checks that

- it is the reply the exchange allows (``protocol``) with the harness digest of before the solution loaded;
- it holds exactly one sample per held call and one wall time per wall call, each finite and non-negative, no
  event interval longer than the wall time around it, timestamps inside the trusted side's own window and
  samples that add up to no more than that window (``result_forgery`` otherwise);
- every timed call of the round left an output in its slot (``output_recheck`` otherwise);
- the calls it then picks at random from its own secret (on the CPU: all of them) match the reference on the
  pristine inputs it kept, and left their other inputs alone (``output_recheck``, ``input_mutation``).

The stopping rule is ``stopping``'s, on the trusted side. The samples themselves are the candidate's claim until
the audit (``audit``) confirms them with the trusted side's own clock.
"""

from __future__ import annotations

import itertools
import math
import time
from typing import Any, Callable

from solbench.evaluate.boundary import ring as ring_mod
from solbench.evaluate.boundary.arena import nbytes_for, nbytes_of
from solbench.evaluate.timing import audit
from solbench.evaluate.timing.cupti import wide_gaps
from solbench.evaluate.timing.rounds import Round, clock_snapshot
from solbench.evaluate.timing.stopping import measure
from solbench.evaluate.trusted.outcomes import Rejected, Timed, picks, secret_rng

TIMING_DRAWS = 1_000_000  # draw numbers of timed calls start here (correctness draws and baselines lie below)
SLACK_S = 0.005


class Failed(Exception):
    """The candidate's process failed (or vanished) during a round."""

    def __init__(self, failed: dict[str, Any], lost: bool):
        super().__init__(failed.get("message"))
        self.failed = failed
        self.lost = lost


def _forgery(reply, kinds: list[str], sent: float, received: float) -> str | None:
    """What is wrong with a round's report against the trusted side's record of the round, or None."""
    held, wall = kinds.count("held"), kinds.count("wall")
    if len(reply.samples_ms) != held or len(reply.wall_ms) != wall or len(reply.wall_event_ms) != wall:
        return (f"the round had {held} held and {wall} wall calls; the report has {len(reply.samples_ms)} samples "
                f"and {len(reply.wall_ms)} wall times")
    if reply.unjoined_ms and len(reply.unjoined_ms) != held:
        return "a stream mark per sample was expected"
    if reply.method == "cupti" and len(reply.event_ms) != held:
        return "kernel spans were reported without the event interval of each sample"
    for xs in (reply.samples_ms, reply.wall_ms, reply.wall_event_ms, reply.event_ms):
        if any(not math.isfinite(x) or x < 0 for x in xs):
            return "a negative, infinite or NaN time"
    if any(e > w * 1.02 + 0.05 for e, w in zip(reply.wall_event_ms, reply.wall_ms)):
        return "an event interval longer than the synchronised wall time around it"
    begin, end = reply.t_begin, reply.t_end
    if begin is None or end is None:
        return "no timestamps"
    if not (sent - SLACK_S <= begin <= end <= received + SLACK_S):
        return (f"timestamps [{begin:.3f}, {end:.3f}] lie outside the trusted side's window "
                f"[{sent:.3f}, {received:.3f}]")
    spent_ms = (end - begin) * 1e3
    total = sum(reply.event_ms or reply.samples_ms) + sum(reply.wall_ms)
    if total > spent_ms * 1.02 + 1.0:
        return f"samples add up to {total:.1f} ms but the round lasted {spent_ms:.1f} ms"
    return None


def _check_reply(sub, reply, gone, kinds: list[str], sent: float, received: float) -> None:
    """Raises ``Rejected`` or ``Failed`` for a round's reply that the candidate's failure, its dynamic checks or
    its report against the trusted side's record of the round (``_forgery``) refuses."""
    if gone:
        if gone["verdict"] == "reward_hack":
            raise Rejected(gone["reasons"], gone.get("message") or "")
        raise Failed(gone, lost=True)
    if reply.failed:
        if reply.codes:
            raise Rejected(reply.codes, f"dynamic checks during timing: {', '.join(reply.codes)}")
        raise Failed(sub._failure(reply), reply.lost)
    if reply.codes:
        raise Rejected(reply.codes, f"dynamic checks during timing: {', '.join(reply.codes)}")
    if reply.refused:
        raise Rejected(["result_forgery"], "a timed call's result was refused, but no check reported why")
    problem = _forgery(reply, kinds, sent, received)
    if problem:
        raise Rejected(["result_forgery"], problem)


def _recheck_round(tr, kinds: list[str], rng, cuda: bool, inplace: list[int],
                   recheck: Callable[[list[Any], list[Any], list[Any]], tuple[str, str] | None], ph,
                   elements: int = 0) -> int:
    """Every timed call of the round left an output in its slot, and the calls picked from the trusted side's
    secret pass their re-check; raises ``Rejected`` otherwise. Returns how many calls were re-checked."""
    timed_calls = [k for k, kind in enumerate(kinds) if kind != "warm"]
    missing = [k for k in tr.unwritten_slots(len(kinds)) if k in set(timed_calls)]
    if missing:
        raise Rejected(["output_recheck"], f"timed call {missing[0]} of a round of {len(kinds)} left no output "
                                           "in its slot", failure={"draw": "timed", **tr.key(missing[0])})
    count = 0
    for k in picks(rng, timed_calls, cuda, elements):
        after = tr.inputs_after(k)
        with ph("timing.recheck"):
            bad = recheck(tr.outputs_of(k) + [after[i] for i in inplace], tr.pristine[k], after)
        count += 1
        if bad:
            raise Rejected([bad[0]], f"timed call re-checked: {bad[1]}", failure={"draw": "timed", **tr.key(k)})
    return count


def time_remote(sub, uuid: str, axes: dict[str, int], cfg, draw: Callable[[int], list[Any]],
                recheck: Callable[[list[Any], list[Any], list[Any]], tuple[str, str] | None]) -> Timed:
    """``recheck(outputs, pristine inputs, inputs after)`` returns (reason code, message) for a timed call that
    fails its re-check, or None."""
    ctx = sub.ctx
    cuda = ctx.dev.type == "cuda"
    shapes = ctx.out_shapes(axes)
    elements = sum(math.prod(s) for s, _ in shapes)
    probe = draw(ctx.seed_for(uuid, TIMING_DRAWS))
    in_bytes = sum(nbytes_of(x) for x in probe)
    n = ring_mod.capacity(in_bytes + sum(nbytes_for(s, d) for s, d in shapes), ctx.dev, in_bytes)
    inplace = [ctx.input_names.index(name) for name in ctx.inplace]
    layout, used = ring_mod.Layout.plan(n, probe, shapes, set(inplace))
    del probe
    arena = sub._lend(used)
    tr = ring_mod.TrustedRing(arena, layout, draw)
    rng = secret_rng()
    draws = itertools.count(TIMING_DRAWS + 1)
    index = ctx.dev.index or 0
    first = clock_snapshot(index) if cuda else None
    llc = int(ctx.job.get("llc_bytes", 64 << 20))
    rechecked = [0]

    def base_msg() -> dict[str, Any]:
        return {"layout": layout.describe(), "values": tr.round_spec(), "timing": cfg.__dict__, "llc_bytes": llc,
                "max_sm_clock_mhz": (first or {}).get("max_sm_clock_mhz")}

    ph = ctx.phases

    def run(kinds: list[str]) -> Round:
        seed = ctx.seed_for(uuid, next(draws))
        with ph("timing.fill"):
            tr.fill(seed, len(kinds))
            sub._settle()
        with ph("timing.rounds"):
            sent = time.monotonic()
            reply, gone = sub._exchange(dict(base_msg(), op="time", kinds=kinds), "timed")
            received = time.monotonic()
        _check_reply(sub, reply, gone, kinds, sent, received)
        rechecked[0] += _recheck_round(tr, kinds, rng, cuda, inplace, recheck, ph, elements)
        samples = list(reply.samples_ms)
        gaps = wide_gaps(samples, list(reply.event_ms)) if reply.method == "cupti" else 0
        expected = "wall_clock" if not cuda else ("cupti", "cuda_events")
        if reply.method not in expected:
            raise Rejected(["result_forgery"], f"a round timed by {reply.method} on {ctx.dev.type}")
        return Round(samples_ms=samples, wall_ms=list(reply.wall_ms), wall_event_ms=list(reply.wall_event_ms),
                     unjoined_ms=list(reply.unjoined_ms), event_ms=list(reply.event_ms), method=reply.method,
                     clock_note=reply.clock_note, stray=reply.stray, event_gaps=gaps)

    def graph() -> float | None:
        with ph("timing.graph"):
            reply, gone = sub._exchange(dict(base_msg(), op="graph", slot=0), "graphed")
        if gone or reply.failed or reply.codes:
            raise RuntimeError((gone or {}).get("message") or "the graph timing failed")
        if reply.graph_error:
            raise RuntimeError(reply.graph_error)
        return reply.graph_ms if reply.graph_ms is not None and reply.graph_ms >= 0 else None

    try:
        timing = measure(run, cfg, cuda, n, graph=graph if cuda else None, want_graph=ctx.job.get("graph"))
    except Failed as f:
        return Timed(failed=f.failed, lost=f.lost)
    last = clock_snapshot(index) if cuda else None
    timing.clocks = [c for c in (first, last) if c]  # read here: what the candidate reports of itself is not used
    sub._drop_arena()
    try:  # no time scores that the trusted side's own clock has not confirmed (``audit``)
        record = audit.confirm(sub, uuid, draw, shapes, inplace, recheck, timing.samples_ms)
    except audit.AuditFailed as f:
        return Timed(failed=f.failed, lost=f.lost)
    return Timed(timing=timing, rechecked=rechecked[0], audit=record)
