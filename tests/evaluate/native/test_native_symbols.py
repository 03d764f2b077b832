"""The native build's checks that need no compiler run: the imports allowlist, the flags allowlist, the prelude's
binding table, and the ELF reader on libraries and objects built here."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from solbench.evaluate.native import flags, symbols
from solbench.evaluate.native.symbols import base, classify


@pytest.mark.parametrize("demangled,name", [
    ("float* at::TensorBase::data_ptr<float>() const", "at::TensorBase::data_ptr"),
    ("std::basic_ostream<char, std::char_traits<char> >& std::__ostream_insert<char, std::char_traits<char> >"
     "(std::basic_ostream<char, std::char_traits<char> >&, char const*, long)", "std::__ostream_insert"),
    ("c10::operator<<(std::basic_ostream<char, std::char_traits<char> >&, c10::Device const&)", "c10::operator<<"),
    ("vtable for std::__cxx11::basic_ostringstream<char, std::char_traits<char>, std::allocator<char> >",
     "vtable for std::__cxx11::basic_ostringstream"),
    ("operator new(unsigned long)", "operator new"), ("operator delete[](void*)", "operator delete[]"),
    ("at::_ops::mm::call(at::Tensor const&, at::Tensor const&)", "at::_ops::mm::call"),
    ("c10::impl::device_guard_impl_registry", "c10::impl::device_guard_impl_registry"),
])
def test_a_demangled_name_is_judged_by_its_qualified_name(demangled, name):
    assert base(demangled) == name


#: what the shipped CUDA C++ examples' libraries import (compiled for sm_90a with nvcc, linked with the
#: build's --gc-sections; read from the built libraries with nm -D): every one must stay allowed
HONEST = """
memcpy memmove strlen __cxa_atexit __cxa_guard_acquire __gxx_personality_v0 _Unwind_Resume __cudaRegisterFatBinary
__cudaRegisterFatBinaryEnd __cudaRegisterFunction __cudaRegisterVar __cudaUnregisterFatBinary __cudaPushCallConfiguration
__cudaPopCallConfiguration __cudaLaunchKernel __cudaGetKernel cudaLaunchKernel cudaGetLastError cudaGetErrorString
cudaEventRecord cudaStreamWaitEvent cudaStreamIsCapturing cudaDeviceSynchronize cudaFuncSetAttribute
""".split() + [
    "at::TensorBase::data_ptr", "c10::detail::torchCheckFail", "c10::detail::torchInternalAssertFail",
    "c10::detail::maybe_wrap_dim_slow", "c10::SymBool::guard_bool", "c10::SymbolicShapeMeta::init_is_contiguous",
    "c10::TensorImpl::decref_pyobject", "c10::UndefinedTensorImpl::_singleton", "c10::Warning::Warning", "c10::warn",
    "c10::cuda::getCurrentCUDAStream", "c10::cuda::c10_cuda_check_implementation", "c10::cuda::ExchangeDevice",
    "c10::cuda::CUDACachingAllocator::allocator", "c10::impl::device_guard_impl_registry", "c10::impl::GPUTrace::haveState",
    "c10::operator<<", "caffe2::TypeMeta::error_unsupported_typemeta", "at::TensorBase::__dispatch_contiguous",
    "at::_ops::empty_memory_format::call", "at::_ops::empty_like::call", "at::_ops::copy_::call",
    "at::_ops::contiguous::call", "at::cuda::getCurrentDeviceProperties", "operator new", "operator delete",
    "std::__cxx11::basic_ostringstream::basic_ostringstream", "vtable for std::basic_ios", "std::ios_base::Init::Init",
    "std::__throw_length_error", "std::terminate", "expf", "sqrtf", "c10::AutogradMetaInterface::~AutogradMetaInterface",
    # torch 2.11's inline data pointers (gemm_fp8_rowwise's example on the H200, 2026-12-04: copy-on-write storage)
    "c10::throwNullDataPtrError", "c10::warnDeprecatedDataPtr", "c10::impl::cow::is_cow_data_ptr",
    "c10::impl::cow::materialize_cow_storage",
]


@pytest.mark.parametrize("name", HONEST)
def test_what_honest_kernels_import_is_allowed(name):
    assert classify(name, "cuda_cpp") is None


@pytest.mark.parametrize("name,category", [
    ("PyRun_SimpleString", "the Python C API"), ("_Py_Dealloc", "the Python C API"),
    ("pybind11::detail::get_internals", "the Python C API"), ("dlopen", "dynamic loading"),
    ("dlsym", "dynamic loading"), ("pthread_create", "thread creation"), ("std::thread::_M_start_thread", "thread creation"),
    ("fork", "process creation"), ("execve", "process creation"), ("posix_spawn", "process creation"),
    ("system", "process creation"), ("popen", "process creation"), ("open64", "files and directories"),
    ("openat", "files and directories"), ("fopen", "files and directories"), ("opendir", "files and directories"),
    ("std::filesystem::status", "files and directories"), ("write", "files and directories"),
    ("mmap64", "memory mapping"), ("mprotect", "memory mapping"), ("shm_open", "memory mapping"),
    ("syscall", "raw system calls"), ("ptrace", "raw system calls"), ("process_vm_readv", "raw system calls"),
    ("sigaction", "signal handlers"), ("socket", "sockets"), ("connect", "sockets"), ("GOMP_parallel", "OpenMP's runtime"),
    ("omp_get_num_threads", "OpenMP's runtime"), ("cudaIpcOpenMemHandle", "CUDA IPC, host callbacks and profiler control"),
    ("cudaLaunchHostFunc", "CUDA IPC, host callbacks and profiler control"),
    ("cudaProfilerStop", "CUDA IPC, host callbacks and profiler control"),
    ("at::_ops::mm::call", "PyTorch's compute"), ("at::_ops::_softmax::call", "PyTorch's compute"),
    ("at::_ops::add_Tensor::call", "PyTorch's compute"), ("at::_ops::mm::redispatch", "PyTorch's compute"),
    ("at::native::add", "PyTorch's compute"), ("c10::Dispatcher::singleton", "PyTorch's compute"),
    ("torch::Library::_def", "PyTorch's compute"), ("at::cuda::getCurrentCUDABlasHandle", "PyTorch's compute"),
    ("cublasSgemm_v2", "another vendor library"), ("cudnnSoftmaxForward", "another vendor library"),
])
def test_what_a_kernel_has_no_business_calling_is_denied(name, category):
    assert classify(name, "cuda_cpp") == category


def test_a_vendor_language_may_call_its_own_library_only():
    assert classify("cublasSgemm_v2", "cublas") is None
    assert classify("at::cuda::getCurrentCUDABlasHandle", "cublas") is None
    assert classify("cudnnSoftmaxForward", "cublas") == "another vendor library"
    assert classify("cudnnSoftmaxForward", "cudnn") is None
    assert classify("at::_ops::mm::call", "cublas") == "PyTorch's compute"


def test_unknown_names_are_denied_when_they_exist_and_undefined_references_otherwise(tmp_path):
    lib = tmp_path / "libfake.so"
    _compile(tmp_path, 'extern "C" int fclose_like(int x) { return x; }\n', lib, ["-shared"])
    found = symbols.judge(["fclose_like", "missing_function", "__gmon_start__"], {"__gmon_start__"},
                          ["libfake.so"], "cuda_cpp", [tmp_path])
    assert found.denied == [("fclose_like", "not on the allowlist of what a kernel's host code calls"),
                            ("libfake.so", "a shared library a solution may not load")]
    assert found.undefined == ["missing_function"]
    assert symbols.judge([], set(), ["libpython3.11.so.1.0"], "cuda_cpp", []).denied[0][0] == "libpython3.11.so.1.0"


def test_compile_options_pass_only_from_the_allowlist():
    assert flags.host(["-O3", "-march=native", "-mavx2", "-ffast-math", "-fopenmp", "-DN=4", "-UX", "-std=c++17",
                       "-Wall", "-Wno-unused", "-g", "-Iinclude", "-pthread"])
    assert flags.nvcc(["-O3", "--use_fast_math", "-lineinfo", "-Xptxas", "-v,-O3", "-Xptxas=-v", "-maxrregcount=64",
                       "--maxrregcount", "128", "-gencode", "arch=compute_90a,code=sm_90a", "-arch=sm_90a",
                       "-Xcompiler", "-O3,-march=native", "--expt-extended-lambda", "-std=c++20", "--ftz=true"])
    for bad in ("-fplugin=x.so", "-B/tmp", "-specs=x", "-wrapper", "-Wl,--defsym=x=y", "-Wa,-x", "-Wp,-x",
                "-include", "-imacros", "@opts", "-o", "-x", "-MF", "-save-temps", "-fdump-tree-all",
                "-fprofile-generate", "-I/etc", "-I../up", "--sysroot=/"):
        with pytest.raises(ValueError):
            flags.host([bad])
    for bad in (["-ccbin", "cc"], ["--compiler-bindir=/tmp"], ["-Xcompiler", "-fplugin=x"], ["-Xlinker", "-x"],
                ["-Xptxas", "--sneaky"], ["--keep"], ["-rdc=true"], ["-Xcompiler"]):
        with pytest.raises(ValueError):
            flags.nvcc(bad)
    assert flags.libraries(["-lcublas", "-lm"]) and flags.split("-O2 -g", "cflags") == ["-O2", "-g"]
    with pytest.raises(ValueError):
        flags.libraries(["-lssl"])


def _compile(tmp: Path, source: str, out: Path, extra: list[str]) -> None:
    if shutil.which("g++") is None:
        pytest.skip("no C++ compiler")
    src = tmp / f"{out.stem}.cpp"
    src.write_text(source)
    subprocess.run(["g++", "-fPIC", *extra, "-o", str(out), str(src)], check=True, capture_output=True)


def test_the_elf_reader_sees_a_librarys_table_and_an_objects_imports(tmp_path):
    from solbench.evaluate.integrity import linked

    _compile(tmp_path, 'extern "C" int puts(const char*);\nextern "C" int solbench_native_module(int x) '
                       '{ return puts("x") + x; }\n__attribute__((weak)) extern int maybe;\n'
                       'int use() { return &maybe != nullptr; }\n', tmp_path / "k.so", ["-shared"])
    found = linked.parse((tmp_path / "k.so").read_bytes())
    assert "solbench_native_module" in found.defined and "puts" in found.undefined
    assert "maybe" in found.weak and any(n.startswith("libc.so") for n in found.needed) or found.needed == []
    _compile(tmp_path, 'extern "C" int dlopen_like(int);\nint f(int x) { return dlopen_like(x); }\n',
             tmp_path / "o.o", ["-c"])
    assert linked.object_imports((tmp_path / "o.o").read_bytes()) == {"dlopen_like"}
    assert linked.parse(b"not an ELF file" * 10) is None and linked.object_imports(b"") == set()


def test_the_prelude_and_binding_sources_are_part_of_every_key():
    from solbench.evaluate.languages.cuda_cpp import CudaCpp, native_digest
    from solbench.evaluate.native import sources

    assert "#define PYBIND11_MODULE" in sources.PRELUDE and "SOLBENCH_BINDING" in sources.BINDING
    assert sources.ENTRY in sources.EXPORTS and "local: *" in sources.EXPORTS
    plan = CudaCpp().plan([("main.cpp", "int x;")], {}, [], "cpu")
    assert plan["native"] == native_digest() and json.dumps(plan)


@pytest.mark.parametrize("reads_a_file", [False, True])
def test_with_a_static_cpp_runtime_the_solutions_own_objects_are_judged(tmp_path, reads_a_file):
    """A toolchain that links libstdc++ statically (the H200 machine's /opt/gcc) leaves the library importing
    what that runtime calls (locales, files); the judged imports are then what the solution's objects call, none
    of them defines and the link kept, so an honest library passes and one that opens a file through the runtime
    does not."""
    from solbench.evaluate.integrity import linked
    from solbench.evaluate.native import build

    body = ("#include <fstream>\nint helper(int);\nint f(const char* p) { std::ifstream s(p); "
            "return helper((int)s.good()); }\n") if reads_a_file else \
        "#include <string>\nint helper(int);\nint f(int x) { return helper((int)std::to_string(x).size()); }\n"
    body += 'extern "C" void* PyLong_FromLong(long);\nvoid* unused(long x) { return PyLong_FromLong(x); }\n'
    _compile(tmp_path, body, tmp_path / "a.o", ["-c", "-O2", "-ffunction-sections"])
    (tmp_path / "exports.map").write_text("{ global: _Z1fi; _Z1fPKc; local: *; };\n")
    _compile(tmp_path, "int helper(int x) { return x + 1; }\n", tmp_path / "b.o", ["-c", "-O2"])
    lib = tmp_path / "lib.so"
    made = subprocess.run(["g++", "-shared", "-static-libstdc++", "-Wl,--gc-sections",
                           f"-Wl,--version-script={tmp_path / 'exports.map'}", str(tmp_path / "a.o"),
                           str(tmp_path / "b.o"), "-o", str(lib)], capture_output=True)
    if made.returncode != 0:
        pytest.skip("no static libstdc++ here")
    dyn = linked.parse(lib.read_bytes())
    assert not any(n.startswith("libstdc++") for n in dyn.needed)
    probe = tmp_path / build.PROBE
    subprocess.run(["g++", "-shared", "-nodefaultlibs", str(tmp_path / "a.o"), str(tmp_path / "b.o"),
                    "-Wl,--gc-sections", f"-Wl,--version-script={tmp_path / 'exports.map'}", "-o", str(probe)],
                   check=True, capture_output=True)
    judged, resolved = build._judged_imports(dyn, probe)
    assert "PyLong_FromLong" in linked.object_imports((tmp_path / "a.o").read_bytes())
    assert "PyLong_FromLong" not in judged  # in a section the link dropped
    assert "_Z6helperi" not in judged and "_Z6helperi" not in dyn.undefined
    found = symbols.judge(judged, dyn.weak, dyn.needed, "cuda_cpp", [], resolved)
    files = [s for s, why in found.denied if why == "files and directories"]
    assert bool(files) == reads_a_file, found.denied
    assert not found.undefined
