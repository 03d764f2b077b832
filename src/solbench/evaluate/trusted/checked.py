"""A candidate's checked calls (``subjects.RemoteSubject``'s part that makes them): one call, or a workload's
calls in one exchange, each on an arena's slots of its own that the trusted side fills, pre-fills and reads back.

Every input a call gets is put into the arena from a copy the trusted side keeps; every output is read out of the
arena, whose rooms were filled with the sentinel first; the candidate's own description of a result is taken
only as far as the trusted side can check it (``_outputs``).
"""

from __future__ import annotations

from typing import Any

from solbench.evaluate.boundary.calls import copied
from solbench.evaluate.integrity import kernel_origin
from solbench.evaluate.trusted.outcomes import Called


class CheckedCalls:
    """The checked calls of a ``RemoteSubject``: its context, arena, exchange and failure rules are the subject's
    (``_lend``, ``_exchange``, ``_failure``, ``stop``)."""

    def _lend_for_calls(self, nbytes: int):
        """The arena of a checked call: the one the call before lent where it was a call's of this size (the
        candidate keeps its mapping: no new IPC handle on either side, no device-wide wait of a free), else a fresh
        one. The workload's end, a timing's ring and a new process each end the reuse (``_drop_arena``, ``_lend``).
        Every byte read back is written by the call it is read for: the inputs are put, the outputs' rooms
        sentinel-filled, as in a fresh arena."""
        if self.arena is not None and self._calls_arena == nbytes:
            self.arena.used = 0
            return self.arena
        arena = self._lend(nbytes)
        self._calls_arena = nbytes
        return arena

    def _outputs(self, described: list[Any], slots: list[dict[str, Any]]) -> list[Any]:
        """What the candidate produced, as the trusted side sees it (mismatches become judgeable stand-ins)."""
        from solbench.evaluate.boundary.arena import dtype_from_name

        torch = self.ctx.torch
        got: list[Any] = []
        for info, slot in zip(described, slots):
            if not isinstance(info, dict) or info.get("missing"):
                break
            if info.get("delivered"):
                got.append(self.arena.view(slot).clone())  # pre-filled: an undelivered output is the sentinel
            elif "shape" in info and "dtype" in info:
                try:
                    got.append(torch.empty([int(s) for s in info["shape"]], dtype=dtype_from_name(str(info["dtype"])),
                                           device="meta"))
                except (ValueError, TypeError, RuntimeError):
                    got.append(f"unreadable output {str(info)[:80]}")
            else:
                got.append(f"a {str(info.get('type'))[:40]}")
        return got

    def call(self, inputs: list[Any], axes: dict[str, int], mode: str = "normal", profile: bool = False) -> Called:
        shapes = self.ctx.out_shapes(axes)
        spec = self._lent([inputs], shapes)[0]
        with self.ctx.phases("calls.exchange"):
            reply, gone = self._exchange(dict(spec, op="call", mode=mode, profile=profile), "called")
        if gone:
            return Called(failed=gone, lost=gone["verdict"] != "reward_hack", message=gone.get("message"))
        return self._called(reply, spec, shapes, profile)

    def call_bytes(self, inputs: list[Any], axes: dict[str, int]) -> int:
        """The arena bytes one call on ``inputs`` takes: the inputs and the outputs' rooms."""
        return _set_bytes(inputs, self.ctx.out_shapes(axes))

    def calls(self, sets: list[list[Any]], axes: dict[str, int], profile_first: bool = False,
              modes: list[str] | None = None) -> list[Called] | None:
        """A call on each of ``sets`` in one exchange (the ``calls`` command), in order, each on slots of its own
        (``modes``: each call's, as ``call`` takes it; the first profiled where ``profile_first``): their
        ``Called`` up to the first that failed or has codes of its own; one failed ``Called`` where the reply was
        refused or the workload's time limit ran out (the limit counts every wait of the workload, so one call at
        a time would have run out of it too). None where the process ended without an answer, or where a call
        after the first lost its CUDA context (the process then ends unchecked, and the calls before it would go
        unchecked with it): the caller makes the calls one at a time in a fresh process, so that each is checked
        and the verdict names the call that ended it, after the draws before it were judged. The wait for such a
        batch is not charged to the workload's limit: its calls are made and charged again (a solution that
        crashes its batch on purpose gets at most twice the limit, then the crash's verdict)."""
        shapes = self.ctx.out_shapes(axes)
        specs = self._lent(sets, shapes)
        for spec, mode in zip(specs, modes or []):
            spec["mode"] = mode
        if profile_first:
            specs[0]["profile"] = True
        used_s = self.used_s
        with self.ctx.phases("calls.exchange"):
            reply, gone = self._exchange({"op": "calls", "calls": specs}, "called_batch")
        if gone and gone["verdict"] == "runtime_error":
            self.used_s = used_s
            return None
        if gone:
            return [Called(failed=gone, lost=gone["verdict"] != "reward_hack", message=gone.get("message"))]
        results = reply.results
        ended = bool(results) and bool(results[-1].failed or results[-1].codes)  # a verdict: the batch stops there
        lost = bool(results) and bool(results[-1].failed and results[-1].lost)
        if len(results) > len(specs) or (len(results) < len(specs) and not ended) or reply.lost != lost:
            self.stop(grace_s=0)
            return [Called(failed={"verdict": "reward_hack", "reasons": ["result_forgery"],
                                   "message": f"{len(results)} results to a batch of {len(specs)} calls, the last "
                                              "neither a failure nor a verdict, or the process's lost CUDA "
                                              "context not its last call's"})]
        if lost and len(results) > 1:
            self.stop()
            self.used_s = used_s
            return None
        got = []
        for item, spec in zip(results, specs):  # in order: a failure that loses the process ends the arena
            own = bool(item.codes)
            item.codes = sorted(set(reply.codes) | set(item.codes))
            got.append(self._called(item, spec, shapes, bool(spec.get("profile"))))
            if item.failed or own:
                break
        return got

    def _lent(self, sets: list[list[Any]], shapes) -> list[dict[str, Any]]:
        """The arena of checked calls on ``sets`` of inputs (``_lend_for_calls``): each set put in its input slots,
        its output rooms reserved and pre-filled; the calls' slots as a ``call`` command names them."""
        from solbench.evaluate.boundary.ring import sentinel_fill

        inplace = [self.ctx.input_names.index(n) for n in self.ctx.inplace]
        with self.ctx.phases("calls.lend"):  # nested in the worker's "calls", as the exchange and the taking back
            arena = self._lend_for_calls(sum(_set_bytes(inputs, shapes) for inputs in sets))
            specs = []
            for inputs in sets:
                in_slots = [arena.put(x) for x in inputs]
                out_slots = [arena.reserve(s, d) for s, d in shapes]
                for slot in out_slots:
                    sentinel_fill(arena.view(slot))
                specs.append({"inputs": in_slots, "outputs": out_slots, "inplace": inplace})
            self._settle()
        return specs

    def _called(self, item, spec: dict[str, Any], shapes, profile: bool) -> Called:
        """One call's result (a ``called`` reply, or an item of a batch's) as the trusted side takes it: its
        outputs and inputs read out of the arena."""
        if item.failed:
            return Called(failed=self._failure(item), lost=item.lost, codes=item.codes)
        with self.ctx.phases("calls.collect"):
            outputs = self._outputs(item.outputs, spec["outputs"])
            after = [copied(self.arena.view(s)) for s in spec["inputs"]]
        if item.count != len(shapes) and len(outputs) == len(shapes) and not item.codes:
            outputs.append("an extra output")  # the count mismatch is judged as incorrect_shape
        peak = item.peak_memory_bytes  # the candidate's own report: informational
        acc = self._account(item.kernels) if profile else None
        return Called(outputs=outputs, inputs_after=after, codes=item.codes,
                      peak_memory_bytes=peak if isinstance(peak, int) and peak >= 0 else None,
                      account=acc, dsl_stores=item.dsl_stores)

    def _account(self, kernels: list[list[Any]]):
        """Whose kernels the profiled call ran, told here from their names (``integrity.kernel_origin``)."""
        pairs = [(k[0], k[1]) for k in kernels if len(k) >= 2 and isinstance(k[0], str)
                 and isinstance(k[1], (int, float)) and not isinstance(k[1], bool)]
        return kernel_origin.account(pairs, self.owns, self.language.own_origins)


def _set_bytes(inputs: list[Any], shapes) -> int:
    """The arena bytes of a call on ``inputs`` with outputs of ``shapes``: the inputs and the outputs' rooms."""
    from solbench.evaluate.boundary.arena import nbytes_for, nbytes_of

    return sum(nbytes_of(x) for x in inputs) + sum(nbytes_for(s, d) for s, d in shapes)
