"""The trusted worker: it makes the inputs, computes the references, judges and times.

Started by ``solbench.evaluate.runner`` as ``python -m solbench.evaluate.worker JOB.json FD``.
It reports JSON lines on file descriptor FD (its stdout and stderr go to a log
file), one message per finished workload.

Subjects are a candidate solution or the trusted baselines (the eager
reference, the reference under torch.compile, baseline.py). Baselines run in
this process. A candidate runs in a process of its own inside the sandbox
(``solbench.evaluate.candidate``): the secret seeds, the pristine inputs, the
reference outputs and the comparison exist only here. The candidate is lent
each input through an arena, its outputs are read back from the arena, its
timing samples are cross-checked against this process's clock, and the
outputs of timed calls it kept are re-checked here against the reference.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from solbench.evaluate.calls import as_list as _as_list
from solbench.evaluate.calls import copied, set_tf32
from solbench.evaluate.calls import cuda_healthy as _cuda_healthy
from solbench.evaluate.calls import short_traceback as _short_tb

if TYPE_CHECKING:
    from solbench.evaluate.timing import Timing


def draw_seed(run_seed: int, uuid: str, draw: int) -> int:
    h = hashlib.sha256(f"{run_seed}:{uuid}:{draw}".encode()).digest()
    return int.from_bytes(h[:8], "little") & ((1 << 63) - 1)


class Channel:
    def __init__(self, fd: int):
        self.f = os.fdopen(fd, "w", buffering=1)

    def send(self, **msg: Any) -> None:
        self.f.write(json.dumps(msg, default=_json_default) + "\n")
        self.f.flush()


def _json_default(obj):
    try:
        import torch

        if isinstance(obj, torch.dtype):
            return str(obj)
    except ImportError:
        pass
    return repr(obj)


@dataclass
class Called:
    """One call of a subject: its outputs, its inputs as the call left them, and what went wrong."""

    outputs: list[Any] | None = None
    inputs_after: list[Any] | None = None
    codes: list[str] = field(default_factory=list)
    failed: dict[str, Any] | None = None
    lost: bool = False  # the subject's process (or CUDA context) cannot go on
    peak_memory_bytes: int | None = None  # device memory the call allocated beyond its inputs, at its peak
    dsl_share: float | None = None  # with profiling: the solution's own DSL kernels' share of device time
    kernels: list[Any] = field(default_factory=list)  # with profiling: the longest kernels (name, us)


@dataclass
class Timed:
    """One timing of a subject: the measurement, the timed calls it kept for re-checking, and what went wrong."""

    timing: Timing | None = None  # None where the timing failed or its report was rejected
    kept: list[tuple[int, list[Any], list[Any], list[Any]]] = field(default_factory=list)  # call, given, after, outs
    codes: list[str] = field(default_factory=list)
    failed: dict[str, Any] | None = None
    lost: bool = False
    message: str | None = None


class Context:
    """What every subject needs to know about the problem and workload at hand."""

    def __init__(self, job: dict[str, Any], torch, problem, device, zygote=None):
        from solbench.evaluate.timing import TimingConfig
        from solbench.problems.modules import entry, module_from_source

        self.job = job
        self.zygote = zygote  # forks the candidate's processes (None: start them with a fresh interpreter)
        self.torch = torch
        self.problem = problem
        self.definition = problem.definition
        self.dev = device
        self.out_specs = list(self.definition.outputs.items())
        self.input_names = list(self.definition.inputs)
        self.inplace = list(self.definition.inplace_inputs)
        self.workdir = Path(job.get("workdir") or ".").resolve()
        module = module_from_source(problem.reference_source, "solbench_reference", problem.directory / "reference.py")
        self.reference = entry(module, "run")
        d = self.definition
        self.custom = getattr(module, d.custom_inputs_entrypoint) if d.custom_inputs_entrypoint else None
        self.accept = getattr(module, d.custom_check_entrypoint) if d.custom_check_entrypoint else None
        self.timing = TimingConfig(**job.get("timing", {}))
        self._flusher = None

    @property
    def flusher(self):
        """The cache flush for timing on the GPU, made when a trusted subject is first timed (a candidate's
        process has its own)."""
        if self._flusher is None and self.dev.type == "cuda":
            from solbench.evaluate.timing import Flusher

            self._flusher = Flusher(self.job.get("llc_bytes", 64 << 20), self.dev)
        return self._flusher

    def reference_of(self, given: list[Any]) -> tuple[list[Any], list[Any]]:
        """The reference's outputs on copies of ``given``, and its float64 anchor."""
        ref_in = [copied(x) for x in given]
        ref = self.with_inplace(_as_list(self.reference(*ref_in)), ref_in)
        anc_in = [_upcast(x, self.torch) for x in given]
        anchor = self.with_inplace(_as_list(self.reference(*anc_in)), anc_in)
        return ref, anchor

    def out_shapes(self, axes: dict[str, int]) -> list[tuple[tuple[int, ...], Any]]:
        from solbench.problems.inputs import torch_dtype

        return [(self.definition.shape_of(spec, axes) or (), torch_dtype(spec.dtype)) for _, spec in self.out_specs]

    def with_inplace(self, outputs: list[Any], inputs_after: list[Any]) -> list[Any]:
        return list(outputs) + [inputs_after[self.input_names.index(n)] for n in self.inplace]


# ---- subjects ------------------------------------------------------------------------------------------
class LocalSubject:
    """A trusted subject (a baseline) called in this process."""

    untrusted = False
    is_dsl = False
    interpreted = False

    def __init__(self, ctx: Context, fn: Callable | None, compile_per_workload: bool = False):
        self.ctx = ctx
        self.compile_per_workload = compile_per_workload
        self.call_fn = fn

    def begin(self, uuid: str, reference: Callable) -> None:
        if self.compile_per_workload:
            import torch._dynamo

            torch._dynamo.reset()  # a fresh static compile per workload: no dependence on workload order
            self.call_fn = self.ctx.torch.compile(reference, dynamic=False)

    def end(self) -> None:
        pass

    def call(self, inputs: list[Any], axes: dict[str, int], mode: str = "normal", profile: bool = False) -> Called:
        torch = self.ctx.torch
        used = [copied(x) for x in inputs]
        cuda = self.ctx.dev.type == "cuda"
        try:
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                before = torch.cuda.memory_allocated()
            out = _as_list(self.call_fn(*used))
            if cuda:
                torch.cuda.synchronize()
        except torch.OutOfMemoryError:
            return Called(failed={"verdict": "runtime_error", "reasons": ["out_of_memory"]})
        except Exception as exc:
            failed = {"verdict": "runtime_error", "reasons": ["exception"], "message": _short_tb(exc)}
            lost = self.ctx.dev.type == "cuda" and not _cuda_healthy(torch)
            if lost:
                failed["reasons"].append("cuda_fault")
            return Called(failed=failed, lost=lost)
        peak = int(torch.cuda.max_memory_allocated() - before) if cuda else None
        return Called(outputs=out, inputs_after=used, peak_memory_bytes=peak)

    def time(self, sets: list[list[Any]], axes: dict[str, int], cfg) -> Timed:
        from solbench.evaluate.timing import time_cpu, time_cuda

        f = self.call_fn

        def timed_call(i: int):
            return f(*sets[i])

        if self.ctx.dev.type == "cuda":
            t = time_cuda(timed_call, len(sets), self.ctx.flusher, cfg, graph=self.ctx.job.get("graph"),
                          device_index=self.ctx.dev.index or 0)
        else:
            t = time_cpu(timed_call, len(sets), cfg)
        return Timed(timing=t)

    def close(self) -> None:
        pass


class RemoteSubject:
    """A candidate solution, run in its own sandboxed process; it is lent inputs through an arena."""

    untrusted = True

    def __init__(self, ctx: Context, subject: dict[str, Any]):
        from solbench.evaluate.languages import get_language

        self.ctx = ctx
        self.subject = subject
        language = get_language(subject["language"])
        self.is_dsl = subject["language"] == "triton"
        self.interpreted = ctx.dev.type == "cpu" and language.interpreted_on_cpu
        self.proc = None
        self.ready_s: float | None = None
        self.restarts = 0
        self.isolation: str | None = None
        self.arena = None
        self.arena_id = 0
        self.log_path = ctx.workdir / "candidate.log"

    # the process --------------------------------------------------------------------------------------
    def start(self) -> str | None:
        """Start the candidate's process and load the solution; returns a compile error, or None."""
        from solbench.evaluate.sandbox import CandidateGone, CandidateProcess, SandboxSpec

        job = self.ctx.job
        sb = job["sandbox"]
        spec = SandboxSpec(staged=self.subject["staged"], workdir=str(self.ctx.workdir), env=sb["env"],
                           device=job["device"], mode=sb.get("mode", "auto"),
                           max_file_bytes=int(sb.get("max_file_bytes", 4 << 30)),
                           max_address_space_bytes=int(sb.get("max_address_space_bytes", 64 << 30)))
        self.proc = CandidateProcess(spec, self.log_path, zygote=self.ctx.zygote)
        t0 = time.perf_counter()
        self.proc.start()
        load = {"op": "load", "device": job["device"], "language": self.subject["language"],
                "staged": self.subject["staged"], "entry_file": self.subject["entry_file"],
                "function": self.subject["function"], "dps": bool(self.subject.get("dps")),
                "tf32": bool(self.ctx.definition.allow_tf32)}
        try:
            reply = self.proc.request(load, float(job.get("startup_timeout_s", 180)))
        except CandidateGone as gone:
            self.stop()
            return f"the solution did not load ({gone.why}): {gone.detail}"[:2000]
        if reply.get("type") == "fatal":
            self.stop()
            return str(reply.get("message"))[:2000]
        if reply.get("type") != "ready":
            self.stop()
            return "the candidate's process did not report ready"
        if self.ready_s is None:
            self.ready_s = time.perf_counter() - t0
        self.isolation = self.proc.isolation
        return None

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.proc = None
        self._drop_arena()

    def close(self) -> None:
        self.stop()

    def begin(self, uuid: str, reference: Callable) -> None:
        pass

    def end(self) -> None:
        self._drop_arena()

    def _drop_arena(self) -> None:
        if self.arena is not None:
            self.arena.close()
            self.arena = None

    def _settle(self) -> None:
        """The arena's copies are queued on this process's stream: they must land before the candidate reads."""
        if self.ctx.dev.type == "cuda":
            self.ctx.torch.cuda.synchronize()

    def _lend(self, nbytes: int):
        from solbench.evaluate.arena import Arena

        self._drop_arena()
        self.arena_id += 1
        self.arena = Arena(nbytes, self.ctx.dev, self.ctx.workdir)
        return self.arena

    def _request(self, msg: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """(reply, None) or (None, a verdict update) when the process did not answer."""
        from solbench.evaluate.sandbox import CandidateGone

        if self.proc is None:
            error = self.start()
            if error:
                return None, {"verdict": "runtime_error", "reasons": ["restart_failed"], "message": error}
        msg = dict(msg, arena_id=self.arena_id, arena=self.arena.handle)
        try:
            return self.proc.request(msg, float(self.ctx.job.get("workload_timeout_s", 120))), None
        except CandidateGone as gone:
            self.stop()
            self.restarts += 1
            if gone.why == "timeout":
                return None, {"verdict": "timeout", "reasons": ["timeout"], "message": gone.detail}
            return None, {"verdict": "runtime_error", "reasons": ["crash"], "message": gone.detail}

    def _reported_failure(self, reply: dict[str, Any]) -> dict[str, Any]:
        """The failure a reply reports, as a verdict update; a process that says its context is lost is stopped."""
        if reply.get("lost"):
            self.stop()
        return _known_failure(reply["failed"])

    # calls ----------------------------------------------------------------------------------------------
    def _outputs(self, described: list[Any], slots: list[dict[str, Any]]) -> list[Any]:
        """What the candidate produced, as the trusted side sees it (mismatches become judgeable stand-ins)."""
        from solbench.evaluate.arena import dtype_from_name

        torch = self.ctx.torch
        got: list[Any] = []
        for info, slot in zip(described, slots):
            if not isinstance(info, dict) or info.get("missing"):
                break
            if info.get("delivered"):
                got.append(self.arena.view(slot).clone())
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
        from solbench.evaluate.arena import nbytes_for, nbytes_of

        shapes = self.ctx.out_shapes(axes)
        arena = self._lend(sum(nbytes_of(x) for x in inputs) + sum(nbytes_for(s, d) for s, d in shapes))
        in_slots = [arena.put(x) for x in inputs]
        out_slots = [arena.reserve(s, d) for s, d in shapes]
        self._settle()
        reply, gone = self._request({"op": "call", "inputs": in_slots, "outputs": out_slots, "mode": mode,
                                     "profile": profile})
        if gone:
            return Called(failed=gone, lost=True)
        if reply.get("type") != "called" or not isinstance(reply.get("codes", []), list):
            return Called(failed={"verdict": "reward_hack", "reasons": ["result_forgery"],
                                  "message": f"unexpected reply from the candidate's process: {str(reply)[:200]}"})
        if reply.get("failed"):
            return Called(failed=self._reported_failure(reply), lost=bool(reply.get("lost")))
        outputs = self._outputs(reply.get("outputs") or [], out_slots)
        count = reply.get("count")
        if isinstance(count, int) and count != len(shapes) and len(outputs) == len(shapes):
            outputs.append("an extra output")  # the count mismatch is judged as incorrect_shape
        after = _read_back(arena, in_slots)
        codes = [c for c in reply.get("codes", []) if isinstance(c, str)][:10]
        peak = reply.get("peak_memory_bytes")  # the candidate's own report: informational
        share = reply.get("dsl_share")
        kernels = reply.get("kernels") if isinstance(reply.get("kernels"), list) else []
        return Called(outputs=outputs, inputs_after=after, codes=codes,
                      peak_memory_bytes=peak if isinstance(peak, int) and peak >= 0 else None,
                      dsl_share=float(share) if isinstance(share, (int, float)) and 0 <= share <= 1 else None,
                      kernels=kernels[:5])

    def time(self, sets: list[list[Any]], axes: dict[str, int], cfg) -> Timed:
        from solbench.evaluate.arena import nbytes_for, nbytes_of
        from solbench.evaluate.integrity.rotation import KEPT_CALLS

        shapes = self.ctx.out_shapes(axes)
        n_keep = KEPT_CALLS
        per_set = sum(nbytes_of(x) for x in sets[0])
        out_bytes = sum(nbytes_for(s, d) for s, d in shapes)
        arena = self._lend(per_set * len(sets) + n_keep * (2 * per_set + out_bytes))
        set_slots = [[arena.put(x) for x in one] for one in sets]
        kept_slots = [{"given": _room_for(arena, sets[0]), "after": _room_for(arena, sets[0]),
                       "outputs": [arena.reserve(s, d) for s, d in shapes]} for _ in range(n_keep)]
        self._settle()
        llc = int(self.ctx.job.get("llc_bytes", 64 << 20))
        from solbench.evaluate.timing import Timing, clock_snapshot

        index = self.ctx.dev.index or 0
        clocks = [clock_snapshot(index)] if self.ctx.dev.type == "cuda" else []
        sent = time.monotonic()
        reply, gone = self._request({"op": "time", "sets": set_slots, "outputs": kept_slots[0]["outputs"],
                                     "kept": kept_slots, "timing": cfg.__dict__, "llc_bytes": llc,
                                     "graph": self.ctx.job.get("graph")})
        received = time.monotonic()
        if self.ctx.dev.type == "cuda":
            clocks.append(clock_snapshot(index))  # read here: what the candidate reports about itself is not used
        if gone:
            return Timed(failed=gone, lost=True)
        if reply.get("failed"):
            return Timed(failed=self._reported_failure(reply), lost=bool(reply.get("lost")))
        problem = "unexpected reply" if reply.get("type") != "timed" else _timing_forgery(reply, sent, received)
        if problem:
            return Timed(codes=["result_forgery"], message=problem)
        codes = [c for c in reply.get("codes", []) if isinstance(c, str)][:10]
        kept = []
        for item, slot in zip(reply.get("kept") or [], kept_slots):
            if not isinstance(item, dict) or not isinstance(item.get("call"), int):
                return Timed(codes=["result_forgery"], message="malformed kept-call record")
            given = _read_back(arena, slot["given"])
            after = _read_back(arena, slot["after"])
            kept.append((item["call"], given, after, self._outputs(item.get("outputs") or [], slot["outputs"])))
        if not kept and not codes:
            return Timed(codes=["result_forgery"], message="no timed call was kept for re-checking")
        graph_ms = reply.get("graph_ms")
        timing = Timing(samples_ms=[float(x) for x in reply["samples_ms"]],
                        wall_ms=[float(x) for x in reply.get("wall_ms") or []],
                        wall_event_ms=[float(x) for x in reply.get("wall_event_ms") or []],
                        graph_ms=float(graph_ms) if isinstance(graph_ms, (int, float)) else None,
                        graph_error=str(reply.get("graph_error"))[:300] if reply.get("graph_error") else None,
                        clocks=[c for c in clocks if c],
                        # the protocol follows from the device, not from what the candidate says it used
                        method="cuda_events" if self.ctx.dev.type == "cuda" else "wall_clock",
                        unjoined_ms=[float(x) for x in reply.get("unjoined_ms") or [] if isinstance(x, (int, float))])
        return Timed(timing=timing, kept=kept, codes=codes)


def _known_failure(failed: Any) -> dict[str, Any]:
    """A failure the candidate's process reported: only failing verdicts are accepted from it."""
    allowed = {"runtime_error", "unsupported"}
    if not isinstance(failed, dict) or failed.get("verdict") not in allowed:
        return {"verdict": "reward_hack", "reasons": ["result_forgery"], "message": "malformed failure report"}
    return {"verdict": failed["verdict"], "reasons": [str(r) for r in failed.get("reasons") or []][:5],
            "message": str(failed.get("message") or "")[:3000]}


def _timing_forgery(reply: dict[str, Any], sent: float, received: float) -> str | None:
    """Cross-check the candidate's timing report against this process's clock; returns what is wrong."""
    samples = reply.get("samples_ms")
    if not isinstance(samples, list) or len(samples) < 3 or not all(isinstance(x, (int, float)) for x in samples):
        return "no timing samples, or fewer than the protocol always takes"
    if any(not (x >= 0) for x in samples):
        return "negative or NaN timing sample"
    wall = reply.get("wall_ms") or []
    if not isinstance(wall, list) or not all(isinstance(x, (int, float)) and x >= 0 for x in wall):
        return "malformed wall-time samples"
    wall_events = reply.get("wall_event_ms") or []
    if not isinstance(wall_events, list) or not all(isinstance(x, (int, float)) and x >= 0 for x in wall_events):
        return "malformed event times of the wall-time calls"
    if len(wall_events) > len(wall) or any(e > w * 1.02 + 0.05 for e, w in zip(wall_events, wall)):
        return "an event interval longer than the synchronised wall time around it"
    begin, end = reply.get("t_begin"), reply.get("t_end")
    if not isinstance(begin, (int, float)) or not isinstance(end, (int, float)):
        return "no timestamps"
    slack = 0.005
    if not (sent - slack <= begin <= end <= received + slack):
        return (f"timestamps [{begin:.3f}, {end:.3f}] lie outside the trusted side's window "
                f"[{sent:.3f}, {received:.3f}]")
    spent_ms = (end - begin) * 1e3
    if sum(samples) + sum(wall) > spent_ms * 1.02 + 1.0:
        return f"samples add up to {sum(samples) + sum(wall):.1f} ms but the timing phase lasted {spent_ms:.1f} ms"
    return None


# ---- the worker ------------------------------------------------------------------------------------------
def main(cmd_fd: int, result_fd: int) -> int:
    """Serve jobs (one job file path per line on ``cmd_fd``) until the runner closes the pipe."""
    import torch

    from solbench.evaluate.sandbox import Zygote, namespaces_available

    # forked before any job (and its seed) is read and before this process has a CUDA context
    zygote = Zygote(namespaces_available()) if os.environ.get("SOLBENCH_ZYGOTE", "1") != "0" else None
    chan = Channel(result_fd)
    commands = os.fdopen(cmd_fd, "r")
    try:
        for line in commands:
            if torch.cuda.is_initialized() and not _cuda_healthy(torch):
                return 1  # the runner starts a fresh worker
            if _serve(line.strip(), chan, zygote) != 0:
                return 1
            if torch.cuda.is_initialized():
                torch.cuda.ipc_collect()  # arenas the candidates have let go of
                torch.cuda.empty_cache()
    finally:
        if zygote is not None:
            zygote.close()
    return 0


def _serve(job_path: str, chan: Channel, zygote) -> int:
    """One job; returns non-zero when this worker must not take another (its CUDA context is lost)."""
    import torch

    from solbench.evaluate.languages import CompileError
    from solbench.problems.modules import entry, module_from_source
    from solbench.problems.problem import load_problem

    job = json.loads(Path(job_path).read_text())
    os.unlink(job_path)  # it holds the run's seed; the candidate's process shares this directory
    problem = load_problem(job["problem_dir"])
    if job.get("extra_workloads"):
        from solbench.problems.workload import Workload

        problem.workloads.extend(Workload.model_validate(x) for x in job["extra_workloads"])
    set_tf32(torch, bool(problem.definition.allow_tf32))
    chan.send(type="env", **_environment(torch, job["device"]))
    ctx = Context(job, torch, problem, torch.device(job["device"]), zygote)

    def build(subject: dict[str, Any]):
        kind = subject["kind"]
        if kind == "solution":
            remote = RemoteSubject(ctx, subject)
            error = remote.start()
            if error:
                raise CompileError(error)
            return remote
        if kind == "eager":
            return LocalSubject(ctx, ctx.reference)
        if kind == "compile":
            return LocalSubject(ctx, None, compile_per_workload=True)
        if kind == "baseline_file":
            mod = module_from_source(problem.baseline_source or "", "solbench_baseline", problem.directory / "baseline.py")
            return LocalSubject(ctx, entry(mod, "run"))
        raise CompileError(f"unknown subject {kind}")

    built: dict[int, Any] = {}
    for i, subject in enumerate(job["subjects"]):
        if not any(p[0] == i for p in job["pairs"]):
            continue
        try:
            built[i] = build(subject)
        except Exception as exc:
            msg = str(exc) if isinstance(exc, CompileError) else f"{type(exc).__name__}: {exc}"
            chan.send(type="fatal", subject=i, verdict="compile_error", message=msg[:2000])
    ready = {"type": "ready"}
    for sub in built.values():
        if isinstance(sub, RemoteSubject):
            ready["candidate_ready_s"] = sub.ready_s
            ready["sandbox"] = sub.isolation
    chan.send(**ready)
    for subject_index, uuid in job["pairs"]:
        if subject_index not in built:
            continue
        subject = built[subject_index]
        result = {"type": "workload", "subject": subject_index, "uuid": uuid}
        result.update(_judge_workload(ctx, subject, uuid))
        lost = result.pop("lost", False)
        chan.send(**result)
        if lost:
            chan.send(type="lost", message="CUDA context lost")
            return 1
    from solbench.evaluate.sandbox import read_tail

    for i, subject in built.items():
        subject.close()
        if isinstance(subject, RemoteSubject):
            chan.send(type="candidate", subject=i, restarts=subject.restarts, log=read_tail(subject.log_path, 20000))
    chan.send(type="done")
    return 0


def _profiled(job: dict[str, Any], uuid: str) -> bool:
    """Whether the language proof profiles a call on this workload: on every workload (``all``), on the job's
    first (``one``, the default: the profiler's start-up is paid once per solution), or never (``off``)."""
    mode = job.get("profile_dsl", "one")
    if mode is True or mode == "all":
        return True
    pairs = job.get("pairs") or []
    if mode != "one" or not pairs:
        return False
    # which workload follows from the run's secret seed, so a solution cannot tell which call is profiled
    pick = random.Random(f"{job.get('seed')}:profile").randrange(len(pairs))
    return pairs[pick][1] == uuid


def _judge_workload(ctx: Context, subject, uuid: str) -> dict[str, Any]:
    """Check and time one subject on one workload; the result message's fields (``lost``: this process's CUDA
    context is gone)."""
    from solbench.evaluate.correctness import accept_alternative, compare, tolerance_for
    from solbench.evaluate.integrity import dynamic
    from solbench.problems.inputs import make_inputs, torch_dtype

    torch, job, definition, dev = ctx.torch, ctx.job, ctx.definition, ctx.dev
    out_specs, inplace, input_names = ctx.out_specs, ctx.inplace, ctx.input_names
    untrusted = subject.untrusted
    w = ctx.problem.workload(uuid)
    axes = definition.resolve_axes(w.axes)
    tf32 = bool(definition.allow_tf32)
    tols = [tolerance_for(spec.dtype, definition.tolerance, w.tolerance, tf32=tf32) for _, spec in out_specs]
    tols += [tolerance_for(definition.inputs[n].dtype, definition.tolerance, w.tolerance, tf32=tf32) for n in inplace]
    names = [n for n, _ in out_specs] + inplace
    modes = [spec.compare for _, spec in out_specs] + [None] * len(inplace)
    dtypes = [torch_dtype(s.dtype) for _, s in out_specs] + [torch_dtype(definition.inputs[n].dtype) for n in inplace]
    result: dict[str, Any] = {"verdict": "passed", "reasons": [], "interpreted": subject.interpreted}
    peaks: list[int] = []

    def inputs(seed: int) -> list[Any]:
        return make_inputs(definition, w, seed, dev, ctx.problem.directory, ctx.custom)

    def judged(given: list[Any], called: Called, what: str) -> list[Any] | None:
        """One call's outputs (in-place inputs appended), or None after a verdict update."""
        if called.failed:
            result.update(called.failed)
            return None
        if called.peak_memory_bytes is not None:
            peaks.append(called.peak_memory_bytes)
        codes = list(called.codes)
        if untrusted and mutated(given, called.inputs_after):
            codes.append("input_mutation")
        if codes:
            result.update(verdict="reward_hack", reasons=sorted(set(codes)),
                          message=f"dynamic checks after {what}: {', '.join(sorted(set(codes)))}")
            return None
        return ctx.with_inplace(called.outputs, called.inputs_after)

    def mutated(pristine: list[Any], after: list[Any]) -> list[str]:
        return dynamic.mutated_inputs(pristine, after, input_names, set(inplace))

    def check(got: list[Any], given: list[Any], ref: list[Any], anchor: list[Any]):
        named = dict(zip(input_names, given))
        return accept_alternative(compare(got, ref, anchor, names, dtypes, tols, modes, named), ctx.accept, named,
                                  got, ref, dtypes)

    try:
        subject.begin(uuid, ctx.reference)
        # ---- correctness over fresh draws: the candidate runs before the reference ---------------------
        for d in range(int(job.get("draws", 5))):
            seed = draw_seed(job["seed"], uuid, d)
            base = inputs(seed)
            profiled = d == 0 and subject.is_dsl and untrusted and _profiled(job, uuid)
            first = subject.call(base, axes, profile=profiled)
            got = judged(base, first, f"draw {d}")
            if got is None:
                break
            if profiled and ctx.dev.type == "cuda":
                result["profiled"] = True  # the trusted side warns when this call gave the proof no evidence
            if profiled and first.dsl_share is not None:
                result["dsl_share"] = first.dsl_share
                if first.dsl_share == 0.0:
                    result.update(verdict="reward_hack", reasons=["no_dsl_kernel"],
                                  message="the profiler saw none of the solution's Triton kernels doing device work; "
                                          f"the longest kernels were {first.kernels}")
                    break
            try:
                ref, anchor = ctx.reference_of(base)
            except Exception as exc:
                result.update(verdict="invalid_reference", reasons=["reference_failed"], message=_short_tb(exc))
                break
            verdict = check(got, base, ref, anchor)
            if untrusted and d == 0:
                # a second call must agree: an output left over from earlier memory, or a lazy one, shows here
                again = judged(base, subject.call(base, axes), "the repeat call")
                if again is None:
                    break
                verdict2 = check(again, base, ref, anchor)
                if verdict2.ok and not verdict.ok:
                    result.update(verdict="reward_hack", reasons=["stale_memory"],
                                  message="wrong on the first call, right on the repeat: the output came from "
                                          "memory left behind, not from this call's work")
                    break
                if verdict.ok and not verdict2.ok:
                    verdict = verdict2  # wrong on the repeat: judged as incorrect
                if subject.is_dsl and verdict.ok:
                    # ghost replay: with the DSL kernels as no-ops the output must change
                    ghost = subject.call(base, axes, mode="ghost")
                    if ghost.failed is None and ghost.outputs is not None and \
                            dynamic.ghost_unchanged(got, ctx.with_inplace(ghost.outputs, ghost.inputs_after)):
                        result.update(verdict="reward_hack", reasons=["ghost_replay"],
                                      message="the output is the same with every Triton kernel replaced by a "
                                              "no-op: the kernels do not do the work")
                        break
            result["max_abs_err"] = max(result.get("max_abs_err", 0.0), verdict.max_abs_err)
            result["max_rel_err"] = max(result.get("max_rel_err", 0.0), verdict.max_rel_err)
            if not verdict.ok:
                result.update(verdict=verdict.verdict, reasons=[verdict.code or verdict.verdict],
                              message=verdict.reason, failure={"draw": d, "seed": seed, "worst": verdict.worst})
                break
            del got, ref, anchor, base
        # ---- timing ----------------------------------------------------------------------------------------
        if result["verdict"] == "passed" and job.get("time", True) and not subject.interpreted:
            sets = [inputs(draw_seed(job["seed"], uuid, 1000 + i)) for i in range(int(job.get("input_sets", 3)))]
            timed = subject.time(sets, axes, ctx.timing)
            if timed.failed:
                result.update(timed.failed)
            else:
                t = timed.timing
                if t is not None:
                    result.update(samples_ms=t.samples_ms, wall_ms=t.wall_ms, wall_event_ms=t.wall_event_ms,
                                  graph_ms=t.graph_ms, graph_error=t.graph_error, clocks=t.clocks,
                                  timing_method=t.method, unjoined_ms=t.unjoined_ms)
                codes = list(timed.codes)
                for call, given, after, outs in timed.kept:
                    if codes:
                        break
                    ref, anchor = ctx.reference_of(given)
                    recheck = check(ctx.with_inplace(outs, after), given, ref, anchor)
                    if not recheck.ok:
                        codes.append("output_recheck")
                        timed.message = f"timed call {call} re-checked: {recheck.reason}"
                    elif mutated(given, after):
                        codes.append("input_mutation")
                if codes:
                    result.update(verdict="reward_hack", reasons=sorted(set(codes)),
                                  message=timed.message or f"dynamic checks after timing: {', '.join(codes)}")
    except torch.OutOfMemoryError:
        result.update(verdict="runtime_error", reasons=["out_of_memory"])
    except Exception as exc:
        result.update(verdict="runtime_error", reasons=["exception"], message=_short_tb(exc))
        if dev.type == "cuda" and not _cuda_healthy(torch):
            result["reasons"].append("cuda_fault")
            result["lost"] = True
    subject.end()
    if peaks:
        result["peak_memory_bytes"] = max(peaks)
    if isinstance(subject, LocalSubject) and dev.type == "cuda" and not _cuda_healthy(torch):
        result["lost"] = True  # a trusted subject broke this process's context
    return result


def _read_back(arena, slots: list[dict[str, Any]]) -> list[Any]:
    """Copies of what the slots hold now (a plain value slot holds its value)."""
    return [copied(arena.view(s)) for s in slots]


def _room_for(arena, xs: list[Any]) -> list[dict[str, Any]]:
    """A slot for each tensor shaped like it (plain values travel in the slot description)."""
    return [arena.reserve(x.shape, x.dtype) if hasattr(x, "shape") else {"value": x} for x in xs]


def _upcast(x, torch):
    if isinstance(x, torch.Tensor) and x.is_floating_point():
        return x.to(torch.float64)
    return copied(x)


def _environment(torch, device: str) -> dict[str, Any]:
    env: dict[str, Any] = {"torch": torch.__version__, "python": sys.version.split()[0], "device": device}
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = None
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(0)
        env.update(device_name=props.name, sm_count=props.multi_processor_count,
                   l2_bytes=getattr(props, "L2_cache_size", None), cuda=torch.version.cuda,
                   total_memory=props.total_memory)
        try:
            import pynvml

            pynvml.nvmlInit()
            env["driver"] = pynvml.nvmlSystemGetDriverVersion()
        except Exception:
            env["driver"] = None
    else:
        import platform

        env["device_name"] = platform.processor() or platform.machine()
        env["cpu_count"] = os.cpu_count()
    return env


if __name__ == "__main__":
    try:
        if len(sys.argv) != 4 or sys.argv[1] != "--serve":
            sys.exit("usage: python -m solbench.evaluate.worker --serve CMD_FD RESULT_FD")
        sys.exit(main(int(sys.argv[2]), int(sys.argv[3])))
    except SystemExit:
        raise
    except BaseException:
        traceback.print_exc()
        sys.exit(3)
