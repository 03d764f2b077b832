"""The candidate's side of an audit (``audit``): groups of calls handed over one at a time by the trusted worker.

After ``audit`` (the slots' layout; on the GPU where the hand-over's flags lie in the arena) the candidate
answers ``audit_ready``, then reads lines ``go K S M``: on the GPU it makes its stream wait for the ``go`` flag
to reach K+1 (``memops``), calls the solution on the inputs of slots S, S+1, ... S+M-1 in turn (each call's
outputs written into its slot: directly in destination-passing style, else copied there; its other streams
joined), raises the ``done`` flag to K+1 behind all of that, answers ``queued K``, waits for its stream to end
and answers ``ok K`` (so that the trusted stream has no work waiting, to be given time slices, while the calls
run); on the CPU (where M is 1)
it calls the solution on slot S and answers, so that the CPU
time the trusted side reads holds the call and no copy of the harness's (but a returned output's copy into the
slot, which the null candidate's calibration holds too). ``audit_end`` ends the audit with a full reply (its
checks, its harness digest). Nothing here times anything: the trusted side's clock does (``audit``).
"""

from __future__ import annotations

import sys
from typing import Any

from solbench.evaluate.boundary import calls
from solbench.evaluate.boundary.arena import view
from solbench.evaluate.boundary.ring import SlotRefused, slot_spec, store_into
from solbench.evaluate.timing import memops


class _Refused(Exception):
    pass


def _args(buf, layout: dict[str, Any], values: list[Any], s: int, dps: bool) -> list[Any]:
    args = [view(buf, slot_spec(b, s)) if b is not None else v for b, v in zip(layout["inputs"], values)]
    return (args + _outputs(buf, layout, s)) if dps else args


def _outputs(buf, layout: dict[str, Any], s: int) -> list[Any]:
    return [view(buf, slot_spec(b, s)) for b in layout["outputs"]]


def _store(torch, slots: list[Any], result: Any) -> None:
    """A returned result into its slot's output tensors ``slots``, or refused (``ring.stored``): the audit's calls
    get the arena's own slots as inputs, so a solution can reach the output slots through them and write there
    itself, skipping the copy whose cost the calibration takes off."""
    try:
        with torch._C.DisableTorchFunction():
            store_into(slots, calls.as_list(result))
    except SlotRefused as exc:
        raise _Refused(str(exc)) from None


def serve(cand, msg: dict[str, Any]) -> None:
    """Run one audit for the candidate's process ``cand`` (a ``process.Candidate``)."""
    torch = cand.torch
    buf = cand.arena(msg)
    layout, values = msg["layout"], msg["values"]
    stream, flags = None, (0, 0)
    if cand.cuda:
        stream = torch.cuda.Stream(cand.dev)
        go = buf.data_ptr() + int(msg["flags"])
        flags = (go, go + int(msg["flag_stride"]))
    codes, digest = cand.checked()
    cand.chan.send(type="audit_ready", codes=codes, harness=digest)
    nonce = cand.chan.nonce
    try:
        _loop(cand, buf, layout, values, stream, flags)
    except _Refused as why:
        cand.chan.nonce = _await_end(cand) or nonce
        codes, digest = cand.checked()
        print(f"solbench: an audited call's result was refused: {why}", file=sys.stderr, flush=True)
        cand.chan.send(type="audited", codes=codes + ["tensor_subclass"], harness=digest, refused=True)
        return
    except Exception as exc:
        cand.chan.nonce = _await_end(cand) or nonce
        cand.report_failure("audited", exc)
        return
    cand.sync()
    codes, digest = cand.checked()
    cand.chan.send(type="audited", codes=codes, harness=digest)


def _await_end(cand) -> str | None:
    """Tell the trusted side this call failed, then read up to its ``audit_end`` (its nonce)."""
    import json

    cand.chan.reply.write("err\n")
    cand.chan.reply.flush()
    while True:
        line = cand.chan.cmd.readline()
        if not line:
            raise SystemExit(0)
        if line.startswith("{"):
            try:
                return json.loads(line).get("nonce")
            except ValueError:
                return None


def _loop(cand, buf, layout, values, stream, flags: tuple[int, int]) -> None:
    torch = cand.torch
    slots, outs = {}, {}  # each slot's arguments and output tensors, made once: the calls pay only for the call
    fn = cand.fn
    if cand.fn == cand._null and not cand.dps:  # the null candidate returns outputs of the right kind to store
        from solbench.evaluate.boundary.arena import dtype_from_name

        made = [torch.zeros([int(d) for d in b["shape"]], dtype=dtype_from_name(b["dtype"]), device=cand.dev)
                for b in layout["outputs"]]
        fn = lambda *args: made  # noqa: E731
    while True:
        line = cand.chan.cmd.readline()
        if not line:
            raise SystemExit(0)
        if line.startswith("{"):  # audit_end
            import json

            cand.chan.nonce = json.loads(line).get("nonce")
            return
        _, k, s, m = line.split()
        k, first, m = int(k), int(s), int(m)
        group = [(first + j) % int(layout["n"]) for j in range(m)]
        for s in group:
            if s not in slots:  # a workload's plain values are the same in every call
                slots[s], outs[s] = _args(buf, layout, values[k], s, cand.dps), _outputs(buf, layout, s)
        if stream is None:  # the call on the slot itself: no copy of the harness's in the CPU time read
            for s in group:
                result = cand._in_solution(lambda: fn(*slots[s]))
                _checked(result)
                if not cand.dps:
                    _store(torch, outs[s], result)
        else:
            pairs = [(s, slots[s]) for s in group]
            _group_on(cand, stream, flags, k, pairs, lambda s, r: _store(torch, outs[s], r), fn)
            cand.chan.reply.write(f"queued {k}\n")  # the trusted side's hold must outlast this much
            cand.chan.reply.flush()
            stream.synchronize()  # then ``ok``: the trusted stream waits for the done flag only after it
        cand.chan.reply.write(f"ok {k}\n")
        cand.chan.reply.flush()


def _group_on(cand, stream, flags: tuple[int, int], k: int, group: list[tuple[int, list[Any]]], store, fn) -> None:
    """Group ``k`` on the GPU: the stream waits for the ``go`` flag, makes each call in turn (its outputs into its
    slot, its other streams joined), then raises the ``done`` flag behind all of them."""
    torch = cand.torch
    with torch.cuda.stream(stream):
        memops.wait(stream, flags[0], k + 1)
        for s, args in group:
            cand.streams.begin_timed_call()
            try:
                result = cand._in_solution(lambda: fn(*args))
                _checked(result)
                for mark in cand.streams.tails():  # the solution's other streams, joined before the end
                    stream.wait_event(mark)
            finally:
                cand.streams.end_timed_call()
            if not cand.dps:
                store(s, result)
        memops.write(stream, flags[1], k + 1)


def _checked(result: Any) -> None:
    why = calls.not_plain(result)
    if why:
        raise _Refused(why)

