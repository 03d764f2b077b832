"""Every kernel language on the GPU: one example per language passes the same problem with a SOL score and the
language proof (its own kernels did the work); what the machine lacks is unsupported with the reason; and a
solution of one language posing as another is caught (the profiler's kernel names, the built object's imports,
the one-language rule's static scan).

The DSL packages travel to the GPU machine with ``scripts/carry-language.sh``; ``scripts/gpu-check.sh languages``
puts each installed one on the path. Each test prints one line that docs/LANGUAGES.md's status table quotes.
"""

from __future__ import annotations

import json

import pytest

from solbench.evaluate.languages import get_language
from solbench.evaluate.runner import EvalOptions, evaluate
from solbench.evaluate.verdict.proof import MIN_DSL_SHARE
from solbench.problems.problem import load_problem
from solbench.problems.solution import Solution, load_solution
from tests.paths import AXPY, TESTS

pytestmark = [pytest.mark.gpu, pytest.mark.languages]
FIXTURES = {lang: TESTS / "fixtures" / "sol_execbench" / f"axpy_{lang}.json" for lang in
            ("pytorch", "triton", "cute_dsl", "tilelang", "tvm_tirx", "cutile", "cudnn_frontend", "cutlass", "cublas",
             "cudnn")}
FIXTURES["cuda_cpp"] = TESTS / "fixtures" / "cuda_cpp" / "axpy_cuda.json"
WORKLOADS = ["axpy-small", "axpy-gpu"]


def _cpp_solutions() -> list[Solution]:
    """Every compiled solution this module evaluates (defined below)."""
    return ([load_solution(FIXTURES[lang]) for lang in ("cuda_cpp", "cutlass", "cublas", "cudnn")]
            + [_cpp("cpp_posing_torch", TORCH_BODY), _cpp("cpp_posing_cublas", CUBLAS_BODY, ["-lcublas"],
                                                         includes=CUBLAS_INCLUDES),
               _cpp("cublas_axpy", CUBLAS_BODY, ["-lcublas"], language="cublas", includes=CUBLAS_INCLUDES)])


@pytest.fixture(scope="module", autouse=True)
def built(tmp_path_factory):
    """Build the compiled solutions side by side first (one check-only evaluation each, in processes of their
    own): the tests' own evaluations then load them from the build cache."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from solbench.cli_run import evaluate_file

    folder = tmp_path_factory.mktemp("prebuild")
    paths = []
    for sol in _cpp_solutions():
        if get_language(sol.language).unavailable("cuda"):
            continue
        path = folder / f"{sol.name}_{sol.language}.json"
        path.write_text(sol.model_dump_json())
        paths.append(str(path))
    options = dict(device="cuda", baselines=(), workloads=["axpy-small"], draws=1, time_candidate=False)
    with ProcessPoolExecutor(max_workers=8, mp_context=multiprocessing.get_context("spawn")) as pool:
        done = list(pool.map(evaluate_file, [str(AXPY)] * len(paths), paths, [options] * len(paths)))
    print("\nprebuilt:", [(e.solution, e.language, e.verdict, (e.environment.get("build") or {}).get("compile_s"))
                          for e in done])


def _eval(solution: Solution, **kw):
    problem = load_problem(AXPY)
    opts = dict(device="cuda", baselines=("eager",), workloads=WORKLOADS, profile_dsl="all")
    opts.update(kw)
    return evaluate(problem, solution, EvalOptions(**opts))


def _line(tag: str, ev) -> str:
    w = ev.workloads[-1] if ev.workloads else None
    return (f"LANGUAGE {tag}: {ev.verdict} {','.join(ev.reasons)} share={[x.dsl_share for x in ev.workloads]} "
            f"sol={w.sol_score if w else None} time_ms={w.time_ms if w else None} "
            f"build={ev.environment.get('build')} warnings={ev.warnings} message={(ev.message or '')[:200]}")


@pytest.mark.parametrize("language", sorted(FIXTURES))
def test_each_languages_example_passes_the_same_problem(language):
    problem = load_problem(AXPY)
    solution = load_solution(FIXTURES[language], problem.definition)
    ev = _eval(solution)
    print("\n" + _line(language, ev))
    why = get_language(language).unavailable("cuda")
    if why is not None:  # a package or toolchain this machine lacks: said so, nothing ran
        assert ev.verdict == "unsupported" and all(w.reasons == ["language_unavailable"] for w in ev.workloads)
        assert ev.message == why
        return
    assert ev.verdict == "passed", (ev.message, [(w.uuid, w.verdict, w.message) for w in ev.workloads],
                                    (ev.log or "")[-3000:])
    assert all(w.sol_score is not None and w.sol_score > 0 for w in ev.workloads)
    if language != "pytorch":
        # the profiler saw the solution's own kernels (or its library's) do the work on every workload
        assert all(w.dsl_share is not None and w.dsl_share >= MIN_DSL_SHARE for w in ev.workloads), ev.workloads
        proven = get_language(language).proof
        assert ("language_unproven" in ev.warnings) is (not proven)


#: a kernel of the solution's own that is never launched: the posing solutions below do their work elsewhere
DECOY_CU = "__global__ void decoy_kernel(float* p) { if (p) p[0] = p[0]; }\n"


def _cpp(name: str, main_body: str, ld_flags: list[str] | None = None, language: str = "cuda_cpp",
         includes: str = "") -> Solution:
    """A C++ solution whose ``run`` (in main.cpp, built by the host compiler) is ``main_body``; kernel.cu holds
    only CUDA (a quick nvcc build)."""
    main = ("#include <torch/extension.h>\n" + includes +
            "void run(torch::Tensor x, torch::Tensor y, double alpha, torch::Tensor out) {\n" + main_body + "}\n"
            "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"run\", &run); }\n")
    return Solution.model_validate({
        "name": name, "definition": "axpy_fixture", "author": "posing",
        "spec": {"languages": [language], "target_hardware": ["LOCAL"], "entry_point": "main.cpp::run",
                 "destination_passing_style": True, "binding": "torch",
                 "compile_options": {"cuda_cflags": ["-O3"], "ld_flags": ld_flags or []}},
        "sources": [{"path": "main.cpp", "content": main}, {"path": "kernel.cu", "content": DECOY_CU}]})


TORCH_BODY = "  out.copy_(at::add(y, x, alpha));\n"


def test_cuda_cpp_that_computes_with_torch_is_caught():
    """A CUDA C++ label whose work is ATen's: the profiled call shows no kernel of the solution's."""
    ev = _eval(_cpp("cpp_posing_torch", TORCH_BODY))
    print("\n" + _line("cuda_cpp posing as torch", ev))
    # the symbol allowlist refuses ATen's compute at the build; the profiler's kernel names catch what passes it
    assert ev.verdict == "reward_hack" and set(ev.reasons) & {"native_symbol", "no_dsl_kernel"}, \
        (ev.reasons, ev.message, ev.log[-2000:])


CUBLAS_BODY = ("  out.copy_(y);\n  float a = static_cast<float>(alpha);\n"
               "  cublasHandle_t h = at::cuda::getCurrentCUDABlasHandle();\n"
               "  cublasSaxpy(h, static_cast<int>(x.numel()), &a, x.data_ptr<float>(), 1, out.data_ptr<float>(), 1);\n")
CUBLAS_INCLUDES = "#include <ATen/cuda/CUDAContext.h>\n#include <cublas_v2.h>\n"


def test_cuda_cpp_that_calls_cublas_is_caught():
    """A CUDA C++ label whose work is cuBLAS's: its kernel names say cuBLAS, and the built object links it."""
    ev = _eval(_cpp("cpp_posing_cublas", CUBLAS_BODY, ["-lcublas"], includes=CUBLAS_INCLUDES))
    print("\n" + _line("cuda_cpp posing as cublas", ev), ev.environment.get("linked"))
    # the symbol allowlist refuses another vendor's library at the build (nothing runs, so nothing is linked);
    # the profiler's kernel names and the linked libraries catch what passes it
    assert ev.verdict == "reward_hack" and set(ev.reasons) & {"native_symbol", "no_dsl_kernel"}, \
        (ev.reasons, ev.message, ev.log[-2000:])
    assert "cublas" in " ".join(w.message or "" for w in ev.workloads)
    if "native_symbol" not in ev.reasons:
        assert "cublas" in ev.environment.get("linked", {})
    # the same sources as a cuBLAS solution are that language's own work
    honest = _eval(_cpp("cublas_axpy", CUBLAS_BODY, ["-lcublas"], language="cublas", includes=CUBLAS_INCLUDES))
    print("\n" + _line("cublas", honest))
    assert honest.verdict == "passed", (honest.message, honest.log[-2000:])
    # and under the one-language rule the CUDA C++ label is refused before anything runs
    strict = _eval(_cpp("cpp_posing_cublas", CUBLAS_BODY, ["-lcublas"], includes=CUBLAS_INCLUDES),
                   single_language=True)
    assert strict.verdict == "reward_hack" and "static:foreign_language" in strict.reasons


def test_triton_label_whose_work_is_torch_compiles_is_caught():
    """Inductor's generated Triton kernels are not the solution's own Triton kernels."""
    src = ("import torch\nimport triton\nimport triton.language as tl\n\n@triton.jit\ndef _decoy(p):\n    pass\n\n"
           "_f = torch.compile(lambda x, y, a: y + a * x)\n\ndef run(x, y, alpha):\n    return _f(x, y, alpha)\n")
    sol = Solution.model_validate({"name": "triton_posing_inductor", "definition": "axpy_fixture",
                                   "spec": {"language": "triton", "entry_point": "main.py::run",
                                            "destination_passing_style": False},
                                   "sources": [{"path": "main.py", "content": src}]})
    ev = _eval(sol, static_checks=False)  # the runtime layers (the static scan refuses torch.compile itself)
    print("\n" + _line("triton posing as torch.compile", ev))
    assert ev.verdict == "reward_hack" and ev.reasons, (ev.message, ev.log[-2000:])


def test_cute_dsl_label_whose_work_is_triton_is_caught():
    """A CuTe DSL label with a decoy @cute.kernel whose work is a Triton kernel."""
    if get_language("cute_dsl").unavailable("cuda"):
        pytest.skip("CuTe DSL is not installed here (scripts/carry-language.sh)")
    src = ("import triton\nimport triton.language as tl\nimport cutlass.cute as cute\n\n"
           "@cute.kernel\ndef _axpy(a: cute.Tensor):\n    pass\n\n"
           "@triton.jit\ndef _axpy_work(x, y, o, alpha, n, B: tl.constexpr):\n"
           "    i = tl.program_id(0) * B + tl.arange(0, B)\n    m = i < n\n"
           "    tl.store(o + i, tl.load(y + i, mask=m) + alpha * tl.load(x + i, mask=m), mask=m)\n\n"
           "def run(x, y, alpha, out):\n    n = x.numel()\n"
           "    _axpy_work[(triton.cdiv(n, 1024),)](x, y, out, alpha, n, B=1024)\n")
    spec = json.loads(FIXTURES["cute_dsl"].read_text())["spec"]
    sol = Solution.model_validate({"name": "cute_posing_triton", "definition": "axpy_fixture", "spec": spec,
                                   "sources": [{"path": "main.py", "content": src}]})
    ev = _eval(sol)
    print("\n" + _line("cute_dsl posing as triton", ev))
    if get_language("cute_dsl").proof:
        assert ev.verdict == "reward_hack" and "no_dsl_kernel" in ev.reasons, (ev.message, ev.log[-2000:])
    else:
        assert "dsl_share_low" in ev.warnings and all(w.dsl_share == 0.0 for w in ev.workloads)
    strict = _eval(sol, single_language=True)
    assert strict.verdict == "reward_hack" and "static:foreign_language" in strict.reasons
