"""The language proof's bookkeeping: which kernels are the solution's (read from its sources on the trusted
side), whose the others are, and the verdict on their shares of device time."""

import sys

import pytest

from solbench.evaluate.integrity import kernel_origin as ko
from solbench.evaluate.integrity.language import MAX_KERNELS, REST, by_name
from solbench.evaluate.languages import get_language
from tests.paths import AXPY

TRITON_SRC = """
import triton
import triton.language as tl
from triton import jit

@triton.jit
def _rmsnorm_fwd(x):
    pass

@triton.autotune(configs=[], key=[])
@triton.jit
def _helper(x):
    pass

def _plain(x):
    pass

_wrapped = jit(_plain)

def run(x):
    def not_a_kernel():
        pass
"""


def test_triton_kernel_names_are_read_from_the_sources():
    """On the trusted side, from the sources as submitted: decorated and wrapped functions, nothing else."""
    names = get_language("triton").kernel_names({"kernel.py": TRITON_SRC, "notes.txt": "@triton.jit\ndef x(): pass"})
    assert names == {"_rmsnorm_fwd", "_helper", "_plain"}


def test_cuda_and_dsl_kernel_names_and_matching():
    cu = "__global__ void axpy_kernel(const float* x) {}\ntemplate <int N> __global__ void tiled(float* y) {}"
    cuda = get_language("cuda_cpp")
    names = cuda.kernel_names({"kernel.cu": cu, "main.cpp": "void run();"})
    assert names == {"axpy_kernel", "tiled"}
    assert cuda.owns("void tiled<128>(float*)", names) and not cuda.owns("tiled2(float*)", names)
    assert cuda.owns("void (anonymous namespace)::tiled<uint4>(long const*)", names)  # seen on the H200
    assert cuda.owns("void ns::(anonymous namespace)::axpy_kernel(float*)", names)
    cute = get_language("cute_dsl")
    src = "import cutlass.cute as cute\n@cute.kernel\ndef add_k(a):\n    pass\n@cute.jit\ndef launch(a):\n    pass\n"
    assert cute.kernel_names({"main.py": src}) == {"add_k"}
    assert get_language("cublas").own_origins == {"cublas"} and not get_language("cuda_cpp").own_origins
    # TileLang and TVM TIRx name the kernel of prim_func f f_kernel (extern "C": no mangling), f_kernel_1 next
    for lang in ("tilelang", "tvm_tirx"):
        plug = get_language(lang)
        names = plug.kernel_names({"main.py": "@T.prim_func\ndef axpy(x):\n    pass\ndef helper():\n    pass\n"})
        assert names == {"axpy"}
        assert plug.owns("axpy_kernel", names) and plug.owns("axpy_kernel_1", names)
        assert not plug.owns("axpy_kernel_helper", names) and not plug.owns("my_axpy_kernel", names)
        assert not plug.owns("void at::native::axpy_kernel<float>(float*)", names)


@pytest.mark.parametrize("name, origin", [
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >(int)", ko.TORCH),
    ("nvjet_tst_128x256_64x4_2x1_v_bz_coopA_NNN", ko.CUBLAS),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1", ko.CUBLAS),
    ("void gemv2T_kernel_val<int, int, float, 128, cublasGemvParamsEx<int, float> >(float)", ko.CUBLAS),
    ("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc", ko.CUDNN),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3", ko.CUDNN),
    ("triton_poi_fused_add_mul_0", ko.INDUCTOR),
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64> >(Flash_fwd_params)", ko.TORCH),
    ("Memcpy DtoD (Device -> Device)", ko.COPY),
    ("void rms_kernel<c10::BFloat16>(c10::BFloat16 const*, float)", ko.OWN),  # c10 types in its parameters
    ("some_kernel_of_a_library", ko.OTHER),
])
def test_kernel_origin_by_name(name, origin):
    own = lambda k: get_language("cuda_cpp").owns(k, {"rms_kernel"})  # noqa: E731
    assert ko.origin(name, own) == origin


def test_a_kernel_named_like_a_librarys_counts_for_the_library():
    """A solution that defines an unused kernel named like ATen's or cuBLAS's cannot claim their work."""
    names = {"vectorized_elementwise_kernel", "nvjet_tst_128x256_64x4_2x1_v_bz_coopA_NNN"}
    own = lambda k: get_language("cuda_cpp").owns(k, names)  # noqa: E731
    assert ko.origin("void at::native::vectorized_elementwise_kernel<4>(int)", own) == ko.TORCH
    assert ko.origin("nvjet_tst_128x256_64x4_2x1_v_bz_coopA_NNN", own) == ko.CUBLAS
    # a cuBLAS solution's cuBLAS kernels are its own
    assert ko.origin("nvjet_tst_128x256_64x4_2x1_v_bz_coopA_NNN", own, frozenset({ko.CUBLAS})) == ko.OWN


def test_account_sums_device_time_by_origin():
    own = lambda k: k.startswith("_rms")  # noqa: E731
    acc = ko.account([("_rms_fwd", 30.0), ("void at::native::reduce_kernel<4>(int)", 10.0), ("_rms_fwd", 20.0),
                      ("nvjet_x", 40.0), ("bad", float("nan")), (3, 1.0)], own)
    assert acc.us == {ko.OWN: 50.0, ko.TORCH: 10.0, ko.CUBLAS: 40.0}
    assert acc.share(ko.OWN) == 0.5 and acc.foreign() == {ko.CUBLAS: 0.4}
    assert "cublas 40% (nvjet_x)" in acc.describe([ko.CUBLAS, ko.TORCH])
    assert ko.account([], own).share(ko.OWN) is None


def test_the_candidate_reports_every_kernel_by_name():
    kernels = [(f"k{i}", float(i + 1)) for i in range(MAX_KERNELS + 10)] + [("k0", 1000.0)]
    out = by_name(kernels)
    assert len(out) == MAX_KERNELS + 1 and out[-1][0] == REST
    assert sum(us for _, us in out) == pytest.approx(sum(us for _, us in kernels))
    assert out[0] == ["k0", 1001.0]  # summed by name, longest first


def _proof(kernels, language, single=False, names=("_rms_fwd",)):
    from solbench.evaluate.verdict.proof import language_proof

    lang = get_language(language)
    warnings: list[str] = []
    acc = ko.account(kernels, lambda k: lang.owns(k, set(names)), lang.own_origins)
    return language_proof(acc, lang, single, warnings), warnings


def test_proof_verdicts():
    torch_k = "void at::native::reduce_kernel<4>(int)"
    assert _proof([("_rms_fwd", 90.0), (torch_k, 10.0)], "triton") == (None, [])
    hack, _ = _proof([(torch_k, 100.0)], "triton")
    assert hack[0] == "no_dsl_kernel" and "torch 100%" in hack[1]
    hack, _ = _proof([("_rms_fwd", 10.0), (torch_k, 90.0)], "triton")
    assert hack[0] == "dsl_share_low"
    # a library beside the solution's own kernels: a warning; under the one-language rule a reward hack
    assert _proof([("_rms_fwd", 60.0), ("nvjet_a", 40.0)], "triton") == (None, ["vendor_kernel"])
    hack, _ = _proof([("_rms_fwd", 60.0), ("nvjet_a", 40.0)], "triton", single=True)
    assert hack[0] == "foreign_kernel" and "cublas 40%" in hack[1]
    # the one-language rule asks a larger share of the solution's own kernels; PyTorch glue is not foreign
    assert _proof([("_rms_fwd", 60.0), (torch_k, 40.0)], "triton", single=True)[0][0] == "dsl_share_low"
    assert _proof([("_rms_fwd", 90.0), (torch_k, 10.0)], "triton", single=True) == (None, [])
    # a language whose proof has not been shown on a GPU: a warning only
    assert _proof([(torch_k, 100.0)], "cutile", names=("main",)) == (None, ["dsl_share_low"])
    # a cuBLAS solution: cuBLAS's kernels are its own
    assert _proof([("nvjet_a", 100.0)], "cublas", single=True, names=()) == (None, [])


def test_profiler_runs_on_one_workload_chosen_by_the_seed():
    from types import SimpleNamespace

    from solbench.evaluate.trusted.worker import Context

    def _profiled(job, uuid):
        return Context.profiled(SimpleNamespace(job=job), uuid)

    pairs = [[0, f"w{i}"] for i in range(6)]
    picked = {seed: [u for _, u in pairs if _profiled({"pairs": pairs, "seed": seed}, u)] for seed in range(40)}
    assert all(len(p) == 1 for p in picked.values())  # default "one": the profiler starts once per solution
    assert len({p[0] for p in picked.values()}) > 1  # which one follows the secret seed, not the file's order
    job = {"pairs": pairs, "seed": 7}
    assert all(_profiled(dict(job, profile_dsl="all"), u)
               and not _profiled(dict(job, profile_dsl="off"), u) for _, u in pairs)


def test_profiler_session_records_without_importing_dynamo():
    """The profiled call's session must not pull Inductor and Dynamo into a fresh candidate (torch.profiler's
    wrapper does, at a cost of seconds per candidate on the H200 machine). Run in a fresh interpreter."""
    import subprocess

    code = (
        "import sys, torch\n"
        "from solbench.evaluate.integrity.language import profiler_session\n"
        "with profiler_session('cpu') as prof:\n"
        "    torch.ones(8) + 1\n"
        "names = [e.name for e in prof.function_events]\n"
        "assert any('add' in n for n in names), names\n"
        "assert 'torch._dynamo' not in sys.modules and 'torch._inductor' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_profiler_started_or_stopped_by_the_solution_is_tampering():
    """A solution that keeps a profiler of its own running (the harness's session would then fail to start), or
    stops the harness's during its call (no evidence), is caught; one that stops it and starts its own yields no
    kernels (the trusted side then warns that the proof was unavailable); an honest call is profiled, also after
    a caught stop. A fresh interpreter per case: profiler state is per process (and the candidate's process ends
    with os._exit, as here)."""
    import subprocess

    head = (
        "import os, sys, torch\n"
        "from solbench.evaluate.integrity.language import ProfilerTampered, profile_kernels, profiler_session\n"
        "def caught(call):\n"
        "    try:\n"
        "        profile_kernels(call, 'cpu')\n"
        "    except ProfilerTampered:\n"
        "        return True\n"
        "    return False\n"
    )
    cases = {
        "honest": "ok = not caught(lambda: torch.ones(4) + 1)\n"
                  "ok = ok and any('add' in n for n, _ in profile_kernels(lambda: torch.ones(4) + 1, 'cpu'))\n",
        # stopped and started anew inside the call: the new session's events are not evidence
        "restarted": "def swap():\n"
                     "    torch._C._autograd._disable_profiler()\n"
                     "    profiler_session('cpu').__enter__()\n"
                     "    torch.ones(4) + 1\n"
                     "ok = profile_kernels(swap, 'cpu') == []\n",
        "stopped": "ok = caught(lambda: torch._C._autograd._disable_profiler())\n"
                   "ok = ok and not caught(lambda: torch.ones(4) + 1)\n",
        "own profiler": "profiler_session('cpu').__enter__()\nok = caught(lambda: torch.ones(4) + 1)\n",
    }
    for name, body in cases.items():
        code = head + body + "sys.stdout.write('ok' if ok else 'missed'); sys.stdout.flush(); os._exit(0)\n"
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and done.stdout == "ok", (name, done.stdout, done.stderr[-2000:])


def test_the_built_objects_libraries_and_imports_are_read(tmp_path):
    """The ELF reader on a shared object built here: the libraries it needs and the symbols it imports."""
    import shutil
    import subprocess

    from solbench.evaluate.integrity import linked

    if shutil.which("g++") is None:
        pytest.skip("no C++ compiler")
    src = tmp_path / "k.cpp"
    src.write_text('extern "C" int cublasSaxpy_v2(void*, int, const float*, const float*, int, float*, int);\n'
                   'namespace at { namespace _ops { struct mm { static int call(int, int); }; } }\n'
                   'extern "C" int f(int n) { return cublasSaxpy_v2(0, n, 0, 0, 1, 0, 1) + at::_ops::mm::call(n, n); }\n')
    so = tmp_path / "build" / "k.so"
    so.parent.mkdir()
    subprocess.run(["g++", "-shared", "-fPIC", "-o", str(so), str(src), "-lm", "-Wl,--no-as-needed", "-lm"],
                   check=True, capture_output=True)
    needed, undefined = linked.read_dynamic(so)
    assert any(n.startswith("libm.so") for n in needed)
    assert "cublasSaxpy_v2" in undefined and any(u.startswith("_ZN2at4_ops2mm4call") for u in undefined)
    used = linked.object_use(so.parent)
    assert set(used) == {"cublas", "pytorch"} and "at::mm" in used["pytorch"]
    assert linked.read_dynamic(src) == ([], [])  # not an ELF object
    (tmp_path / "build" / "trunc.so").write_bytes(so.read_bytes()[:200])
    assert linked.read_dynamic(tmp_path / "build" / "trunc.so") == ([], [])


def test_vendor_use_becomes_a_verdict_only_under_the_one_language_rule():
    from solbench.evaluate.integrity import linked
    from solbench.records.verdict import WorkloadResult

    def results():
        return [WorkloadResult(uuid="w", verdict="passed", sol_score=0.8)]

    found = {"cublas": "k.so links libcublas.so.12"}
    loose, strict, own = results(), results(), results()
    linked.apply(loose, found, "cuda_cpp", single=False)
    linked.apply(strict, found, "cuda_cpp", single=True)
    linked.apply(own, found, "cublas", single=True)
    assert loose[0].verdict == "passed" and loose[0].warnings == ["vendor_library"]
    assert strict[0].verdict == "reward_hack" and strict[0].reasons == ["foreign_library"]
    assert strict[0].sol_score == 0.0 and "libcublas" in strict[0].message
    assert own[0].verdict == "passed" and own[0].warnings == []


def test_the_one_language_rule_reaches_the_static_scan():
    """``EvalOptions.single_language`` (an agent attempt's default) refuses another language before anything
    runs; without it the same solution only carries a warning."""
    from solbench.evaluate.runner import EvalOptions, evaluate
    from solbench.problems.problem import load_problem
    from solbench.problems.solution import Solution

    axpy = load_problem(AXPY)
    src = "import torch._inductor\n\ndef run(x, y, alpha):\n    return y + alpha * x\n"
    sol = Solution.model_validate({"name": "mixed", "definition": "axpy_fixture",
                                   "spec": {"language": "triton", "entry_point": "main.py::run",
                                            "destination_passing_style": False},
                                   "sources": [{"path": "main.py", "content": src}]})
    strict = evaluate(axpy, sol, EvalOptions(device="cpu", baselines=(), workloads=["axpy-small"],
                                             single_language=True))
    assert strict.verdict == "reward_hack" and "static:foreign_language" in strict.reasons
    loose = evaluate(axpy, sol, EvalOptions(device="cpu", baselines=(), workloads=["axpy-small"],
                                            time_candidate=False))
    assert "static:other_language" in loose.warnings
