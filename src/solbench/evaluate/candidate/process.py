"""The candidate's process: it runs the solution and nothing that judges it.

Started inside the sandbox (``solbench.evaluate.isolation.sandbox``: forked from the trusted worker's zygote, or a fresh
interpreter). It never sees a seed, a reference output, the comparison or which timed calls will be re-checked:
the trusted worker lends it inputs through an arena (``arena``, ``ring``), asks for one call or one round of
timed calls at a time, and reads the outputs out of the arena itself. Everything in this process is the
solution's to change, so what it reports (timing samples, its own checks) is evidence the trusted side
cross-checks, never a verdict; the checks here (``integrity.tamper``, threads, children, result types) are a
second layer behind the static scan.

Commands and replies are JSON lines; every reply echoes the command's ``nonce`` and carries the digest of a
fresh harness snapshot, compared on the trusted side with the one taken before the solution was imported.
- ``load``: language, staged directory, entry point, device -> ``ready`` or ``fatal``
- ``call``: arena, input slots, output slots, mode (``normal`` or ``ghost``), profile -> ``called``
- ``calls``: arena, a list of such calls (each with slots of its own), run in order up to the first that fails or
  has codes of its own -> ``called_batch``: each call's result, and the checks once
- ``time``: arena, the ring's layout and plain values, the round's call kinds -> ``timed`` (``timed``)
- ``graph``: arena, the ring, one slot -> ``graphed`` (``timed``)
- ``audit``: arena, slots, the hand-over's flags -> ``audit_ready``, then ``go``/``ok`` lines, ``audit_end``
  -> ``audited`` (``audited``)
- ``exit``

Before any of the solution's code runs (its import included) the process installs its system-call filter
(``seccomp``); the trusted side reads from outside whether it is in place. A ``load`` with ``null`` set loads no
solution: its calls launch one empty kernel (the null candidate against which the audit's hand-over is
calibrated).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from solbench.evaluate.boundary import arena as arena_mod
from solbench.evaluate.boundary import calls, ring
from solbench.evaluate.candidate import audited, profiling, timed
from solbench.evaluate.integrity import dynamic, ghost, language, tamper
from solbench.evaluate.integrity.l2 import L2Guard
from solbench.evaluate.integrity.streams import Streams
from solbench.evaluate.isolation import seccomp
from solbench.evaluate.languages import get_language
from solbench.evaluate.timing import rounds


class Channel:
    def __init__(self, cmd_fd: int, reply_fd: int):
        self.cmd = os.fdopen(cmd_fd, "r")
        self.reply = os.fdopen(reply_fd, "w", buffering=1)
        self.nonce: str | None = None

    def receive(self) -> dict[str, Any] | None:
        line = self.cmd.readline()
        if not line:
            return None
        msg = json.loads(line)
        self.nonce = msg.get("nonce")
        return msg

    def send(self, **msg: Any) -> None:
        self.reply.write(json.dumps(dict(msg, nonce=self.nonce), default=repr) + "\n")
        self.reply.flush()


class Candidate:
    def __init__(self, chan: Channel, load: dict[str, Any]):
        self.chan = chan
        self.device_name = load["device"]
        self.language = get_language(load["language"])
        os.environ.update(self.language.environment(self.device_name))
        import torch

        self.torch = torch
        calls.set_tf32(torch, bool(load.get("tf32")))
        calls.set_threads(torch, int(load.get("threads") or 0))
        self.dev = torch.device(self.device_name)
        self.cuda = self.dev.type == "cuda"
        self.interpreted = not self.cuda and self.language.interpreted_on_cpu
        if self.cuda:
            torch.zeros(1, device=self.dev)  # the CUDA context, before the solution's import is timed
        self.staged = str(Path(load["staged"]).resolve())
        self.dps = bool(load.get("dps"))
        self.streams = Streams() if self.cuda else None
        self.l2 = L2Guard() if self.cuda else None
        self.arenas: dict[int, Any] = {}
        self.seccomp: str | None = "not installed"
        self.flusher = None
        self.flusher_llc = 0
        self.hold: rounds.Hold | None = None
        self.calls = 0
        self.threads_before = dynamic.thread_idents()
        self.language.install_hooks(self.device_name)
        if self.language.name == "triton":  # what the ghost replay patches, in the snapshot from the start
            import importlib

            for name in ("triton.runtime.jit", "triton.runtime.interpreter"):
                try:
                    importlib.import_module(name)
                except ImportError:
                    pass
        tamper.watch("candidate", self, mutable={"arenas", "flusher", "flusher_llc", "hold", "fn", "calls",
                                                 "seccomp"})
        tamper.watch("channel", chan, mutable={"nonce"})
        if self.streams is not None:
            tamper.watch("streams", self.streams, mutable={"in_candidate", "timed"})
        self._filter()
        self.harness = tamper.Harness()  # before any of the solution's code is imported
        self.baseline = self.harness.digest
        self.fn = None
        if load.get("null"):
            self.fn = self._null
        else:
            self._in_solution(lambda: setattr(self, "fn", self.language.load(Path(load["staged"]), load["entry_file"],
                                                                              load["function"])))
        if self.language.compiled and self.seccomp is None:  # no executable memory made from here on
            self.seccomp = seccomp.install_native()

    def _filter(self) -> None:
        """The system-call filter, installed before any of the solution's code runs (its import included): code
        run at import could otherwise install a filter of its own that refuses the harness's, or start the
        threads and processes the seal forbids. The thread pools and the profiler's threads a sealed process
        needs are started first. A compiled language's rule against executable memory follows its verified
        library's load (``install_native``)."""
        torch, sealed = self.torch, seccomp.sealed(self.language.compiled, self.device_name)
        if sealed:
            calls.warm_threads(torch)
        if sealed and self.cuda:  # the profiler's threads (CUPTI rounds, the language proof) start before the seal
            try:
                language.profile_kernels(lambda: torch.zeros(1, device=self.dev).add_(1))
            except Exception as exc:
                print(f"solbench: the profiler did not start before the seal: {exc}", file=sys.stderr, flush=True)
        self.seccomp = seccomp.install(sealed)

    def _null(self, *args) -> None:
        if self.cuda:
            self.torch.cuda._sleep(1)

    def _in_solution(self, thunk):
        if self.streams is not None:
            self.streams.in_candidate = True
        try:
            return thunk()
        finally:
            if self.streams is not None:
                self.streams.in_candidate = False

    # ---- helpers ----------------------------------------------------------------------------------
    def arena(self, msg: dict[str, Any]):
        key = int(msg["arena_id"])
        if key not in self.arenas:
            self.arenas.clear()  # one arena at a time: the trusted side frees the previous one
            self.arenas[key] = arena_mod.attach(msg["arena"])
        return self.arenas[key]

    def checked(self) -> tuple[list[str], str]:
        """This process's own evidence after the solution ran, and the harness digest the trusted side compares."""
        codes = []
        changed, now = self.harness.changed()
        if changed:
            codes.append("harness_tamper")
            print(f"solbench: harness changed: {', '.join(changed[:8])}", file=sys.stderr, flush=True)
        if dynamic.candidate_threads(self.threads_before, self.staged):
            codes.append("thread_injection")
        if dynamic.child_processes():
            codes.append("process_spawn")
        if not changed:  # then the comparable snapshot is the baseline itself (tamper.comparable)
            return codes, self.baseline
        return codes, tamper.digest(tamper.comparable(self.harness.snapshot, now))

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def fresh_outputs(self, slots: list[dict[str, Any]]) -> list[Any]:
        outs = []
        for s in slots:
            x = self.torch.empty([int(d) for d in s["shape"]], dtype=arena_mod.dtype_from_name(s["dtype"]),
                                 device=self.dev)
            ring.sentinel_fill(x)
            outs.append(x)
        return outs

    def invoke(self, inputs: list[Any], out_slots: list[dict[str, Any]]) -> Any:
        if self.dps:
            outs = self.fresh_outputs(out_slots)
            self._in_solution(lambda: self.fn(*inputs, *outs))
            return outs
        return self._in_solution(lambda: self.fn(*inputs))

    def failure(self, exc: BaseException) -> dict[str, Any]:
        """The failure of the solution's call. Only ``runtime_error`` is ever reported: the trusted side alone
        decides what is ``unsupported``."""
        torch = self.torch
        if isinstance(exc, torch.OutOfMemoryError):
            return {"verdict": "runtime_error", "reasons": ["out_of_memory"], "message": str(exc)[:500]}
        out = {"verdict": "runtime_error", "reasons": ["exception"], "message": calls.short_traceback(exc)}
        if self.cuda and not calls.cuda_healthy(torch):
            out["reasons"].append("cuda_fault")
            out["lost"] = True
        return out

    def report_failure(self, reply: str, exc: BaseException) -> None:
        """Answer a command whose call failed; a lost CUDA context ends this process."""
        self.answer(reply, self.failed(exc))

    def deliver(self, buf, produced: list[Any], slots: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Copy plain outputs into their slots; describe what was produced (the trusted side judges mismatches)."""
        torch = self.torch
        described = []
        for i, slot in enumerate(slots):
            if i >= len(produced):
                described.append({"missing": True})
                continue
            x = produced[i]
            if type(x) in calls.PLAIN_SCALARS:  # exact Python numbers only: nothing of the solution's runs here
                x = torch.tensor(x, dtype=arena_mod.dtype_from_name(slot["dtype"]), device=self.dev)
            elif type(x) is not torch.Tensor:
                described.append({"type": type(x).__name__})
                continue
            info = {"shape": list(x.shape), "dtype": str(x.dtype).removeprefix("torch.")}
            if info["shape"] == list(slot["shape"]) and info["dtype"] == slot["dtype"]:
                with torch._C.DisableTorchFunction():
                    arena_mod.view(buf, slot).copy_(x)
                info["delivered"] = True
            described.append(info)
        return described

    # ---- commands ---------------------------------------------------------------------------------
    def call(self, msg: dict[str, Any]) -> None:
        """One call (``call``), answered with this process's checks after it."""
        self.answer("called", self.one_call(self.arena(msg), msg))

    def calls_batch(self, msg: dict[str, Any]) -> None:
        """Several calls in one exchange (``calls``): each run as ``call`` runs one, in order, on slots of its own,
        up to the first that fails or has codes of its own (a verdict either way); this process's checks once,
        after the last, as after a timing round's calls: a change the solution makes and undoes between two checks
        escapes a check after each call too, and one left in place is found."""
        buf = self.arena(msg)
        results = []
        for one in msg["calls"]:
            results.append(self.one_call(buf, one))
            if "failed" in results[-1] or results[-1].get("codes"):
                break
        lost = any(r.get("lost") for r in results)
        codes, digest = self.checked() if not lost else ([], self.baseline)
        self.chan.send(type="called_batch", results=results, codes=codes, harness=digest, lost=lost)
        if lost:
            raise SystemExit(0)

    def answer(self, reply: str, item: dict[str, Any]) -> None:
        """Send one call's result (``one_call``) with this process's checks; a lost CUDA context ends the
        process."""
        lost = bool(item.get("lost"))
        codes, digest = self.checked() if not lost else ([], self.baseline)
        self.chan.send(type=reply, **dict(item, codes=codes + item.get("codes", []), harness=digest))
        if lost:
            raise SystemExit(0)

    def one_call(self, buf, spec: dict[str, Any]) -> dict[str, Any]:
        """One call of the solution on the inputs in ``spec``'s slots of ``buf``, its outputs delivered into its
        output slots: the result's fields (outputs described, count, peak memory, the profile's kernels or the
        interpreter's stores, codes of its own), or ``failed`` and ``lost``."""
        given = [arena_mod.view(buf, s) for s in spec["inputs"]]
        # the solution works on its own copies, laid out as a timed call's are
        self.calls += 1
        inputs = [ring.own_copy(x, self.calls) for x in given]
        self.sync()  # the copies are complete before the call, whichever stream the call reads them on
        before = None
        if self.cuda:
            self.torch.cuda.reset_peak_memory_stats()
            before = self.torch.cuda.memory_allocated()
        stores = None
        try:
            if spec.get("mode") == "ghost":
                with ghost.ghost_mode():
                    result = self.invoke(inputs, spec["outputs"])
            elif self.interpreted:  # the interpreter's count of the elements the DSL kernels stored
                with language.InterpreterStores() as stores:
                    result = self.invoke(inputs, spec["outputs"])
            else:
                result = self.invoke(inputs, spec["outputs"])
            self.sync()
        except Exception as exc:
            return self.failed(exc)
        why = calls.not_plain(result)
        if why:  # not read any further: touching it runs the solution's code inside the harness
            print(f"solbench: {why}", file=sys.stderr, flush=True)
            return {"codes": ["tensor_subclass"], "outputs": [], "count": 0}
        produced = calls.as_list(result)
        try:
            outputs = self.deliver(buf, produced, spec["outputs"])
            self.sync()
        except Exception as exc:
            return _unreadable(exc)
        peak = int(self.torch.cuda.max_memory_allocated() - before) if before is not None else None
        # the profiled call on the pristine inputs, before the slots take the inputs as this call left them
        extra = self.profile(given, spec["outputs"]) if spec.get("profile") and self.cuda else {}
        if "failed" in extra:  # the solution's own call failed under the profiler: a verdict like any failed call
            return self.failed(extra["failed"])
        try:
            for x, slot in zip(inputs, spec["inputs"]):  # the inputs as the call left them (in-place, mutation)
                if isinstance(x, self.torch.Tensor) and "offset" in slot:
                    arena_mod.view(buf, slot).copy_(x)
            self.sync()
        except Exception as exc:
            return _unreadable(exc)
        if stores is not None:  # how much of the output (in-place inputs included) the DSL kernels stored
            inplace = [inputs[i] for i in spec.get("inplace") or [] if 0 <= i < len(inputs)]
            extra["dsl_stores"] = stores.elements_in(produced + inplace)
        return dict(extra, codes=extra.pop("codes", []), outputs=outputs, count=len(produced),
                    peak_memory_bytes=peak)

    def failed(self, exc: BaseException) -> dict[str, Any]:
        """A failed call's result fields (``failure``): ``failed`` and ``lost``."""
        failed = self.failure(exc)
        return {"failed": failed, "lost": failed.pop("lost", False)}

    def profile(self, given: list[Any], out_slots: list[dict[str, Any]]) -> dict[str, Any]:
        """One more call under the profiler: the kernels it ran and their device time (the language proof)."""
        self.calls += 1
        inputs = [ring.own_copy(x, self.calls) for x in given]
        # the harness's own work (the outputs' allocation and sentinel fill) happens before the profiler starts:
        # only the solution's call is in the account
        outs = self.fresh_outputs(out_slots) if self.dps else []
        self.sync()
        raised: list[BaseException] = []

        def profiled() -> None:
            try:
                self._in_solution(lambda: self.fn(*inputs, *outs))
            except Exception as exc:  # the solution's failure, kept apart from the profiler's own
                raised.append(exc)

        try:
            kernels = language.profile_kernels(profiled)
        except language.ProfilerTampered as exc:
            print(f"solbench: language proof: {exc}", file=sys.stderr, flush=True)
            return {"codes": ["profiler_tamper"]}
        except Exception as exc:  # a profiler that cannot run here is no verdict on the solution: the trusted
            # side sees no share and warns language_proof_unavailable; the reason is left in this log. A fault of
            # the solution's kernels can surface in the profiler's own synchronisation: with the CUDA context
            # lost, it is this call's failure (``failure``), not the next call's
            if not raised and calls.cuda_healthy(self.torch):
                print(f"solbench: language proof: the profiler failed: {type(exc).__name__}: {str(exc)[:300]}",
                      file=sys.stderr, flush=True)
                return {}
            raised.append(exc)
        if raised:
            return {"failed": raised[0]}
        # every kernel's name and device time, summed by name; the trusted side tells whose each one is
        return {"kernels": language.by_name(kernels)}


def _unreadable(exc: BaseException) -> dict[str, Any]:
    """A call's result whose outputs or inputs could not be read back into its slots."""
    return {"failed": {"verdict": "runtime_error", "reasons": ["unreadable_output"],
                       "message": calls.short_traceback(exc)}, "lost": False}


def main(cmd_fd: int, reply_fd: int) -> int:
    chan = Channel(cmd_fd, reply_fd)
    load = chan.receive()
    if not load or load.get("op") != "load":
        return 2
    prof = profiling.start()  # before the harness's first snapshot, whose hooks it then holds (benchmarks only)
    try:
        cand = Candidate(chan, load)
    except Exception as exc:
        from solbench.evaluate.languages import CompileError

        msg = str(exc) if isinstance(exc, CompileError) else f"{type(exc).__name__}: {exc}"
        chan.send(type="fatal", message=msg[:2000])
        return 0
    codes, digest = cand.checked()
    chan.send(type="ready", harness=cand.baseline, codes=codes, seccomp=cand.seccomp)
    handlers = {"call": cand.call, "calls": cand.calls_batch, "time": lambda msg: timed.serve(cand, msg),
                "graph": lambda msg: timed.graph(cand, msg), "audit": lambda msg: audited.serve(cand, msg)}
    while True:
        msg = chan.receive()
        if msg is None or msg.get("op") == "exit":
            # hand the arena back: a CUDA IPC mapping still open when the process ends keeps the trusted
            # worker from ever freeing that memory
            cand.arenas.clear()
            cand.sync()
            profiling.finish(prof)
            return 0
        handler = handlers.get(msg.get("op"))
        if handler is not None:
            handler(msg)
