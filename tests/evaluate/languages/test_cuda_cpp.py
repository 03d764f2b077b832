"""The cuda_cpp and cutlass plug-ins and the native build: built on the trusted side before the candidate starts,
checked, hashed, cached, verified on every use.

One real C++ library is built per session (``built``, with solbench's binding: about 30-45 s on 2 cores); the
rest reuses them or needs no compiler. The .cu fixture only runs on a GPU; here it must be ``unsupported``.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from pathlib import Path

import pytest

from solbench.evaluate import build_cache
from solbench.evaluate.native.carry import Carry
from tests.paths import AXPY, FIXTURES

CPP = FIXTURES / "cuda_cpp"


def _problem():
    from solbench.problems.problem import load_problem

    return load_problem(AXPY)


def _solution(name: str):
    from solbench.problems.solution import load_solution

    return load_solution(CPP / f"{name}.json", _problem().definition)


def _with(name: str, spec: dict | None = None, **sources: str):
    """The fixture ``name`` with some of its sources replaced (or added) and its spec updated."""
    from solbench.problems.solution import Solution

    data = _solution(name).model_dump()
    files = {s["path"]: s["content"] for s in data["sources"]} | sources
    data["sources"] = [{"path": p, "content": c} for p, c in files.items()]
    data["spec"].update(spec or {})
    return Solution.model_validate(data)


def _evaluate(sol, **opts):
    from solbench.evaluate.runner import EvalOptions, evaluate

    if isinstance(sol, str):
        sol = _solution(sol)
    return evaluate(_problem(), sol, EvalOptions(device="cpu", baselines=(), time_candidate=False, **opts))


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A cache root of this module's own (SOLBENCH_CACHE), so every run starts cold."""
    root = tmp_path_factory.mktemp("solbench-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SOLBENCH_CACHE", str(root))
        yield root


@pytest.fixture(scope="module")
def built(cache):
    """The C++ solution evaluated once, cold: built and checked on the trusted side, then published."""
    t0 = time.perf_counter()
    ev = _evaluate("axpy_cpp")
    return ev, time.perf_counter() - t0


# ---- the key and the cache, no compiler -------------------------------------------------------------------
def test_the_key_changes_with_every_input():
    base = dict(sources=[("main.cpp", "int x;"), ("kernel.h", "")], flags={"cflags": ["-O3"]},
                toolchain={"cxx": "g++ 12"}, torch_version="2.13", packages={}, arch="sm_90a")
    k = build_cache.key(**base)
    assert k == build_cache.key(**dict(base, sources=list(reversed(base["sources"]))))  # order-free
    variants = [dict(sources=[("main.cpp", "int y;"), ("kernel.h", "")]),
                dict(sources=[("main2.cpp", "int x;"), ("kernel.h", "")]),
                dict(sources=[("main.cpp", "int x"), (";kernel.h", "")]),  # the boundary between parts counts
                dict(flags={"cflags": ["-O2"]}), dict(toolchain={"cxx": "g++ 13"}), dict(torch_version="2.14"),
                dict(packages={"nvidia-cutlass": "4.2"}), dict(arch="sm_100a")]
    keys = {build_cache.key(**dict(base, **v)) for v in variants}
    assert len(keys) == len(variants) and k not in keys


def test_the_plan_follows_the_compile_options_from_the_allowlist():
    from solbench.evaluate.languages.cuda_cpp import CudaCpp

    lang = CudaCpp()
    sources = [("main.cpp", "int x;"), ("kernel.cu", "")]
    a = lang.plan(sources, {"cflags": ["-O3"]}, [], "cpu")
    b = lang.plan(sources, {"cflags": ["-O2"]}, [], "cpu")
    c = lang.plan(sources, {"cflags": "-O2"}, [], "cpu")  # a string is split like a shell would
    assert a["key"] != b["key"] and b["key"] == c["key"]
    assert a["name"] == f"sb_{a['key'][:16]}" and a["cflags"][-1] == "-O3"
    assert a["sources"] == ["kernel.cu", "main.cpp"] and a["cuda_as_cpp"]  # on the CPU a .cu is C++
    assert a["arch"] == "cpu" and not a["with_cuda"] and a["cuda_cflags"] == []
    for bad in ({"cflags": {"x": 1}}, {"cflags": ["-fplugin=/tmp/p.so"]}, {"cflags": ["-B/tmp"]},
                {"cflags": ["-Wl,--wrap=malloc"]}, {"cflags": ["-include", "/etc/passwd"]}, {"cflags": ["@flags"]},
                {"cuda_cflags": ["-ccbin", "/tmp/cc"]}, {"cuda_cflags": ["-Xcompiler", "-fplugin=x"]},
                {"ld_flags": ["-lpython3.11"]}, {"ld_flags": ["-Wl,-rpath,/tmp"]}):
        with pytest.raises(ValueError):
            lang.plan(sources, bad, [], "cpu")
    ok = lang.plan(sources, {"cflags": ["-O2", "-march=native", "-DN=4", "-fopenmp", "-Wall"],
                             "cuda_cflags": ["--use_fast_math", "-Xptxas", "-v", "-maxrregcount=64"],
                             "ld_flags": ["-lcublas"]}, [], "cpu")
    assert "-fopenmp" in ok["cflags"]  # what the object then calls is the imports' question


def test_arch_flags_for_the_present_device(monkeypatch):
    import torch

    from solbench.evaluate.languages import cuda_cpp

    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    assert cuda_cpp.target_arch("cuda:0") == "sm_90a"
    assert cuda_cpp.arch_flags("sm_90a") == ["-gencode=arch=compute_90a,code=sm_90a"]
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    assert cuda_cpp.target_arch("cuda") == "sm_80"
    assert cuda_cpp.arch_flags("cpu") == []


def test_publish_verifies_on_every_load_and_keeps_the_first(tmp_path):
    root = tmp_path / "cache"
    assert build_cache.publish("k1", {"a.so": b"library"}, {"compile_s": 1.5}, root) == root / "k1"
    meta, files = build_cache.load("k1", root)
    assert files == {"a.so": b"library"} and meta["compile_s"] == 1.5 and meta["key"] == "k1"
    assert meta["files"]["a.so"]["sha256"] == build_cache.hashlib.sha256(b"library").hexdigest()
    assert build_cache.publish("k1", {"a.so": b"another"}, {}, root) == root / "k1"  # the first stays
    assert build_cache.load("k1", root)[1] == {"a.so": b"library"}
    assert not [p for p in root.iterdir() if p.name.startswith(".tmp-")]
    # a changed artefact is never loaded: the entry goes, and the next evaluation builds it again
    (root / "k1" / "a.so").chmod(0o644)
    (root / "k1" / "a.so").write_bytes(b"librarx")
    assert build_cache.load("k1", root) is None and not (root / "k1").exists()
    # a link in its place is not followed
    build_cache.publish("k2", {"a.so": b"x"}, {}, root)
    (root / "k2" / "a.so").unlink()
    (root / "k2" / "a.so").symlink_to("/etc/hostname")
    assert build_cache.load("k2", root) is None


def test_the_cache_is_bounded_least_recently_used_first(tmp_path):
    root = tmp_path / "cache"
    for i, key in enumerate(("old", "mid", "new")):
        build_cache.publish(key, {"f.so": bytes(1000)}, {}, root)
        os.utime(root / key / build_cache.META, (1000 + i, 1000 + i))
    build_cache.load("old", root)  # used now: the most recent
    removed = build_cache.evict(root, 2 * build_cache.tree_bytes(root / "new") + 10)  # room for two
    assert removed == ["mid"] and build_cache.load("old", root) and build_cache.load("new", root)
    sparse = root / "sparse"
    sparse.mkdir()
    with open(sparse / "f.so", "wb") as f:
        f.truncate(480 << 20)  # 480 MiB apparent, nothing allocated: counted by its apparent size
    (sparse / build_cache.META).write_text("{}")
    os.utime(sparse / build_cache.META, (1, 1))
    assert build_cache.evict(root, 1 << 20) == ["sparse"] and not sparse.exists()


def _obtain_counted(root: str, count: str, barrier, results) -> None:
    from solbench.evaluate.native.build import Outcome

    def make(work: Path):
        with open(count, "a") as f:
            f.write(f"{os.getpid()}\n")
        time.sleep(1.0)  # long enough for the other process to be waiting
        return Outcome(files={"lib.so": b"artefact"}, compile_s=1.0)

    barrier.wait()
    outcome, files, cached = build_cache.obtain("racekey", make, {}, Path(root))
    results.put((files, cached))


def test_two_processes_building_the_same_key_build_once(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    count = tmp_path / "builds.txt"
    procs = [ctx.Process(target=_obtain_counted, args=(str(tmp_path / "cache"), str(count), barrier, results))
             for _ in range(2)]
    for p in procs:
        p.start()
    got = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert len(count.read_text().splitlines()) == 1  # built once
    assert all(g[0] == {"lib.so": b"artefact"} for g in got) and sorted(g[1] for g in got) == [False, True]


def test_a_rejected_build_is_remembered_and_nothing_is_published(tmp_path):
    from solbench.evaluate.native.build import Outcome

    calls = []

    def make(work):
        calls.append(work)
        return Outcome(verdict="reward_hack", reasons=["native_symbol"], message="imports dlopen")

    for _ in range(2):
        outcome, files, _cached = build_cache.obtain("bad", make, {}, tmp_path)
        assert files is None and outcome.verdict == "reward_hack" and outcome.message == "imports dlopen"
    assert len(calls) == 1 and build_cache.load("bad", tmp_path) is None


# ---- the plug-ins ------------------------------------------------------------------------------------------
def test_kernel_names_are_the_global_functions_of_the_sources():
    from solbench.evaluate.languages.cuda_cpp import CudaCpp, Cutlass
    from solbench.evaluate.languages.cuda_toolchain import kernel_matches, kernel_names

    sol = _solution("axpy_cuda")
    texts = {s.path: s.content for s in sol.sources}
    assert kernel_names(".", texts) == {"axpy_kernel"}
    more = {"k.cu": "// __global__ void commented() {}\ntemplate <int N> __global__ void __launch_bounds__(128) "
                    "tiled(float* o) {}\nextern \"C\" __global__ void plain(float* o) {}\n"
                    "static __global__ void declared(int n);\n__device__ void helper(int) {}\n"}
    assert kernel_names(".", more) == {"tiled", "plain", "declared"}
    names = {"axpy_kernel"}
    assert kernel_matches("axpy_kernel(float const*, float const*, float, float*, long)", names)
    assert kernel_matches("void ns::axpy_kernel<float>(float const*)", names)
    assert kernel_matches("_Z11axpy_kernelPKfS0_fPfl", names)
    assert not kernel_matches("void at::native::vectorized_elementwise_kernel<4>(int)", names)
    assert not kernel_matches("axpy_kernel2(float)", names)
    assert CudaCpp.name == "cuda_cpp" and Cutlass.name == "cutlass"


def test_cutlass_needs_its_headers(tmp_path, monkeypatch):
    from solbench.evaluate.languages import cuda_cpp

    monkeypatch.delenv("CUTLASS_PATH", raising=False)
    monkeypatch.setenv("SOLBENCH_EXTRA_PATH", "")
    if cuda_cpp.cutlass_dirs() is None:  # neither the package nor a checkout here
        why = cuda_cpp.Cutlass().unavailable("cuda")
        assert "pip install nvidia-cutlass" in why and "CUTLASS_PATH" in why
    checkout = tmp_path / "cutlass"
    (checkout / "include" / "cutlass").mkdir(parents=True)
    (checkout / "include" / "cute").mkdir()
    (checkout / "include" / "cutlass" / "cutlass.h").write_text("")
    (checkout / "tools" / "util" / "include").mkdir(parents=True)
    monkeypatch.setenv("CUTLASS_PATH", str(checkout))
    assert cuda_cpp.cutlass_dirs() == [str(checkout / "include"), str(checkout / "tools" / "util" / "include")]
    lang = cuda_cpp.Cutlass()
    assert lang.unavailable("cuda") is None or "CUTLASS" not in lang.unavailable("cuda")
    plan = lang.plan([("main.cpp", "int x;")], {}, [], "cpu")
    assert plan["include_paths"][0] == str(checkout / "include")
    assert plan["key"] != cuda_cpp.CudaCpp().plan([("main.cpp", "int x;")], {}, [], "cpu")["key"]


def test_cuda_kernels_on_the_cpu_are_unsupported_and_a_cu_without_one_is_not(cache):
    from solbench.evaluate.languages import get_language

    ev = _evaluate("axpy_cuda")
    assert ev.verdict == "unsupported" and ev.workloads
    assert all(w.verdict == "unsupported" and w.reasons == ["language_unavailable"] for w in ev.workloads)
    assert "need a CUDA device" in ev.workloads[0].message and "axpy_kernel" in ev.message
    lang = get_language("cuda_cpp")
    empty = _with("axpy_cpp", **{"kernel.cu": ""})
    assert lang.unsupported_reason(empty, "cpu") is None  # no kernel: built as C++, judged for real
    hidden = _with("axpy_cpp", **{"k.cuh": "template <int N> __global__ void k(float* p) {}\n", "kernel.cu": ""})
    assert "k" in lang.unsupported_reason(hidden, "cpu")
    assert "needs a CUDA device" in get_language("cublas").unsupported_reason(empty, "cpu")


def test_flags_off_the_list_are_a_compile_error_before_anything_builds(cache):
    ev = _evaluate(_with("axpy_cpp", spec={"compile_options": {"cflags": ["-fplugin=/tmp/evil.so"]}}))
    assert ev.verdict == "compile_error" and "-fplugin" in ev.message and ev.environment.get("build") is None


# ---- building on the trusted side (a compiler) --------------------------------------------------------------
@pytest.mark.slow
def test_a_cpp_extension_builds_and_passes_on_the_cpu(built):
    ev, elapsed = built
    assert ev.verdict == "passed", (ev.message, [(w.uuid, w.verdict, w.message) for w in ev.workloads], ev.log[-2000:])
    assert not [f for f in ev.findings if f.startswith("reject")]
    assert "language_unproven" in ev.warnings  # a C++ build on the CPU gives the proof no kernels to look at
    build = ev.environment["build"]
    assert build["cached"] is False and build["published"] is True and build["compile_s"] > 0
    assert "loaded the verified build" in ev.log and ev.phases["build"] > 0
    print(f"\ncold evaluation {elapsed:.1f} s, compile {build['compile_s']:.1f} s, build phase {ev.phases['build']:.1f} s")


@pytest.mark.slow
def test_a_second_evaluation_loads_the_verified_build(built, cache, monkeypatch):
    ev = _evaluate("axpy_cpp")
    assert ev.verdict == "passed"
    build = ev.environment["build"]
    assert build["cached"] is True and build["published"] is False and build["sha256"] == \
        built[0].environment["build"]["sha256"]
    assert ev.environment["candidate_ready_s"] < 1.0  # the candidate's process: start, sandbox, verify, load

    # the plug-in's own load, in this process, from the trusted side's copy: hashes checked, nothing built
    from solbench.evaluate.languages.base import CompileError
    from solbench.evaluate.languages.cuda_cpp import CudaCpp

    sol = _solution("axpy_cpp")
    private = cache / "private"
    carry = Carry(CudaCpp(), sol, "cpu", private, cache / "build")
    assert carry.report["cached"] and carry.failed is None
    plan = json.loads(carry.env["SOLBENCH_BUILD_PLAN"])
    copy = Path(plan["library"])
    assert copy.parent == private / "build" / carry.key and not copy.stat().st_mode & 0o222  # read-only
    staged = cache / "staged"
    staged.mkdir(exist_ok=True)
    (staged / "main.cpp").write_text("")
    monkeypatch.setenv("SOLBENCH_BUILD_PLAN", carry.env["SOLBENCH_BUILD_PLAN"])
    lang = CudaCpp()
    t0 = time.perf_counter()
    fn = lang.load(staged, "main.cpp", "run")
    load_s = time.perf_counter() - t0
    import torch

    x, y, out = torch.arange(5.0), torch.ones(5), torch.empty(5)
    fn(x, y, 2.0, out)
    assert out.tolist() == [1.0, 3.0, 5.0, 7.0, 9.0]
    with pytest.raises(RuntimeError, match="float32"):
        fn(x.double(), y, 2.0, out)
    with pytest.raises(TypeError, match="takes 4 arguments"):
        fn(x, y, 2.0)
    # a copy changed after the build (a leftover process, a planted file) is refused, never loaded
    copy.chmod(0o644)
    data = bytearray(copy.read_bytes())
    data[len(data) // 2] ^= 1
    copy.write_bytes(bytes(data))
    with pytest.raises(CompileError, match="does not match its hash"):
        CudaCpp().load(staged, "main.cpp", "run")
    monkeypatch.delenv("SOLBENCH_BUILD_PLAN")
    with pytest.raises(CompileError, match="no trusted build"):
        CudaCpp().load(staged, "main.cpp", "run")
    print(f"\ncached: candidate ready in {ev.environment['candidate_ready_s']:.3f} s, load {load_s * 1000:.1f} ms")


@pytest.mark.slow
def test_a_build_the_pool_made_ahead_is_the_one_an_evaluation_loads(built, cache):
    """``solbench run``'s build pool fills the same cache, under the same key, as the evaluation's own build; a
    language without builds gets none."""
    from solbench.evaluate.native.pool import BuildPool, solution_builds

    sol = _solution("axpy_cpp")
    python = _with("axpy_cpp", spec={"language": "pytorch"})
    assert python.language == "pytorch"
    builds = solution_builds([(_problem(), sol), (_problem(), python)], "cpu")
    assert builds[1] is None
    with BuildPool(builds, 1) as pool:
        report = pool.ready(0)
    assert report["cached"] and report["failed"] is None
    assert report["key"] == built[0].environment["build"]["key"]


@pytest.mark.slow
def test_leftovers_in_the_candidates_directory_never_reach_the_cache(built, cache):
    """Whatever a candidate leaves in its private directory (a huge sparse file, a planted library and meta.json
    under its build key) is never published: the next evaluation loads the trusted side's verified bytes."""
    from solbench.evaluate.languages.cuda_cpp import CudaCpp

    sol = _solution("axpy_cpp")
    private = cache / "private-leftovers"
    carry = Carry(CudaCpp(), sol, "cpu", private, cache / "build")
    where = private / "build" / carry.key
    with open(where / "filler.bin", "wb") as f:
        f.truncate(480 << 20)
    lib = Path(json.loads(carry.env["SOLBENCH_BUILD_PLAN"])["library"])
    lib.chmod(0o644)
    lib.write_bytes(b"\x7fELF planted")
    (where / "meta.json").write_text('{"compile_s": 0}')
    again = _evaluate("axpy_cpp")
    assert again.verdict == "passed" and again.environment["build"]["cached"]
    assert again.environment["build"]["sha256"] == built[0].environment["build"]["sha256"]
    assert not list((cache / "build").rglob("filler.bin"))


@pytest.mark.slow
def test_a_compile_error_is_a_verdict_with_the_compilers_message(cache):
    ev = _evaluate("axpy_cpp_broken")
    assert ev.verdict == "compile_error" and all(w.verdict == "compile_error" for w in ev.workloads)
    assert "main.cpp:7:" in ev.message and "error: cannot convert" in ev.message
    assert "-DTORCH_EXTENSION_NAME" not in ev.message and "solbench_prelude" not in ev.message
    assert ev.environment["build"]["published"] is False  # nothing is cached from a failed build


@pytest.mark.slow
def test_the_build_never_runs_the_solution_and_sees_what_a_candidate_sees(cache, tmp_path_factory):
    """A static initialiser that would abort is built and published (the build loads nothing); a source that
    includes a file of a hidden directory (the cache, the temporary directories) does not compile."""
    # main.cpp binds an entry point and includes nothing: the build is about the initialiser, not torch's headers
    light = 'void run() {}\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run); }\n'
    sol = _with("axpy_cpp", **{"init.cpp": "#include <cstdlib>\nstatic int boom = (std::abort(), 1);\n",
                               "main.cpp": light})
    ev = _evaluate(sol)
    assert ev.environment["build"]["published"] is True, ev.message
    assert ev.verdict in ("runtime_error", "compile_error") and "loaded the verified build" not in ev.log
    from solbench.evaluate.isolation.sandbox import namespaces_available

    if not namespaces_available():
        pytest.skip("no namespaces here: the build runs on rlimits alone")
    secret = Path(os.environ["SOLBENCH_CACHE"]) / "secret.h"
    secret.write_text("#error the build read the cache\n")
    peek = _with("axpy_cpp", **{"peek.cpp": f'#include "{secret}"\n', "main.cpp": light})
    ev = _evaluate(peek)
    assert ev.verdict == "compile_error" and "No such file" in ev.message, ev.message


@pytest.mark.slow
def test_a_build_past_its_limit_is_killed(cache, monkeypatch):
    """A compile limit of 2 s: the build's sandbox (ninja and the compiler) is killed whole."""
    src = "#include <torch/extension.h>\nint run() { return 1; }\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"run\", &run); }\n"
    sol = _with("axpy_cpp", **{"slow.cpp": src})
    monkeypatch.setenv("SOLBENCH_COMPILE_TIMEOUT_S", "2")
    ev = _evaluate(sol)
    # the trusted side's own message at the limit (no bound on the wall time: it follows the machine's load)
    assert ev.verdict == "compile_error" and "did not finish within 2 s" in ev.message
    time.sleep(0.2)
    left = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"solbench-cache" in (entry / "cmdline").read_bytes() and \
                    b"slow.cpp" in (entry / "cmdline").read_bytes():
                left.append(entry.name)
        except OSError:
            pass
    assert not left  # nothing of the build is still running
    assert not [p for p in (cache / "build").iterdir() if p.name.startswith(".build-")]
