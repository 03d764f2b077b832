"""The C++ scan's gates (identifiers or substrings a regex needs before it runs) change no finding: the gated
checks report exactly what their regexes find when run on every text."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from solbench.evaluate.integrity.static import Policy
from solbench.evaluate.integrity.static import cpp, foreign

#: fragments that do and do not trip the routes and the vendor-library uses, near misses included
FRAGMENTS = [
    "open(", "fopen(", "x.open(", "std::open (", "openat (", "mmap64(", "readlink(", "opener(", "reopen(",
    "py::exec(", "pybind11 :: eval_file", "py::evaluate", "mypy::exec", "#pragma omp parallel", "omp_get_thread_num(",
    "GOMP_parallel", "__kmpc_fork_call", "zomp_x(", "#include <cublas_v2.h>", "cublasSgemm(", "cublasLtMatmul (",
    "#include \"cudnn.h\"", "cudnnCreate(", "#include <cute/tensor.hpp>", "#include <cutlass/gemm.h>",
    "#include <thrust/sort.h>", "#include <cub/device/device_scan.cuh>", "at::matmul(", "torch::softmax (",
    "at::native::mm(", "x.topk(", "y . bmm(", "attach(", "__global__ void k(float* y) { y[0] = 1.f; }",
    "// open(", "/* cublasSgemm( */", "\"py::exec\"", "'o'", "int n;", "\n", " ", "\t", "(", ")", "::", ".", "#",
]


def _ungated_routes(ctx: cpp.CppText) -> list[tuple[str, int]]:
    return sorted((name, m.start()) for rx, _, _, name, _ in cpp._ROUTES for m in rx.finditer(ctx.code))


def _ungated_uses(ctx: cpp.CppText) -> list[int]:
    with_includes = foreign._includes_kept(ctx)
    found = []
    for library, _, rx in foreign._CPP_USES:
        if library != "cuda_cpp":
            m = rx.search(ctx.code if library == "pytorch" else with_includes)
            if m:
                found.append(m.start())
    return sorted(found)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=12))
def test_the_gates_change_no_finding(parts):
    text = "".join(parts)
    ctx = cpp.CppText("k.cu", text, Policy(language="cuda_cpp"), 0)
    cpp.native_routes(ctx)
    routes = sorted((f.rule, f.line) for f in ctx.findings)
    assert routes == sorted((name, ctx.code.count("\n", 0, pos) + 1) for name, pos in _ungated_routes(ctx))
    ctx.findings.clear()
    foreign.foreign_cpp(ctx)
    assert sorted(f.line for f in ctx.findings) == sorted(ctx.code.count("\n", 0, p) + 1 for p in _ungated_uses(ctx))
