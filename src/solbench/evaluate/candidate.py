"""The candidate's process: it runs the solution and nothing that judges it.

Started by the trusted worker (``solbench.evaluate.worker``) inside the sandbox
as ``python -m solbench.evaluate.candidate CMD_FD REPLY_FD``. It never sees a
seed, a reference output or the comparison: the trusted worker lends it inputs
through an arena (``solbench.evaluate.arena``), asks for one call or one timing
run at a time, and reads the outputs back from the arena. The checks on this
process's own state (threads, children, harness identity, tensor types) run
here and are reported; the trusted side treats them as evidence, not proof,
and judges outputs, inputs and timestamps itself.

Commands (one JSON line each) and replies (one JSON line each):
- ``load``: language, staged directory, entry point, device -> ``ready`` or ``fatal``
- ``call``: arena, input slots, output slots, mode (``normal`` or ``ghost``) -> ``called``
- ``time``: arena, input-set slots, kept slots, timing configuration -> ``timed``
- ``exit``
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from solbench.evaluate.calls import as_list as _as_list
from solbench.evaluate.calls import copied, cuda_healthy, set_tf32
from solbench.evaluate.calls import short_traceback as _short_tb


class Channel:
    def __init__(self, cmd_fd: int, reply_fd: int):
        self.cmd = os.fdopen(cmd_fd, "r")
        self.reply = os.fdopen(reply_fd, "w", buffering=1)

    def receive(self) -> dict[str, Any] | None:
        line = self.cmd.readline()
        return json.loads(line) if line else None

    def send(self, **msg: Any) -> None:
        self.reply.write(json.dumps(msg, default=repr) + "\n")
        self.reply.flush()


def _capturing(torch: Any, stream: Any) -> bool:
    """Whether ``stream`` is being captured into a CUDA graph."""
    with torch.cuda.stream(stream):
        return torch.cuda.is_current_stream_capturing()


class Candidate:
    def __init__(self, chan: Channel, load: dict[str, Any]):
        from solbench.evaluate.languages import get_language

        self.chan = chan
        self.device_name = load["device"]
        self.language = get_language(load["language"])
        os.environ.update(self.language.environment(self.device_name))
        import torch

        from solbench.evaluate.integrity import dynamic

        self.torch = torch
        self.dynamic = dynamic
        set_tf32(torch, bool(load.get("tf32")))
        self.dev = torch.device(self.device_name)
        if self.dev.type == "cuda":
            torch.zeros(1, device=self.dev)  # the CUDA context, before the solution's import is timed
        self.staged = str(Path(load["staged"]).resolve())
        self.dps = bool(load.get("dps"))
        self.streams: list[Any] = []
        self.in_candidate = True  # streams created while this is true are the solution's
        self.timed_stream: Any = None  # during a timed call: the stream its start event is on
        if self.dev.type == "cuda":
            self._track_streams()
        from solbench.evaluate.integrity.l2 import L2Guard

        self.l2 = L2Guard() if self.dev.type == "cuda" else None
        self.threads_before = dynamic.thread_idents()
        self.harness = dynamic.snapshot()  # before any candidate code is imported
        self.language.install_hooks(self.device_name)
        self.fn = self.language.load(Path(load["staged"]), load["entry_file"], load["function"])
        self.in_candidate = False
        self.arenas: dict[int, Any] = {}
        self.flusher = None
        self.flusher_llc = 0

    def _track_streams(self) -> None:
        """Record every CUDA stream the solution creates (at import or in a call; not the harness's own), and
        fence one created during a timed call behind that call's start (see ``fence``)."""
        torch = self.torch
        owner = self
        streams = self.streams
        for cls in (torch.cuda.Stream, getattr(torch.cuda, "ExternalStream", None)):
            if cls is None or "__new__" not in vars(cls):
                continue
            original = vars(cls)["__new__"]
            original = getattr(original, "__func__", original)

            def tracked(kind, *args, _original=original, **kwargs):
                stream = _original(kind, *args, **kwargs)
                if owner.in_candidate:
                    # one entry per distinct stream: torch hands out streams from a pool of a few per priority, and
                    # current_stream() builds a new object for the same stream at every call
                    if all(s.cuda_stream != stream.cuda_stream for s in streams):
                        streams.append(stream)
                    owner.fence([stream])
                return stream

            cls.__new__ = staticmethod(tracked)

    def fence(self, streams: list[Any]) -> None:
        """During a timed call, make ``streams`` wait for the timed stream's work so far (its start event
        included). Without this, work launched on a stream that never waits for the timed one could run while
        the stream is held or flushed, before the start event, and so outside every sample."""
        torch = self.torch
        main = self.timed_stream
        if main is None:
            return
        others = [s for s in streams if s.cuda_stream != main.cuda_stream]
        if not others:
            return
        # the stream objects made here are the harness's, and must not fence again
        was, self.in_candidate = self.in_candidate, False
        try:
            if _capturing(torch, main):  # the harness's graph capture: the solution must join its streams anyway
                return
            mark = torch.cuda.Event()
            mark.record(main)
            for s in others:
                if not _capturing(torch, s):  # a capture of the solution's own cannot wait on an outside event
                    s.wait_event(mark)
        finally:
            self.in_candidate = was

    def stream_tails(self) -> list[Any]:
        """One timing event on each stream the solution created (see timing.time_cuda)."""
        if not self.streams:
            return []
        torch = self.torch
        current = torch.cuda.current_stream()
        marks = []
        for s in self.streams:
            if s != current:
                e = torch.cuda.Event(enable_timing=True)
                e.record(s)
                marks.append(e)
        return marks

    # ---- helpers ----------------------------------------------------------------------------------
    def arena(self, msg: dict[str, Any]):
        from solbench.evaluate.arena import attach

        key = int(msg["arena_id"])
        if key not in self.arenas:
            self.arenas.clear()  # one arena at a time: the trusted side frees the previous one
            self.arenas[key] = attach(msg["arena"])
        return self.arenas[key]

    def process_codes(self) -> list[str]:
        d = self.dynamic
        codes = []
        if d.tampered(self.harness):
            codes.append("harness_tamper")
        if d.candidate_threads(self.threads_before, self.staged):
            codes.append("thread_injection")
        if d.child_processes():
            codes.append("process_spawn")
        return codes

    def sync(self) -> None:
        if self.dev.type == "cuda":
            self.torch.cuda.synchronize()

    def fresh_outputs(self, shapes: list[list[int]], dtypes: list[str]) -> list[Any]:
        from solbench.evaluate.arena import dtype_from_name

        torch = self.torch
        outs = []
        for shape, name in zip(shapes, dtypes):
            dt = dtype_from_name(name)
            if dt.is_floating_point:
                outs.append(torch.full(shape, float("nan"), dtype=dt, device=self.dev))
            elif dt == torch.bool:
                outs.append(torch.zeros(shape, dtype=dt, device=self.dev))
            else:
                outs.append(torch.full(shape, torch.iinfo(dt).max, dtype=dt, device=self.dev))
        return outs

    def invoke(self, inputs: list[Any], out_slots: list[dict[str, Any]]) -> list[Any]:
        self.in_candidate = True
        try:
            if self.dps:
                outs = self.fresh_outputs([s["shape"] for s in out_slots], [s["dtype"] for s in out_slots])
                self.fn(*inputs, *outs)
                return outs
            return _as_list(self.fn(*inputs))
        finally:
            self.in_candidate = False

    def failure(self, exc: BaseException) -> dict[str, Any]:
        torch = self.torch
        from solbench.evaluate.languages import Unsupported
        from solbench.evaluate.languages import triton as triton_lang

        if isinstance(exc, torch.OutOfMemoryError):
            return {"verdict": "runtime_error", "reasons": ["out_of_memory"], "message": str(exc)[:500]}
        if isinstance(exc, Unsupported) or (self.device_name == "cpu" and triton_lang.unsupported_reason
                                            and self.language.name == "triton"):
            return {"verdict": "unsupported", "reasons": ["interpreter_unfaithful"],
                    "message": str(exc) if isinstance(exc, Unsupported) else triton_lang.unsupported_reason}
        out = {"verdict": "runtime_error", "reasons": ["exception"], "message": _short_tb(exc)}
        if self.dev.type == "cuda" and not cuda_healthy(torch):
            out["reasons"].append("cuda_fault")
            out["lost"] = True
        return out

    def report_failure(self, reply: str, exc: BaseException) -> None:
        """Answer a command whose call failed; a lost CUDA context ends this process."""
        failed = self.failure(exc)
        lost = failed.pop("lost", False)
        self.chan.send(type=reply, failed=failed, lost=lost)
        if lost:
            raise SystemExit(0)

    def deliver(self, buf, produced: list[Any], slots: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Copy outputs into their slots; describe what was produced (the trusted side judges mismatches)."""
        from solbench.evaluate.arena import dtype_from_name, view

        torch = self.torch
        described = []
        for i, slot in enumerate(slots):
            if i >= len(produced):
                described.append({"missing": True})
                continue
            x = produced[i]
            if not isinstance(x, torch.Tensor):
                try:
                    x = torch.tensor(x, dtype=dtype_from_name(slot["dtype"]), device=self.dev)
                except Exception:
                    described.append({"type": type(x).__name__})
                    continue
            info = {"shape": list(x.shape), "dtype": str(x.dtype).removeprefix("torch.")}
            if info["shape"] == list(slot["shape"]) and info["dtype"] == slot["dtype"]:
                view(buf, slot).copy_(x)
                info["delivered"] = True
            described.append(info)
        return described

    # ---- commands ---------------------------------------------------------------------------------
    def call(self, msg: dict[str, Any]) -> None:
        from solbench.evaluate.arena import view

        buf = self.arena(msg)
        given = [view(buf, s) for s in msg["inputs"]]
        # the candidate works on its own copies, at addresses of this process's allocator
        inputs = [copied(x) for x in given]
        self.sync()  # the copies are complete before the call, whichever stream the call reads them on
        ghost = msg.get("mode") == "ghost"
        before = None
        if self.dev.type == "cuda":
            self.torch.cuda.reset_peak_memory_stats()
            before = self.torch.cuda.memory_allocated()
        try:
            if ghost:
                with self.dynamic.ghost_mode():
                    produced = self.invoke(inputs, msg["outputs"])
            else:
                produced = self.invoke(inputs, msg["outputs"])
            self.sync()
        except Exception as exc:
            self.report_failure("called", exc)
            return
        codes = [] if ghost else self.process_codes()
        if any(self.dynamic.not_plain_tensor(x) for x in produced):
            # not read any further: touching a subclass runs the candidate's code inside the harness
            self.chan.send(type="called", codes=codes + ["tensor_subclass"], outputs=[], count=len(produced))
            return
        try:
            outputs = self.deliver(buf, produced, msg["outputs"])
            for x, slot in zip(inputs, msg["inputs"]):  # the inputs as the call left them (in-place, mutation)
                if isinstance(x, self.torch.Tensor) and "offset" in slot:
                    view(buf, slot).copy_(x)
            self.sync()
        except Exception as exc:
            self.chan.send(type="called", failed={"verdict": "runtime_error", "reasons": ["unreadable_output"],
                                                  "message": _short_tb(exc)}, lost=False)
            return
        peak = int(self.torch.cuda.max_memory_allocated() - before) if before is not None else None
        extra = self.profile(given, msg["outputs"]) if msg.get("profile") and self.dev.type == "cuda" else {}
        if "failed" in extra:  # the solution's own call failed under the profiler: a verdict like any failed call
            self.report_failure("called", extra["failed"])
            return
        codes = codes + extra.pop("codes", [])
        self.chan.send(type="called", codes=codes, outputs=outputs, count=len(produced), peak_memory_bytes=peak,
                       **extra)

    def profile(self, given: list[Any], out_slots: list[dict[str, Any]]) -> dict[str, Any]:
        """One more call under the profiler: the solution's DSL kernels' share of the device time."""
        from solbench.evaluate.integrity import language

        inputs = [copied(x) for x in given]
        self.sync()
        raised: list[BaseException] = []

        def profiled() -> None:
            try:
                self.invoke(inputs, out_slots)
            except Exception as exc:  # the solution's failure, kept apart from the profiler's own
                raised.append(exc)

        try:
            kernels = language.profile_kernels(profiled)
        except language.ProfilerTampered as exc:
            print(f"solbench: language proof: {exc}", file=sys.stderr, flush=True)
            return {"codes": ["profiler_tamper"]}
        except Exception as exc:  # a profiler that cannot run here is no verdict on the solution: the trusted
            # side sees no share and warns language_proof_unavailable; the reason is left in this log
            if not raised:
                print(f"solbench: language proof: the profiler failed: {type(exc).__name__}: {str(exc)[:300]}",
                      file=sys.stderr, flush=True)
                return {}
        if raised:
            return {"failed": raised[0]}
        names = language.dsl_kernel_names(self.staged)
        top = sorted(kernels, key=lambda k: -k[1])[:5]
        return {"dsl_share": language.dsl_share(kernels, names), "kernels": [[n[:120], us] for n, us in top]}

    def time(self, msg: dict[str, Any]) -> None:
        from solbench.evaluate.arena import dtype_from_name, view
        from solbench.evaluate.integrity.rotation import TimedInputs
        from solbench.evaluate.timing import Flusher, TimingConfig, time_cpu, time_cuda

        torch = self.torch
        buf = self.arena(msg)
        sets = [[copied(view(buf, s)) for s in one] for one in msg["sets"]]
        out_slots = msg["outputs"]
        dps_specs = [(tuple(s["shape"]), dtype_from_name(s["dtype"])) for s in out_slots] if self.dps else []
        pool = TimedInputs(sources=sets, dps_specs=dps_specs, device=self.dev)
        pool.prepare(0)
        fn = self.fn
        cuda = self.dev.type == "cuda"

        def timed_call(i: int):
            try:
                if cuda:
                    self.timed_stream = torch.cuda.current_stream()
                    self.fence(self.streams)
                self.in_candidate = True
                return fn(*pool.call_args())
            finally:
                self.in_candidate = False
                self.timed_stream = None

        cfg = TimingConfig(**msg.get("timing", {}))
        hooks = dict(prepare=pool.prepare, keep=pool.keep, on_last=pool.keep_last)
        l2_guarded = self.dev.type == "cuda" and self.l2.reset()
        t_begin = time.monotonic()
        try:
            if self.dev.type == "cuda":
                llc = int(msg.get("llc_bytes", 64 << 20))
                if self.flusher is None or self.flusher_llc != llc:
                    self.flusher, self.flusher_llc = Flusher(llc, self.dev), llc  # one per process, not per workload
                timing = time_cuda(timed_call, len(sets), self.flusher, cfg, graph=msg.get("graph"),
                                   tails=self.stream_tails, **hooks)
            else:
                timing = time_cpu(timed_call, len(sets), cfg, **hooks)
            self.sync()
        except Exception as exc:
            self.report_failure("timed", exc)
            return
        t_end = time.monotonic()
        codes = self.process_codes()
        if l2_guarded and self.l2.set_aside_bytes():
            codes.append("persisting_l2")  # a set-aside made during timing keeps data through the flush
        kept = []
        try:
            for kp, slot in zip(pool.kept, msg["kept"]):
                if any(self.dynamic.not_plain_tensor(x) for x in kp.outputs):
                    codes.append("tensor_subclass")
                    break
                for x, s in zip(pool.inputs_of(kp.call), slot["given"]):
                    if isinstance(x, torch.Tensor):
                        view(buf, s).copy_(x)
                for x, s in zip(kp.inputs_after, slot["after"]):
                    if isinstance(x, torch.Tensor):
                        view(buf, s).copy_(x)
                kept.append({"call": kp.call, "outputs": self.deliver(buf, kp.outputs, slot["outputs"])})
            self.sync()
        except Exception as exc:
            self.chan.send(type="timed", failed={"verdict": "runtime_error", "reasons": ["unreadable_output"],
                                                 "message": _short_tb(exc)}, lost=False)
            return
        self.chan.send(type="timed", samples_ms=timing.samples_ms, wall_ms=timing.wall_ms,
                       wall_event_ms=timing.wall_event_ms, graph_ms=timing.graph_ms,
                       graph_error=timing.graph_error, kept=kept,
                       unjoined_ms=timing.unjoined_ms, l2_guarded=l2_guarded,
                       t_begin=t_begin, t_end=t_end, codes=codes)


def main(cmd_fd: int, reply_fd: int) -> int:
    chan = Channel(cmd_fd, reply_fd)
    load = chan.receive()
    if not load or load.get("op") != "load":
        return 2
    try:
        cand = Candidate(chan, load)
    except Exception as exc:
        from solbench.evaluate.languages import CompileError

        msg = str(exc) if isinstance(exc, CompileError) else f"{type(exc).__name__}: {exc}"
        chan.send(type="fatal", message=msg[:2000])
        return 0
    chan.send(type="ready")
    while True:
        msg = chan.receive()
        if msg is None or msg.get("op") == "exit":
            # hand the arena back: a CUDA IPC mapping still open when the process ends keeps the trusted
            # worker from ever freeing that memory
            cand.arenas.clear()
            cand.sync()
            return 0
        if msg["op"] == "call":
            cand.call(msg)
        elif msg["op"] == "time":
            cand.time(msg)


if __name__ == "__main__":
    try:
        sys.exit(main(int(sys.argv[1]), int(sys.argv[2])))
    except SystemExit:
        raise
    except BaseException:
        traceback.print_exc()
        sys.exit(3)
