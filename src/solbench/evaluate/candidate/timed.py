"""The candidate's side of a timing (``cross_check``): a round of timed calls, call k on slot k of the ring the
trusted side filled (``time`` -> ``timed``, with the round's samples, its own checks and its harness digest), and
the CUDA-graph time of one call (``graph`` -> ``graphed``). What it reports is the candidate's claim, which the
trusted side cross-checks and its audit confirms (``audit``).
"""

from __future__ import annotations

import sys
import time
from typing import Any

from solbench.evaluate.boundary import calls, ring
from solbench.evaluate.integrity import language
from solbench.evaluate.timing import rounds


class ResultRefused(Exception):
    """A timed call's result that must not be touched (read, iterated, copied) any further."""


def _flusher(cand, msg: dict[str, Any]):
    llc = int(msg.get("llc_bytes", 64 << 20))
    if cand.flusher is None or cand.flusher_llc != llc:
        cand.flusher, cand.flusher_llc = rounds.Flusher(llc, cand.dev), llc  # one per process
    return cand.flusher


def _ring(cand, msg: dict[str, Any]) -> ring.CandidateRing:
    return ring.CandidateRing(cand.arena(msg), msg["layout"], msg["values"], cand.dps)


def serve(cand, msg: dict[str, Any]) -> None:
    """One round of timed calls: call k on slot k of the ring."""
    slots = _ring(cand, msg)
    kinds = [str(k) for k in msg["kinds"]]
    cfg = rounds.TimingConfig(**msg.get("timing", {}))
    fn = cand.fn
    streams = cand.streams
    refused: list[tuple[str, str]] = []  # (the reason code, why)

    def timed_call(k: int):
        args = slots.args(k)
        if streams is None:
            return cand._in_solution(lambda: fn(*args))
        streams.begin_timed_call()
        try:
            return cand._in_solution(lambda: fn(*args))
        finally:
            streams.end_timed_call()

    def check(result) -> None:  # before the end event: a result that would compute when read is refused
        why = calls.not_plain(result)
        if why:
            refused.append(("tensor_subclass", why))
            raise ResultRefused(why)

    def after(k: int, result) -> None:
        try:
            slots.store(k, calls.as_list(result))
        except ring.SlotRefused as exc:  # an output the call did not make: a forged result
            refused.append(("result_forgery", str(exc)))
            raise ResultRefused(str(exc)) from None

    if kinds and kinds[0] == "warm" or cand.hold is None:
        cand.hold = rounds.Hold(cfg, msg.get("max_sm_clock_mhz"))
    l2_guarded = bool(cand.cuda and cand.l2.reset())
    t_begin = time.monotonic()
    try:
        if cand.cuda:
            r = rounds.round_cuda(timed_call, kinds, _flusher(cand, msg), cfg, cand.hold,
                                  tails=streams.tails, check=check, after=after, prepare=slots.prepare)
        else:
            r = rounds.round_cpu(timed_call, kinds, cfg, check=check, after=after, prepare=slots.prepare)
        cand.sync()
    except language.ProfilerTampered as exc:
        codes, digest = cand.checked()
        print(f"solbench: timing: {exc}", file=sys.stderr, flush=True)
        cand.chan.send(type="timed", codes=codes + ["profiler_tamper"], harness=digest)
        return
    except ResultRefused:
        codes, digest = cand.checked()
        code, why = refused[0]
        print(f"solbench: a timed call's result was refused: {why}", file=sys.stderr, flush=True)
        cand.chan.send(type="timed", codes=codes + [code], harness=digest, refused=True)
        return
    except Exception as exc:
        cand.report_failure("timed", exc)
        return
    t_end = time.monotonic()
    codes, digest = cand.checked()
    if l2_guarded and cand.l2.set_aside_bytes():
        codes.append("persisting_l2")  # a set-aside made during timing keeps data through the flush
    cand.chan.send(type="timed", samples_ms=r.samples_ms, wall_ms=r.wall_ms, wall_event_ms=r.wall_event_ms,
                   unjoined_ms=r.unjoined_ms, event_ms=r.event_ms, method=r.method, clock_note=r.clock_note,
                   stray=r.stray, l2_guarded=l2_guarded, t_begin=t_begin, t_end=t_end,
                   codes=codes, harness=digest)


def graph(cand, msg: dict[str, Any]) -> None:
    """A CUDA-graph time of one call (launch overhead left out; informational)."""
    slots = _ring(cand, msg)
    args = slots.args(int(msg.get("slot", 0)))
    try:
        ms = rounds.time_graph(lambda: cand._in_solution(lambda: cand.fn(*args)), _flusher(cand, msg),
                               rounds.TimingConfig(**msg.get("timing", {})), msg.get("max_sm_clock_mhz"))
        error = None
    except Exception as exc:  # not every solution can be captured; that is not a failure
        ms, error = None, f"{type(exc).__name__}: {str(exc)[:200]}"
        if not calls.cuda_healthy(cand.torch):
            cand.report_failure("graphed", exc)
            return
    codes, digest = cand.checked()
    cand.chan.send(type="graphed", graph_ms=ms, graph_error=error, codes=codes, harness=digest)
