"""The trusted worker: one persistent process per device that takes jobs from the runner and judges them.

Started by the runner (``keeper.Judge``) as ``python -I -c ... --serve CMD_FD RESULT_FD`` with an explicit
module path, so nothing on the environment's path and no user site can put code into it. Before it reads a
job, it imports every module of the harness it will use and forks the zygote that candidates are forked from
(``sandbox.Zygote``); no candidate exists until then, and none can write where these modules live (``namespaces``).

A job names a problem, its subjects (a candidate solution, or the baselines: the eager reference, the reference
under torch.compile, baseline.py) and the (subject, workload) pairs to judge; results go back as JSON lines on
RESULT_FD, one per finished workload (``stages``). The secret seeds, the pristine inputs, the reference outputs
and the comparison exist only in this process.
"""

from __future__ import annotations

import gc
import hashlib
import importlib
import json
import os
import pkgutil
import random
import sys
import time
import traceback
from pathlib import Path
from typing import Any

#: the packages every module of which is harness: imported by this process before any candidate exists
HARNESS_PACKAGES = ("solbench.evaluate.boundary", "solbench.evaluate.candidate", "solbench.evaluate.isolation",
                    "solbench.evaluate.timing", "solbench.evaluate.trusted", "solbench.evaluate.verdict")
#: harness modules outside those packages (the plug-ins of ``languages`` load per solution, after them)
HARNESS_EXTRA = ("solbench.evaluate.integrity.dynamic", "solbench.evaluate.integrity.ghost",
                 "solbench.evaluate.integrity.language", "solbench.evaluate.integrity.l2",
                 "solbench.evaluate.integrity.streams", "solbench.evaluate.integrity.tamper",
                 "solbench.evaluate.languages", "solbench.problems.problem", "solbench.problems.inputs",
                 "solbench.problems.modules", "solbench.problems.roles", "solbench.problems.workload",
                 "solbench.hardware.telemetry", "solbench.evaluate.phases")
#: the share of its device's memory a worker may be left holding for candidates that never handed their arenas
#: back (``_held``) before it retires: a checked batch's arena (at most ``stages.BATCH_BYTES``) or a timing ring's (at
#: most ``ring.RING_BYTES_GPU``), so on an 80 GB device one candidate killed in its timing, or some eight in their calls
RETIRE_HELD_SHARE = 0.05


def harness() -> tuple[str, ...]:
    """Every module of the harness this process uses: the harness packages' modules, found on disk, and the
    extras (tests/evaluate/test_harness.py checks that nothing the harness imports later is missing)."""
    names = []
    for package in HARNESS_PACKAGES:
        names.append(package)
        names += [f"{package}.{m.name}" for m in pkgutil.iter_modules(importlib.import_module(package).__path__)]
    return tuple(names) + HARNESS_EXTRA


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


class Context:
    """What every subject needs to know about the problem and job at hand."""

    def __init__(self, job: dict[str, Any], torch, problem, device, zygote=None):
        from solbench.evaluate.timing.rounds import TimingConfig
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
        from solbench.evaluate.phases import Phases

        self.phases = Phases()

    def seed_for(self, uuid: str, draw: int) -> int:
        return draw_seed(self.job["seed"], uuid, draw)

    def profiled(self, uuid: str) -> bool:
        """Whether the language proof profiles a call on this workload: on every workload (``all``), on one the
        run's secret seed picks (``one``, the default: the profiler's start-up is paid once per solution), or
        never (``off``)."""
        mode = self.job.get("profile_dsl", "one")
        if mode == "all":
            return True
        pairs = self.job.get("pairs") or []
        if mode != "one" or not pairs:
            return False
        pick = random.Random(f"{self.job.get('seed')}:profile").randrange(len(pairs))
        return pairs[pick][1] == uuid

    @property
    def flusher(self):
        """The cache flush for timing trusted subjects on the GPU (a candidate's process has its own)."""
        if self._flusher is None and self.dev.type == "cuda":
            from solbench.evaluate.timing.rounds import Flusher

            self._flusher = Flusher(self.job.get("llc_bytes", 64 << 20), self.dev)
        return self._flusher

    def reference_of(self, given: list[Any], anchor: list[Any] | None = None,
                     ref: list[Any] | None = None) -> tuple[list[Any], list[Any]]:
        """The reference's outputs on copies of ``given`` (``own_of``), and its float64 anchor (``anchor`` and
        ``ref`` where already made)."""
        return (ref if ref is not None else self.own_of(given)), anchor if anchor is not None else self.anchor_of(given)

    def own_of(self, given: list[Any]) -> list[Any]:
        """The reference's outputs in its own dtypes on copies of ``given`` (in-place inputs appended)."""
        from solbench.evaluate.boundary.calls import as_list, copied

        ref_in = [copied(x) for x in given]
        return self.with_inplace(as_list(self.reference(*ref_in)), ref_in)

    def anchor_of(self, given: list[Any]) -> list[Any]:
        """The reference's outputs in float64 on copies of ``given`` (in-place inputs appended)."""
        from solbench.evaluate.boundary.calls import as_list

        anc_in = [_upcast(x, self.torch) for x in given]
        return self.with_inplace(as_list(self.reference(*anc_in)), anc_in)

    def time_reference(self, given: list[Any]) -> float:
        """The wall time of one reference call on copies of ``given``, synchronised on the GPU."""
        from solbench.evaluate.boundary.calls import copied

        ref_in = [copied(x) for x in given]
        if self.dev.type == "cuda":
            self.torch.cuda.synchronize()
        t0 = time.perf_counter()
        self.reference(*ref_in)
        if self.dev.type == "cuda":
            self.torch.cuda.synchronize()
        return time.perf_counter() - t0

    def reference_unfit(self, given: list[Any], ref: list[Any], anchor: list[Any], check) -> tuple[str, str] | None:
        """(reason, message) when the reference cannot judge anything: NaN in its outputs, or a second call on the
        same inputs that its own tolerance rejects (a random reference: dropout, an unseeded draw)."""
        from solbench.evaluate.boundary.calls import as_list, copied

        torch = self.torch
        for name, x in zip([n for n, _ in self.out_specs] + self.inplace, ref):
            if isinstance(x, torch.Tensor) and x.is_floating_point() and bool(torch.isnan(x).any()):
                return "reference_nan", f"the reference's output {name} holds NaN on the first draw's inputs"
        ref_in = [copied(x) for x in given]
        again = self.with_inplace(as_list(self.reference(*ref_in)), ref_in)
        verdict = check(again, given, ref, anchor)
        if not verdict.ok and verdict.verdict == "incorrect_numerical":
            return "reference_random", (f"two reference calls on the same inputs disagree ({verdict.reason}): the "
                                        "reference is random, so no solution can be judged against it")
        return None

    def out_shapes(self, axes: dict[str, int]) -> list[tuple[tuple[int, ...], Any]]:
        from solbench.problems.roles import torch_dtype

        return [(self.definition.shape_of(spec, axes) or (), torch_dtype(spec.dtype)) for _, spec in self.out_specs]

    def with_inplace(self, outputs: list[Any], inputs_after: list[Any]) -> list[Any]:
        return list(outputs) + [inputs_after[self.input_names.index(n)] for n in self.inplace]


def _upcast(x, torch):
    from solbench.evaluate.boundary.calls import copied

    if isinstance(x, torch.Tensor) and x.is_floating_point():
        return x.to(torch.float64)
    return copied(x)


# ---- the worker ------------------------------------------------------------------------------------------
def main(cmd_fd: int, result_fd: int) -> int:
    """Serve jobs (one job file path per line on ``cmd_fd``) until the runner closes the pipe."""
    from solbench.evaluate.isolation import namespaces

    # the runner's end is this worker's, whatever signal ended it (before the imports: it may end meanwhile)
    namespaces.die_with_parent(namespaces.parent_from_env())
    import torch

    from solbench.evaluate.boundary.calls import cuda_healthy, set_threads
    for name in harness():
        importlib.import_module(name)
    from solbench.evaluate.isolation.sandbox import namespaces_available
    from solbench.evaluate.isolation.zygote import Zygote
    from solbench.evaluate.trusted.profiling import profiled

    set_threads(torch, int(os.environ.get("SOLBENCH_CPU_THREADS") or 0))
    # forked before any job (and its seed) is read and before this process has a CUDA context
    zygote = Zygote(namespaces_available()) if os.environ.get("SOLBENCH_ZYGOTE", "1") != "0" else None
    chan = Channel(result_fd)
    commands = os.fdopen(cmd_fd, "r")
    try:
        for line in commands:
            if torch.cuda.is_initialized() and _RAN[0] and not cuda_healthy(torch):
                return 1  # the runner starts a fresh worker
            if profiled(_serve, line.strip(), chan, zygote) != 0:
                return 1
            if torch.cuda.is_initialized():
                torch.cuda.ipc_collect()  # arenas the candidates have let go of
                torch.cuda.empty_cache()
    finally:
        if zygote is not None:
            zygote.close()
    return 0


#: whether this worker's last job ran work on its device: the health check before the next one launches kernels
#: itself, which a worker that only compiled ahead (``compile_only``: beside another evaluation's timing) must not
_RAN = [False]


def _serve(job_path: str, chan: Channel, zygote) -> int:
    """One job; returns non-zero when this worker must not take another (its CUDA context is lost, or its
    candidates left it too much memory they never handed back: ``_held``)."""
    import torch

    from solbench.evaluate.boundary.arena import held_bytes
    from solbench.evaluate.boundary.calls import set_tf32, set_threads
    from solbench.evaluate.isolation.sandbox import read_tail
    from solbench.evaluate.trusted.subjects import RemoteSubject
    from solbench.evaluate.verdict.limits import not_run
    from solbench.evaluate.verdict.stages import judge_workload
    from solbench.problems.problem import load_problem

    job = json.loads(Path(job_path).read_text())
    os.unlink(job_path)  # it holds the run's seed
    _RAN[0] = not job.get("compile_only")
    before = held_bytes() if torch.cuda.is_initialized() else 0  # what earlier jobs' candidates left held
    problem = load_problem(job["problem_dir"])
    if job.get("extra_workloads"):
        from solbench.problems.workload import Workload

        problem.workloads.extend(Workload.model_validate(x) for x in job["extra_workloads"])
    set_tf32(torch, bool(problem.definition.allow_tf32))
    set_threads(torch, int(job.get("cpu_threads") or 0))  # as the job's candidate will run
    chan.send(type="env", **_environment(torch, job["device"]))
    ctx = Context(job, torch, problem, torch.device(job["device"]), zygote)

    built = _build(job, ctx, chan)
    ended: dict[int, tuple[str, str]] = {}  # subject -> (the workload, its verdict) after which none runs (``limits``)
    for subject_index, uuid in job["pairs"]:
        if subject_index not in built:
            continue
        subject = built[subject_index]
        result = {"type": "workload", "subject": subject_index, "uuid": uuid}
        if subject_index in ended:
            result.update(not_run(*ended[subject_index]))
            chan.send(**result)
            continue
        if job.get("compile_only"):  # a compile ahead: the compile baseline compiled, nothing run or judged
            from solbench.evaluate.trusted.compile_only import compile_workload

            result.update(compile_workload(ctx, uuid))
        else:
            result.update(judge_workload(ctx, subject, uuid))
        if getattr(subject, "timed_out", False) and not job.get("run_after_timeout"):
            ended[subject_index] = (uuid, "timeout")
        elif result.get("verdict") == "reward_hack" and not job.get("run_after_reward_hack"):
            ended[subject_index] = (uuid, "reward_hack")
        lost = result.pop("lost", False)
        chan.send(**result)
        if lost:
            chan.send(type="lost", message="CUDA context lost")
            return 1
    for i, subject in built.items():
        subject.close()
        if isinstance(subject, RemoteSubject):
            chan.send(type="candidate", subject=i, restarts=subject.restarts, log=read_tail(subject.log_path, 20000))
    held = _held(torch, job, before)
    if held.get("retire"):
        print(f"solbench: {held['held_bytes'] / 2 ** 20:.0f} MiB of device memory lent to candidates that never "
              "handed it back; this worker takes no further job", flush=True)
    chan.send(type="done", **held)
    return 1 if held.get("retire") else 0


def _held(torch, job: dict[str, Any], before: int) -> dict[str, Any]:
    """What a job's end leaves allocated of the arenas' pool (``arena.held_bytes``: every subject is closed, so no
    arena is open), what of it the job added to the ``before`` it began with, and whether the whole is more than
    ``RETIRE_HELD_SHARE`` of the device's memory (the job's ``retire_held_bytes`` where it sets a limit of its
    own): then this worker retires, the runner starts a fresh one, and the memory goes back with its process.
    Nothing where none is held."""
    from solbench.evaluate.boundary.arena import held_bytes

    if not torch.cuda.is_initialized():
        return {}
    held = held_bytes()
    if held:  # an arena kept alive by a reference cycle of this process's is not held for a candidate
        gc.collect()
        held = held_bytes()
    if not held:
        return {}
    limit = job.get("retire_held_bytes")
    if limit is None:
        limit = RETIRE_HELD_SHARE * torch.cuda.get_device_properties(torch.device(job["device"])).total_memory
    return {"held_bytes": held, "added_bytes": max(0, held - before), "retire": held > limit}


def _build(job: dict[str, Any], ctx: Context, chan: Channel) -> dict[int, Any]:
    """The job's subjects that some pair names, by index; one that cannot be built is reported ``fatal``. Sends
    ``ready`` once they are."""
    from solbench.evaluate.languages import CompileError
    from solbench.evaluate.trusted.subjects import RemoteSubject

    built: dict[int, Any] = {}
    for i, subject in enumerate(job["subjects"]):
        if not any(p[0] == i for p in job["pairs"]):
            continue
        try:
            built[i] = _subject(ctx, subject)
        except Exception as exc:
            msg = str(exc) if isinstance(exc, CompileError) else f"{type(exc).__name__}: {exc}"
            chan.send(type="fatal", subject=i, verdict="compile_error", message=msg[:2000])
    ready: dict[str, Any] = {"type": "ready"}
    for sub in built.values():
        if isinstance(sub, RemoteSubject):
            ready["candidate_ready_s"] = sub.ready_s
            ready["sandbox"] = sub.isolation
            ready["seccomp"] = sub.filtered
    ready["phases"] = ctx.phases.take()
    chan.send(**ready)
    return built


def _subject(ctx: Context, subject: dict[str, Any]):
    """One subject of the job: the candidate started in its sandbox, or a trusted baseline."""
    from solbench.evaluate.languages import CompileError
    from solbench.evaluate.trusted.local import LocalSubject
    from solbench.evaluate.trusted.subjects import RemoteSubject
    from solbench.problems.modules import entry, module_from_source

    kind = subject["kind"]
    if kind == "solution":
        remote = RemoteSubject(ctx, subject)
        with ctx.phases("candidate_start"):
            error = remote.start(with_null=_audited(ctx, remote))
        if error:
            raise CompileError(error)
        return remote
    if kind == "eager":
        return LocalSubject(ctx, ctx.reference)
    if kind == "compile":
        return LocalSubject(ctx, None, compile_per_workload=True)
    if kind == "baseline_file":
        problem = ctx.problem
        mod = module_from_source(problem.baseline_source or "", "solbench_baseline", problem.directory / "baseline.py")
        return LocalSubject(ctx, entry(mod, "run"))
    raise CompileError(f"unknown subject {kind}")


def _audited(ctx: Context, remote) -> bool:
    """Whether the audit will start a null candidate for this subject: its times are taken (not an interpreted
    one's), and on the GPU the hand-over is not yet calibrated in this worker (``audit.calibration``)."""
    from solbench.evaluate.timing import audit

    if not ctx.job.get("time", True) or remote.interpreted:
        return False
    return ctx.dev.type != "cuda" or not audit.calibrated(ctx.dev)


def _environment(torch, device: str) -> dict[str, Any]:
    env: dict[str, Any] = {"torch": torch.__version__, "python": sys.version.split()[0], "device": device,
                           "cpu_threads": torch.get_num_threads()}
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


def cli() -> None:
    try:
        args = sys.argv[1:]
        if len(args) != 3 or args[0] != "--serve":
            sys.exit("usage: python -m solbench.evaluate.trusted.worker --serve CMD_FD RESULT_FD")
        sys.exit(main(int(args[1]), int(args[2])))
    except SystemExit:
        raise
    except BaseException:
        traceback.print_exc()
        sys.exit(3)


if __name__ == "__main__":
    cli()
