"""The cases of benchmarks/ncu_agreement.py: (problem, workload, example solution) triples of the starter suite,
and how to build one case's call exactly as the evaluator builds its inputs.

Shared by ncu_agreement.py (the in-process CUPTI clock and the evaluator's clock) and ncu_target.py (the script
Nsight Compute profiles), so both clocks time the same call on the same inputs. Nothing here touches a GPU at
import time: ``--list`` works on any machine.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

#: size classes: "launch-bound" (decode sizes, a few microseconds), "mid" (about 5-20 us), "large" (20 us or more)
SIZES = ("launch-bound", "mid", "large")


@dataclass(frozen=True)
class Case:
    name: str  # short id, used by --cases and in NVTX range names
    problem: str  # bundled problem directory name
    workload: str  # workload uuid
    size: str  # one of SIZES (what the workload is expected to be; the measured times decide the targets)
    kernels: int  # kernel launches per call, read from the example solution's run()
    why: str = ""  # where those launches come from

    @property
    def multi(self) -> bool:
        return self.kernels > 1


CASES: tuple[Case, ...] = (
    # launch-bound: decode batch 1, a few microseconds
    Case("rmsnorm_t1", "rmsnorm", "rmsnorm-llama31-8b-decode-t1", "launch-bound", 1),
    Case("silu_mul_t1", "silu_and_mul", "silu-and-mul-llama31-8b-decode-t1", "launch-bound", 1),
    Case("fused_add_rmsnorm_t1", "fused_add_rmsnorm", "fused-add-rmsnorm-llama31-8b-decode-t1", "launch-bound", 1),
    Case("rope_t1", "rope_neox", "rope-neox-llama31-8b-decode-t1", "launch-bound", 1),
    Case("attn_decode_b1_l1024", "attention_decode_gqa", "attention_decode_gqa-llama31-8b-decode-b1-l1024",
         "launch-bound", 2, "split-K: _decode_split over the KV chunks, then _decode_merge of the partial softmaxes"),
    # mid-size
    Case("gelu_mul_t64", "gelu_tanh_and_mul", "gelu-tanh-and-mul-gemma2-27b-decode-t64", "mid", 1),
    Case("gemm_m1_qproj", "gemm_bf16", "gemm_bf16-llama31-8b-decode-m1-qproj", "mid", 1),
    Case("rmsnorm_bwd_t512", "rmsnorm_backward", "rmsnorm-bwd-llama31-8b-train-t512", "mid", 2,
         "_rmsnorm_bwd_rows_kernel (grad_x and per-program weight partials), then _sum_partials_kernel"),
    Case("attn_decode_70b_b1_l8192", "attention_decode_gqa", "attention_decode_gqa-llama31-70b-decode-b1-l8192",
         "mid", 2, "split-K: _decode_split, then _decode_merge"),
    # large: prefill and training sizes, 20 us or more
    Case("rmsnorm_t16384", "rmsnorm", "rmsnorm-llama31-8b-prefill-t16384", "large", 1),
    Case("silu_mul_t2048", "silu_and_mul", "silu-and-mul-qwen3-32b-prefill-t2048", "large", 1),
    Case("cross_entropy_t1024", "cross_entropy", "cross_entropy-llama31-8b-t1024", "large", 1),
    Case("attn_decode_b16_l4096", "attention_decode_gqa", "attention_decode_gqa-llama31-8b-decode-b16-l4096",
         "large", 2, "split-K: _decode_split, then _decode_merge"),
    Case("mamba2_l2048", "mamba2_chunk_scan", "mamba2_chunk_scan-mamba2-2.7b-prefill-l2048", "large", 3,
         "_chunk_state (per-chunk states), _state_pass (scan across chunks), _chunk_out (outputs)"),
    Case("gemm_m4096_qproj", "gemm_bf16", "gemm_bf16-llama31-8b-prefill-m4096-qproj", "large", 1),
)


def select(spec: str | None, cases: tuple[Case, ...] = CASES) -> list[Case]:
    """The cases a ``--cases`` value names, in the suite's order: comma-separated case names, 1-based indices,
    a size class (launch-bound, mid, large), ``multi`` (every multi-kernel case) or ``all``. ValueError on a
    token that names nothing."""
    if spec is None or not spec.strip() or spec.strip() == "all":
        return list(cases)
    chosen: set[str] = set()
    for raw in spec.split(","):
        tok = raw.strip()
        if not tok:
            continue
        if tok == "all":
            chosen.update(c.name for c in cases)
        elif tok == "multi":
            chosen.update(c.name for c in cases if c.multi)
        elif tok in SIZES:
            chosen.update(c.name for c in cases if c.size == tok)
        elif tok.isdigit() and 1 <= int(tok) <= len(cases):
            chosen.add(cases[int(tok) - 1].name)
        elif any(c.name == tok for c in cases):
            chosen.add(tok)
        else:
            raise ValueError(f"--cases: {tok!r} names no case; known: {', '.join(c.name for c in cases)}, "
                             f"1-{len(cases)}, {', '.join(SIZES)}, multi, all")
    return [c for c in cases if c.name in chosen]


def solution_path(problem) -> Path:
    """The problem's example Triton solution (``solutions/triton.py``), else its first example."""
    for p in problem.example_solutions:
        if p.name == "triton.py":
            return p
    if not problem.example_solutions:
        raise FileNotFoundError(f"{problem.name} has no example solution")
    return problem.example_solutions[0]


def resolve(case: Case, device: str = "cuda"):
    """(problem, workload, solution path) of a case; raises on anything that does not exist."""
    from solbench.problems.problem import load_problem

    problem = load_problem(case.problem)
    workload = problem.workload(case.workload)
    if device != "cpu" and not workload.runs_on(device):
        raise ValueError(f"{case.name}: workload {case.workload} does not run on the GPU")
    return problem, workload, solution_path(problem)


def describe(case: Case) -> str:
    """One --list line (resolved without a GPU: the problem loads, the workload and solution exist)."""
    try:
        _, workload, path = resolve(case)
        where = f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}"
        label = workload.label or ""
    except Exception as exc:  # reported, not raised: --list shows every case
        where, label = f"UNRESOLVED: {type(exc).__name__}: {exc}", ""
    kern = f"{case.kernels} kernels" if case.multi else "1 kernel"
    line = f"{case.name:26s} {case.size:12s} {kern:10s} {case.problem}/{case.workload}  [{label}]  {where}"
    return line + (f"\n{'':26s} multi-kernel: {case.why}" if case.why else "")


def _reference_module(problem):
    from solbench.problems.modules import module_from_source

    return module_from_source(problem.reference_source, f"solbench_ncu_ref_{problem.name}",
                              problem.directory / "reference.py")


def load_entry(path: Path, module_name: str, function: str = "run") -> Callable[..., Any]:
    """The solution's entry function, its file imported as a module (Triton's jit needs the source on disk)."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    fn = getattr(module, function, None)
    if not callable(fn):
        raise AttributeError(f"{path} defines no callable {function!r}")
    return fn


def build_call(case: Case, device: str = "cuda", seed: int = 20261201) -> tuple[Callable[[], Any], list[Any]]:
    """A no-argument callable running the case's example solution once on inputs made as the evaluator makes them
    (``make_inputs`` with the problem's workload, its directory and custom-input entry, and a seed), and the
    inputs (kept alive by the caller)."""
    from solbench.problems.inputs import make_inputs
    from solbench.problems.solution import load_solution

    problem, workload, path = resolve(case)
    d = problem.definition
    custom = getattr(_reference_module(problem), d.custom_inputs_entrypoint) if d.custom_inputs_entrypoint else None
    inputs = make_inputs(d, workload, seed, device, problem.directory, custom)
    solution = load_solution(path, problem.name)
    if solution.spec.destination_passing_style:
        raise ValueError(f"{case.name}: destination-passing solutions are not supported here")
    entry = load_entry(path.parent / solution.spec.entry_file, f"solbench_ncu_sol_{case.name}",
                       solution.spec.entry_function)
    return (lambda: entry(*inputs)), inputs
