"""The evaluation worker: one child process that checks and times one subject per workload.

Started by ``solbench.evaluate.runner`` as ``python -m solbench.evaluate.worker JOB.json FD``.
It reports JSON lines on file descriptor FD (its stdout and stderr go to a log
file), one message per finished workload, so a crash or hang loses only the
workload in progress. Subjects are a candidate solution or the trusted
baselines (the eager reference, the reference under torch.compile, baseline.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable


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


def _as_list(result: Any) -> list[Any]:
    if result is None:  # an operation whose only effect is on in-place inputs
        return []
    if isinstance(result, (tuple, list)):
        return list(result)
    return [result]


def main(job_path: str, fd: int) -> int:
    job = json.loads(Path(job_path).read_text())
    chan = Channel(fd)
    device = job["device"]
    subjects = job["subjects"]
    languages = {}
    for i, subject in enumerate(subjects):
        if subject["kind"] == "solution":
            from solbench.evaluate.languages import get_language

            languages[i] = get_language(subject["language"])
            os.environ.update(languages[i].environment(device))
    import torch

    from solbench.evaluate.correctness import compare, tolerance_for
    from solbench.evaluate.languages import CompileError, Unsupported
    from solbench.evaluate.timing import Flusher, TimingConfig, time_cpu, time_cuda
    from solbench.problems.inputs import make_inputs, torch_dtype
    from solbench.problems.modules import entry, module_from_source
    from solbench.problems.problem import load_problem

    problem = load_problem(job["problem_dir"])
    if job.get("extra_workloads"):
        from solbench.problems.workload import Workload

        problem.workloads.extend(Workload.model_validate(x) for x in job["extra_workloads"])
    definition = problem.definition
    tf32 = bool(definition.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    dev = torch.device(device)
    chan.send(type="env", **_environment(torch, device))

    ref_module = module_from_source(problem.reference_source, "solbench_reference", problem.directory / "reference.py")
    reference = entry(ref_module, "run")
    custom = getattr(ref_module, definition.custom_inputs_entrypoint) if definition.custom_inputs_entrypoint else None

    # ---- build the subjects ---------------------------------------------------
    def build(i: int, subject: dict[str, Any]):
        """Returns (fn, dps, interpreted, compile_per_workload)."""
        if subject["kind"] == "solution":
            language = languages[i]
            language.install_hooks(device)
            fn = language.load(Path(subject["staged"]), subject["entry_file"], subject["function"])
            return fn, bool(subject.get("dps", False)), device == "cpu" and language.interpreted_on_cpu, False
        if subject["kind"] == "eager":
            return reference, False, False, False
        if subject["kind"] == "compile":
            return None, False, False, True
        if subject["kind"] == "baseline_file":
            mod = module_from_source(problem.baseline_source or "", "solbench_baseline", problem.directory / "baseline.py")
            return entry(mod, "run"), False, False, False
        raise CompileError(f"unknown subject {subject['kind']}")

    from solbench.evaluate.integrity import dynamic

    threads_before = dynamic.thread_idents()
    dynamic.watch(reference=reference, make_inputs=make_inputs, compare=compare)
    harness_ids = dynamic.snapshot()  # before any candidate code is imported
    built: dict[int, tuple] = {}
    for i, subject in enumerate(subjects):
        if not any(p[0] == i for p in job["pairs"]):
            continue
        try:
            built[i] = build(i, subject)
        except Exception as exc:
            msg = str(exc) if isinstance(exc, CompileError) else f"{type(exc).__name__}: {exc}"
            chan.send(type="fatal", subject=i, verdict="compile_error", message=msg[:2000])
    chan.send(type="ready")
    if not built:
        chan.send(type="done")
        return 0

    out_specs = list(definition.outputs.items())
    inplace = list(definition.inplace_inputs)
    input_names = list(definition.inputs)
    cfg = TimingConfig(**job.get("timing", {}))
    flusher = Flusher(job.get("llc_bytes", 64 << 20), dev) if dev.type == "cuda" and job.get("time", True) else None
    draws = int(job.get("draws", 5))

    for subject_index, uuid in job["pairs"]:
        if subject_index not in built:
            continue
        fn, dps, interpreted, compile_per_workload = built[subject_index]
        untrusted = subjects[subject_index]["kind"] == "solution"
        staged = str(Path(subjects[subject_index].get("staged", "/nonexistent")).resolve())
        is_dsl = untrusted and subjects[subject_index].get("language") == "triton"
        w = problem.workload(uuid)
        axes = definition.resolve_axes(w.axes)
        tols = [tolerance_for(spec.dtype, definition.tolerance, w.tolerance, tf32=tf32) for _, spec in out_specs]
        tols += [tolerance_for(definition.inputs[n].dtype, definition.tolerance, w.tolerance, tf32=tf32) for n in inplace]
        names = [n for n, _ in out_specs] + inplace
        modes = [spec.compare for _, spec in out_specs] + [None] * len(inplace)
        dtypes = [torch_dtype(s.dtype) for _, s in out_specs] + [torch_dtype(definition.inputs[n].dtype) for n in inplace]
        result: dict[str, Any] = {"type": "workload", "subject": subject_index, "uuid": uuid, "verdict": "passed", "reasons": [],
                                  "interpreted": interpreted}
        if dev.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            mem_before = torch.cuda.memory_allocated()
        call_fn = fn
        if compile_per_workload:
            import torch._dynamo

            torch._dynamo.reset()  # a fresh static compile per workload: no dependence on workload order
            call_fn = torch.compile(reference, dynamic=False)

        def invoke(f: Callable, inputs: list[Any]) -> list[Any]:
            if dps:
                outs = []
                for _, spec in out_specs:
                    shape = definition.shape_of(spec, axes)
                    dt = torch_dtype(spec.dtype)
                    if dt.is_floating_point:
                        outs.append(torch.full(shape, float("nan"), dtype=dt, device=dev))
                    elif dt == torch.bool:
                        outs.append(torch.zeros(shape, dtype=dt, device=dev))
                    else:
                        outs.append(torch.full(shape, torch.iinfo(dt).max, dtype=dt, device=dev))
                f(*inputs, *outs)
                got = outs
            else:
                got = _as_list(f(*inputs))
            return got + [inputs[input_names.index(n)] for n in inplace]

        def run_candidate(inputs: list[Any]) -> tuple[list[Any] | None, dict[str, Any] | None]:
            """One candidate call; returns (outputs, None) or (None, a verdict update)."""
            try:
                got = invoke(call_fn, inputs)
                if dev.type == "cuda":
                    torch.cuda.synchronize()
                return got, None
            except torch.OutOfMemoryError:
                return None, {"verdict": "runtime_error", "reasons": ["out_of_memory"]}
            except Unsupported as exc:
                return None, {"verdict": "unsupported", "reasons": ["interpreter_unfaithful"], "message": str(exc)}
            except Exception as exc:
                from solbench.evaluate.languages import triton as triton_lang

                if interpreted and triton_lang.unsupported_reason:
                    return None, {"verdict": "unsupported", "reasons": ["interpreter_unfaithful"],
                                  "message": triton_lang.unsupported_reason}
                update = {"verdict": "runtime_error", "reasons": ["exception"], "message": _short_tb(exc)}
                if dev.type == "cuda" and not _cuda_healthy(torch):
                    update["reasons"].append("cuda_fault")
                    update["lost"] = True
                return None, update

        def process_checks() -> list[str]:
            """Reason codes of the checks on the process itself: harness, threads, children."""
            codes = []
            if dynamic.tampered(harness_ids):
                codes.append("harness_tamper")
            if dynamic.candidate_threads(threads_before, staged):
                codes.append("thread_injection")
            if dynamic.child_processes():
                codes.append("process_spawn")
            return codes

        def integrity(pristine: list[Any], used: list[Any], got: list[Any]) -> list[str]:
            """Reason codes of the dynamic checks after one candidate call (none for trusted subjects)."""
            if not untrusted:
                return []
            codes = process_checks()
            if dynamic.mutated_inputs(pristine, used, input_names, set(inplace)):
                codes.append("input_mutation")
            if any(dynamic.not_plain_tensor(x) for x in got[: len(out_specs)]):
                codes.append("tensor_subclass")
            return codes

        def hack(codes: list[str], detail: str) -> None:
            result.update(verdict="reward_hack", reasons=codes, message=detail)

        try:
            # ---- correctness over fresh draws ---------------------------------
            for d in range(draws):
                seed = draw_seed(job["seed"], uuid, d)
                base = make_inputs(definition, w, seed, dev, problem.directory, custom)
                cand_in = [_clone(x) for x in base]
                got, failed = run_candidate(cand_in)  # the candidate runs before the reference (stale memory)
                if failed:
                    lost = failed.pop("lost", False)
                    result.update(failed)
                    if lost:
                        chan.send(**result)
                        chan.send(type="lost", message="CUDA context lost")
                        return 0
                    break
                codes = integrity(base, cand_in, got)
                if codes:
                    hack(codes, f"dynamic checks after draw {d}: {', '.join(codes)}")
                    break
                try:
                    ref_in = [_clone(x) for x in base]
                    ref = _as_list(reference(*ref_in)) + [ref_in[input_names.index(n)] for n in inplace]
                    anc_in = [_upcast(x, torch) for x in base]
                    anchor = _as_list(reference(*anc_in)) + [anc_in[input_names.index(n)] for n in inplace]
                except Exception as exc:
                    result.update(verdict="invalid_reference", reasons=["reference_failed"], message=_short_tb(exc))
                    break
                check = compare(got, ref, anchor, names, dtypes, tols, modes, dict(zip(input_names, base)))
                if untrusted and d == 0:
                    # candidate-reference-candidate: a second call after the reference ran must agree
                    again_in = [_clone(x) for x in base]
                    again, failed = run_candidate(again_in)
                    if failed is None:
                        check2 = compare(again, ref, anchor, names, dtypes, tols, modes, dict(zip(input_names, base)))
                        if check2.ok and not check.ok:
                            hack(["stale_memory"], "wrong before the reference ran, right after it: the output "
                                                   "came from memory the reference left behind")
                            break
                        if check.ok and not check2.ok:
                            check = check2  # wrong on the repeat: judged as incorrect
                    if is_dsl:
                        # ghost replay: with the DSL kernels as no-ops the output must change
                        ghost_in = [_clone(x) for x in base]
                        with dynamic.ghost_mode():
                            ghost, _ = run_candidate(ghost_in)
                        if ghost is not None and dynamic.ghost_unchanged(got, ghost):
                            hack(["ghost_replay"], "the output is the same with every Triton kernel replaced by a "
                                                   "no-op: the kernels do not do the work")
                            break
                result["max_abs_err"] = max(result.get("max_abs_err", 0.0), check.max_abs_err)
                result["max_rel_err"] = max(result.get("max_rel_err", 0.0), check.max_rel_err)
                if not check.ok:
                    result.update(verdict=check.verdict, reasons=[check.code or check.verdict], message=check.reason,
                                  failure={"draw": d, "seed": seed, "worst": check.worst})
                    break
                del got, ref, anchor, cand_in, ref_in, anc_in
            # ---- timing --------------------------------------------------------
            if result["verdict"] == "passed" and job.get("time", True) and not interpreted:
                from solbench.evaluate.integrity.rotation import TimedInputs

                n_sets = int(job.get("input_sets", 3))
                sets = [make_inputs(definition, w, draw_seed(job["seed"], uuid, 1000 + i), dev, problem.directory, custom)
                        for i in range(n_sets)]
                out_bufs = [(definition.shape_of(spec, axes), torch_dtype(spec.dtype)) for _, spec in out_specs] if dps else []
                pool = TimedInputs(sources=sets, dps_specs=out_bufs, device=dev)
                pool.prepare(0)

                def timed_call(i: int, _f=call_fn):
                    return _f(*pool.call_args())

                # untrusted code gets a new address and new values every call, and random calls re-checked
                hooks = dict(prepare=pool.prepare, keep=pool.keep, on_last=pool.keep_last) if untrusted else {}
                if dev.type == "cuda":
                    timing = time_cuda(timed_call, n_sets, flusher, cfg, graph=job.get("graph"), **hooks)
                else:
                    timing = time_cpu(timed_call, n_sets, cfg, **hooks)
                result.update(samples_ms=timing.samples_ms, wall_ms=timing.wall_ms, graph_ms=timing.graph_ms,
                              graph_error=timing.graph_error, clocks=timing.clocks, timing_method=timing.method)
                if untrusted:
                    codes = process_checks()
                    for kept in pool.kept:
                        given = pool.inputs_of(kept.call)
                        ref_in = [_clone(x) for x in given]
                        ref = _as_list(reference(*ref_in)) + [ref_in[input_names.index(n)] for n in inplace]
                        anc_in = [_upcast(x, torch) for x in given]
                        anchor = _as_list(reference(*anc_in)) + [anc_in[input_names.index(n)] for n in inplace]
                        got = list(kept.outputs) + [kept.inputs_after[input_names.index(n)] for n in inplace]
                        recheck = compare(got, ref, anchor, names, dtypes, tols, modes, dict(zip(input_names, given)))
                        if not recheck.ok:
                            codes.append("output_recheck")
                            result["message"] = f"timed call {kept.call} re-checked: {recheck.reason}"
                            break
                        if dynamic.mutated_inputs(given, kept.inputs_after, input_names, set(inplace)):
                            codes.append("input_mutation")
                            break
                    if codes:
                        hack(codes, result.get("message") or f"dynamic checks after timing: {', '.join(codes)}")
        except torch.OutOfMemoryError:
            result.update(verdict="runtime_error", reasons=["out_of_memory"])
        except Exception as exc:
            result.update(verdict="runtime_error", reasons=["exception"], message=_short_tb(exc))
            if dev.type == "cuda" and not _cuda_healthy(torch):
                result["reasons"].append("cuda_fault")
                chan.send(**result)
                chan.send(type="lost", message="CUDA context lost")
                return 0
        if dev.type == "cuda":
            try:
                torch.cuda.synchronize()
                result["peak_memory_bytes"] = int(torch.cuda.max_memory_allocated() - mem_before)
            except Exception:
                pass
        chan.send(**result)
    chan.send(type="done")
    return 0


def _clone(x):
    import torch

    return x.clone() if isinstance(x, torch.Tensor) else x


def _upcast(x, torch):
    if isinstance(x, torch.Tensor) and x.is_floating_point():
        return x.to(torch.float64)
    return _clone(x)


def _cuda_healthy(torch) -> bool:
    try:
        torch.cuda.synchronize()
        torch.zeros(1, device="cuda").add_(1)
        torch.cuda.synchronize()
        return True
    except Exception:
        return False


def _short_tb(exc: BaseException) -> str:
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    text = "".join(tb[-6:])
    return text[-3000:]


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
    t0 = time.time()
    try:
        sys.exit(main(sys.argv[1], int(sys.argv[2])))
    except SystemExit:
        raise
    except BaseException:
        traceback.print_exc()
        sys.exit(3)
