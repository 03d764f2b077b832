"""The cuda_cpp and cutlass plug-ins (C++/CUDA torch extensions) and their build cache.

One real C++ extension is built per session (``built``, about 15-25 s on 2 cores); the rest reuses it or needs
no compiler. The .cu fixture only runs on a GPU; here it must be ``unsupported``.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import time
from pathlib import Path

import pytest

from conftest import AXPY, FIXTURES
from solbench.evaluate import build_cache

CPP = FIXTURES / "cuda_cpp"


def _problem():
    from solbench.problems.problem import load_problem

    return load_problem(AXPY)


def _solution(name: str):
    from solbench.problems.solution import load_solution

    return load_solution(CPP / f"{name}.json", _problem().definition)


def _evaluate(name: str):
    from solbench.evaluate.runner import EvalOptions, evaluate

    return evaluate(_problem(), _solution(name), EvalOptions(device="cpu", baselines=(), time_candidate=False))


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A cache root of this module's own (SOLBENCH_CACHE), so every run starts cold."""
    root = tmp_path_factory.mktemp("solbench-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SOLBENCH_CACHE", str(root))
        yield root


@pytest.fixture(scope="module")
def built(cache):
    """The C++ solution evaluated once, cold: it is compiled in the candidate's sandbox and published."""
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


def test_the_plan_follows_the_compile_options():
    from solbench.evaluate.languages.cuda_cpp import CudaCpp

    lang = CudaCpp()
    sources = [("main.cpp", "int x;")]
    a = lang.plan(sources, {"cflags": ["-O3"]}, [], "cpu")
    b = lang.plan(sources, {"cflags": ["-O2"]}, [], "cpu")
    c = lang.plan(sources, {"cflags": "-O2"}, [], "cpu")  # a string is split like a shell would
    assert a["key"] != b["key"] and b["key"] == c["key"]
    assert a["name"] == f"sb_{a['key'][:16]}" and a["cflags"][-1] == "-O3" and a["sources"] == ["main.cpp"]
    assert a["arch"] == "cpu" and not a["with_cuda"] and a["cuda_cflags"] == []
    with pytest.raises(ValueError):
        lang.plan(sources, {"cflags": {"x": 1}}, [], "cpu")


def test_arch_flags_for_the_present_device(monkeypatch):
    import torch

    from solbench.evaluate.languages import cuda_cpp

    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    assert cuda_cpp.target_arch("cuda:0") == "sm_90a"
    assert cuda_cpp.arch_flags("sm_90a") == ["-gencode=arch=compute_90a,code=sm_90a"]
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    assert cuda_cpp.target_arch("cuda") == "sm_80"
    assert cuda_cpp.arch_flags("cpu") == []


def test_publish_is_atomic_and_keeps_the_first(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    build = tmp_path / "build"
    build.mkdir()
    for name in ("a.so", "b.txt", "c.txt"):
        (build / name).write_text(name)
    (build / "obj.o").write_text("objects stay behind")
    (build / "link").symlink_to("/etc/hostname")
    real_copy = build_cache._copy
    seen_midway = []

    def slow_copy(fd, target, size):
        seen_midway.append(build_cache.lookup("k1", root))
        real_copy(fd, target, size)

    monkeypatch.setattr(build_cache, "_copy", slow_copy)
    path = build_cache.publish("k1", build, {"compile_s": 1.5}, root)
    assert seen_midway and all(p is None for p in seen_midway)  # never visible while half-written
    assert path == root / "k1" and sorted(p.name for p in path.iterdir()) == ["a.so", "b.txt", "c.txt", "meta.json"]
    assert build_cache.read_meta(path) == {"compile_s": 1.5, "key": "k1"}

    calls = []

    def failing_copy(fd, target, size):
        calls.append(target)
        if len(calls) == 2:
            raise OSError("disk full")
        real_copy(fd, target, size)

    monkeypatch.setattr(build_cache, "_copy", failing_copy)
    with pytest.raises(OSError):
        build_cache.publish("k2", build, {}, root)
    assert build_cache.lookup("k2", root) is None and not (root / "k2").exists()
    assert not [p for p in root.iterdir() if p.name.startswith(".tmp-")]  # the temporary copy is gone

    monkeypatch.setattr(build_cache, "_copy", real_copy)
    (build / "a.so").write_text("a second build")
    assert build_cache.publish("k1", build, {"compile_s": 9.0}, root) == root / "k1"
    assert (root / "k1" / "a.so").read_text() == "a.so" and build_cache.read_meta(root / "k1")["compile_s"] == 1.5


def _build_counted(work: Path, count: str) -> dict:
    with open(count, "a") as f:
        f.write(f"{os.getpid()}\n")
    time.sleep(1.0)  # long enough for the other process to be waiting
    (work / "lib.so").write_text("artefact")
    return {"compile_s": 1.0}


def _race(root: str, count: str, barrier, results) -> None:
    import functools

    barrier.wait()
    path, meta, cached = build_cache.build_once("racekey", functools.partial(_build_counted, count=count), Path(root))
    results.put((str(path), (path / "lib.so").read_text(), meta.get("compile_s"), cached))


def test_two_processes_building_the_same_key_build_once(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    count = tmp_path / "builds.txt"
    procs = [ctx.Process(target=_race, args=(str(tmp_path / "cache"), str(count), barrier, results))
             for _ in range(2)]
    for p in procs:
        p.start()
    got = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert len(count.read_text().splitlines()) == 1  # built once
    assert {g[:3] for g in got} == {(str(tmp_path / "cache" / "racekey"), "artefact", 1.0)}  # both got it
    assert sorted(g[3] for g in got) == [False, True]  # one built, the other waited and reused it


class _Plan:
    """A compiled language as ``Carry`` sees it."""

    name = "cuda_cpp"

    def __init__(self, key: str = "a" * 64):
        self.key = key

    def unsupported_reason(self, solution, device):
        return None

    def build_plan(self, solution, device):
        return {"key": self.key, "timeout_s": 5, "language": "cuda_cpp", "arch": "cpu"}


def test_carry_publishes_only_this_keys_regular_files(tmp_path):
    """A candidate writes where it likes in its private directory; the trusted side publishes the directory of the
    key it computed itself, regular files only, and nothing under any other key."""
    root, private = tmp_path / "cache", tmp_path / "private"
    carry = build_cache.Carry(_Plan(), None, "cpu", private, root)
    assert carry.env["SOLBENCH_BUILD_CACHE"] == str(private / "build" / ("a" * 64))
    with carry:
        mine = private / "build" / ("a" * 64)
        (mine / "sb_x.so").write_text("lib")
        (mine / "stolen").symlink_to("/etc/hostname")
        other = private / "build" / ("b" * 64)  # planting under another solution's key
        other.mkdir(parents=True)
        (other / "sb_y.so").write_text("planted")
        (other / "meta.json").write_text("{}")
        (mine / "meta.json").write_text(json.dumps({"compile_s": 2.5, "key": "forged"}))
    assert carry.report == {"key": "a" * 16, "cached": False, "published": True, "compile_s": 2.5}
    assert sorted(p.name for p in (root / ("a" * 64)).iterdir()) == ["meta.json", "sb_x.so"]
    assert build_cache.read_meta(root / ("a" * 64))["key"] == "a" * 64  # the trusted side's meta, not the candidate's
    assert build_cache.lookup("b" * 64, root) is None
    again = build_cache.Carry(_Plan(), None, "cpu", tmp_path / "private2", root)
    with again:
        assert (tmp_path / "private2" / "build" / ("a" * 64) / "sb_x.so").read_text() == "lib"
    assert again.report["cached"] and not again.report["published"]


def test_links_in_the_candidates_directory_are_never_followed(tmp_path):
    """The candidate swaps its build directory (or the directory above it, or its Triton cache) for a link to
    files it cannot read: the trusted side copies none of them into the shared cache."""
    from solbench.evaluate.runner import _carry_cache

    secret = tmp_path / "hidden"
    (secret / ("a" * 64)).mkdir(parents=True)
    for d in (secret, secret / ("a" * 64)):
        (d / "meta.json").write_text('{"compile_s": 1}')
        (d / "seed").write_text("42")
    root = tmp_path / "cache"
    for n, swap in enumerate(("build/" + "a" * 64, "build")):
        private = tmp_path / f"private{n}"
        carry = build_cache.Carry(_Plan(), None, "cpu", private, root)
        with carry:
            shutil.rmtree(private / swap)
            (private / swap).symlink_to(secret)
        assert not carry.published and build_cache.lookup("a" * 64, root) is None
    os.mkfifo(private / "meta.json")  # a FIFO never blocks the trusted side
    assert build_cache.read_meta(private, tmp_path) == {}
    (private / "triton").symlink_to(secret)
    _carry_cache(private / "triton", tmp_path / "carried", below=private)
    assert not (tmp_path / "carried").exists()


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


def test_cuda_sources_on_the_cpu_are_unsupported(cache):
    ev = _evaluate("axpy_cuda")
    assert ev.verdict == "unsupported" and ev.workloads
    assert all(w.verdict == "unsupported" and w.reasons == ["language_unavailable"] for w in ev.workloads)
    assert "need a CUDA device" in ev.workloads[0].message and "need a CUDA device" in ev.message


@pytest.mark.slow
def test_a_cpp_extension_builds_and_passes_on_the_cpu(built):
    ev, elapsed = built
    assert ev.verdict == "passed", (ev.message, [(w.uuid, w.verdict, w.message) for w in ev.workloads], ev.log[-2000:])
    assert not [f for f in ev.findings if f.startswith("reject")]
    assert "language_unproven" in ev.warnings  # a C++ build on the CPU gives the proof no kernels to look at
    build = ev.environment["build"]
    assert build["cached"] is False and build["published"] is True and build["compile_s"] > 0
    print(f"\ncold evaluation {elapsed:.1f} s, compile {build['compile_s']:.1f} s")


@pytest.mark.slow
def test_a_second_evaluation_reuses_the_build(built, cache, monkeypatch):
    ev = _evaluate("axpy_cpp")
    assert ev.verdict == "passed"
    build = ev.environment["build"]
    assert build["cached"] is True and build["published"] is False
    assert build["key"] == built[0].environment["build"]["key"]
    assert ev.environment["candidate_ready_s"] < 1.0  # the candidate's process: start, sandbox, load
    assert "cached build" in ev.log

    # the plug-in's own load from the cached artefact, in this process: no compiler runs
    from solbench.evaluate.languages.cuda_cpp import CudaCpp

    sol = _solution("axpy_cpp")
    lang = CudaCpp()
    plan = lang.build_plan(sol, "cpu")
    artefact = build_cache.lookup(plan["key"], cache / "build")
    assert artefact is not None and plan["key"].startswith(build["key"])
    staged, private = cache / "staged", cache / "private" / plan["key"]
    for s in sol.sources:
        (staged / s.path).parent.mkdir(parents=True, exist_ok=True)
        (staged / s.path).write_text(s.content)
    shutil.copytree(artefact, private)
    monkeypatch.setenv("SOLBENCH_BUILD_CACHE", str(private))
    monkeypatch.setenv("SOLBENCH_BUILD_PLAN", json.dumps(plan))
    t0 = time.perf_counter()
    fn = lang.load(staged, "main.cpp", "run")
    load_s = time.perf_counter() - t0
    assert lang.cached is True and load_s < 1.0
    import torch

    x, y, out = torch.arange(5.0), torch.ones(5), torch.empty(5)
    fn(x, y, 2.0, out)
    assert out.tolist() == [1.0, 3.0, 5.0, 7.0, 9.0]
    print(f"\ncached: candidate ready in {ev.environment['candidate_ready_s']:.3f} s, load {load_s * 1000:.1f} ms")


@pytest.mark.slow
def test_a_compile_error_is_a_verdict_with_the_compilers_message(cache):
    ev = _evaluate("axpy_cpp_broken")
    assert ev.verdict == "compile_error" and all(w.verdict == "compile_error" for w in ev.workloads)
    assert "main.cpp:7:" in ev.message and "error: cannot convert" in ev.message
    assert "-DTORCH_EXTENSION_NAME" not in ev.message  # ninja's command lines are left out
    assert ev.environment["build"]["published"] is False  # nothing is cached from a failed build


def test_a_build_past_its_limit_is_killed(tmp_path, monkeypatch):
    """A compile limit of 3 s: the build child (torch's import, then ninja and the compiler) is killed whole."""
    from solbench.evaluate.languages.base import CompileError
    from solbench.evaluate.languages.cuda_cpp import CudaCpp

    staged = tmp_path / "solution"
    staged.mkdir()
    (staged / "main.cpp").write_text("#include <torch/extension.h>\nint run() { return 1; }\n"
                                     "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"run\", &run); }\n")
    monkeypatch.delenv("SOLBENCH_BUILD_PLAN", raising=False)
    monkeypatch.setenv("SOLBENCH_BUILD_CACHE", str(tmp_path / "build"))
    monkeypatch.setenv("SOLBENCH_COMPILE_TIMEOUT_S", "3")
    lang = CudaCpp()
    t0 = time.perf_counter()
    with pytest.raises(CompileError, match="did not finish within 3 s"):
        lang.load(staged, "main.cpp", "run")
    assert time.perf_counter() - t0 < 15
    time.sleep(0.2)
    left = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (str(tmp_path).encode() in (entry / "cmdline").read_bytes()
                                         or os.readlink(entry / "cwd").startswith(str(tmp_path))):
                left.append(entry.name)
        except OSError:
            pass
    assert not left  # nothing of the build is still running
    assert not (tmp_path / "build" / "meta.json").exists()
