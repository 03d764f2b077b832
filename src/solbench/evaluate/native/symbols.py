"""What a native solution's library may import: an allowlist of the symbols a kernel's host code needs.

The linked library holds only the solution's own code (the binding is a separate, trusted library, and the
linker dropped every section the exported table and the static initialisers do not reach), so its undefined
dynamic symbols are every function and object it can call or read by name. Each is demangled and judged by
its qualified name, without template arguments or parameters:

- **denied** (the categories of ``DENY``): the Python C API and pybind11's runtime, dynamic loading, thread and
  process creation, files, directories and memory mapping, raw system calls, signal handlers, sockets, ptrace,
  OpenMP's runtime, CUDA's IPC, host callbacks and profiler control, PyTorch's compute operators and dispatcher,
  and other vendor libraries than the language's own;
- **allowed** (``ALLOW``): the C++ runtime (memory, exceptions, strings and string streams, iostream
  basics), libc's memory, string, formatting and abort functions, libm, the CUDA runtime's launch, memory,
  stream, event, graph, device-attribute and error functions (with nvcc's registration stubs), and the part of
  torch's C++ API that reads tensor metadata, allocates, views and copies tensors, and gives the current
  stream: ``ALLOWED_OPS`` are the ATen operators it may call (allocation, views, contiguous copies and casts:
  no arithmetic of the problem's);
- anything else is denied when a library the solution loads defines it (it exists, and is not on the list),
  and is an undefined reference (a ``compile_error``) when none does.

An ``asm`` label or a hand-written ``syscall`` instruction calls without a name; that is what the candidate's
system-call filter is for. The library's needed libraries are checked too (``LIBRARIES``).
"""

from __future__ import annotations

import fnmatch
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

#: ATen operators a native solution may call: allocation, views, copies and casts, metadata
ALLOWED_OPS = frozenset("""
empty_memory_format empty_like empty_strided empty_permuted new_empty new_empty_strided new_zeros zeros zeros_like
zero_ fill__Scalar ones ones_like full full_like view view_dtype reshape _reshape_alias as_strided slice_Tensor
select_int narrow permute transpose_int t squeeze squeeze_dim squeeze_dims unsqueeze expand expand_as
flatten_using_ints unflatten_int alias detach view_as reshape_as contiguous clone copy_ _to_copy to_dtype
to_device to_dtype_layout to_other resize_ resize_as_ item _local_scalar_dense movedim_int split_Tensor
split_with_sizes chunk unbind_int is_same_size _has_compatible_shallow_copy_type
""".split())

DENY: dict[str, tuple[str, ...]] = {
    "the Python C API": ("Py*", "_Py*", "pybind11::*", "typeinfo for pybind11::*", "vtable for pybind11::*",
                         "torch::python::*", "THP*", "torch::utils::*"),
    "dynamic loading": ("dlopen*", "dlsym", "dlvsym", "dladdr*", "dlmopen", "dlinfo", "dl_iterate_phdr", "_dl_*",
                        "__libc_dl*", "cudaGetProcAddress*", "cuGetProcAddress*", "cuModuleLoad*", "cuLibraryLoad*",
                        "cudaLibraryLoad*"),
    "thread creation": ("pthread_create", "pthread_detach", "pthread_attr_*", "thrd_create", "std::thread::*",
                        "std::jthread::*", "std::__future_base::*", "std::async*", "*::_M_start_thread",
                        "__pthread_create*"),
    "process creation": ("fork", "vfork", "_Fork", "clone*", "exec*", "fexecve", "posix_spawn*", "system",
                         "popen", "pclose", "daemon", "setsid", "kill", "tgkill", "tkill", "killpg", "raise"),
    "files and directories": (
        "open", "open64", "openat*", "__open*", "creat*", "fopen*", "freopen*", "fdopen", "opendir", "fdopendir",
        "readdir*", "scandir*", "nftw*", "ftw*", "glob*", "stat*", "lstat*", "fstat*", "__xstat*", "__lxstat*",
        "__fxstat*", "statx", "access", "faccessat*", "euidaccess", "unlink*", "remove", "rename*", "mkdir*",
        "rmdir", "chdir", "fchdir", "chroot", "chmod*", "fchmod*", "chown*", "fchown*", "lchown", "truncate*",
        "ftruncate*", "link*", "symlink*", "readlink*", "realpath", "__realpath*", "mkstemp*", "mkdtemp", "tmpfile*",
        "tmpnam*", "tempnam", "read", "pread*", "readv", "preadv*", "write", "pwrite*", "writev", "pwritev*",
        "__read_chk", "__pread*", "lseek*", "dup", "dup2", "dup3", "fcntl*", "ioctl", "sendfile*", "splice", "tee",
        "copy_file_range", "pipe*", "mkfifo*", "mknod*", "inotify_*", "fanotify_*", "mount", "umount*",
        "std::filesystem::*", "std::__cxx11::basic_*fstream*", "std::basic_*fstream*", "std::basic_filebuf*",
        "std::__basic_file*", "std::random_device::*", "getenv", "secure_getenv", "setenv", "putenv", "unsetenv"),
    "memory mapping": ("mmap*", "munmap", "mprotect", "pkey_*", "mremap", "madvise", "posix_madvise", "remap_*",
                       "shm_*", "shmget", "shmat", "shmdt", "shmctl", "memfd_*", "mlock*", "munlock*",
                       "process_madvise"),
    "raw system calls": ("syscall", "__syscall*", "prctl", "arch_prctl", "seccomp", "ptrace", "process_vm_*",
                         "personality", "setrlimit*", "prlimit*", "unshare", "setns", "bpf", "perf_event_open",
                         "ioperm", "iopl", "capset", "setuid", "setgid", "setre*id", "setres*id"),
    "signal handlers": ("signal", "sigaction", "__sigaction", "sigset", "__sysv_signal", "bsd_signal", "sigaltstack",
                        "sigprocmask", "pthread_sigmask", "timer_create", "alarm", "setitimer", "ualarm"),
    "sockets": ("socket*", "connect", "bind", "listen", "accept*", "send*", "recv*", "getaddrinfo", "gethostby*",
                "getsockopt", "setsockopt", "shutdown", "socketpair"),
    "OpenMP's runtime": ("GOMP_*", "omp_*", "__kmpc_*", "kmp_*", "__kmp*"),
    "CUDA IPC, host callbacks and profiler control": (
        "cudaIpc*", "cuIpc*", "cudaLaunchHostFunc", "cuLaunchHostFunc", "cudaStreamAddCallback", "cuStreamAddCallback",
        "cudaGraphAddHostNode", "cudaGraphHostNode*", "cudaGraphExecHostNode*", "cudaUserObject*", "cudaProfiler*",
        "cuProfiler*", "cudaDeviceReset", "cudaThreadExit", "cudaImportExternal*", "cudaExternal*",
        "cudaDestroyExternal*", "cudaSignalExternal*", "cudaWaitExternal*", "cudaMemPoolExport*",
        "cudaMemPoolImport*", "cudaSetDeviceFlags", "cudaSetValidDevices", "cudaDeviceSetLimit",
        "cudaGraphicsGL*", "cudaGraphicsEGL*", "cudaLogs*"),
    "PyTorch's compute": ("at::_ops::*", "at::native::*", "at::cpu::*", "at::cuda::*", "at::meta::*",
                          "at::compositeexplicitautograd*", "at::compositeimplicitautograd*", "at::detail::*",
                          "c10::Dispatcher::*", "c10::OperatorHandle*", "c10::impl::OperatorEntry::*", "torch::jit::*",
                          "torch::autograd::*", "torch::Library::*", "torch::nn::*", "torch::optim::*",
                          "at::globalContext", "at::Context::*", "at::TensorBase::__dispatch_*", "at::Tensor::*",
                          "c10::KernelFunction::*", "c10::impl::BoxedKernelWrapper*", "at::RecordFunction*"),
    "another vendor library": ("cublas*", "cudnn*", "cufft*", "cusparse*", "cusolver*", "curand*", "nccl*",
                               "nvrtc*", "nvJitLink*", "cutensor*", "cuda::*"),
}

ALLOW: tuple[str, ...] = (
    # the C++ runtime
    "operator new*", "operator delete*", "__cxa_*", "__gxx_personality_v0", "_Unwind_*", "__dso_handle",
    "std::terminate", "std::__throw_*", "std::exception::*", "std::bad_*", "std::runtime_error::*",
    "std::logic_error::*", "std::invalid_argument::*", "std::out_of_range::*", "std::length_error::*",
    "std::overflow_error::*", "std::underflow_error::*", "std::range_error::*", "std::domain_error::*",
    "std::__cxx11::basic_string*", "std::basic_string*", "std::__cxx11::basic_*stringstream*",
    "std::__cxx11::basic_stringbuf*", "std::basic_ostream*", "std::basic_istream*", "std::basic_ios*",
    "std::ios_base*", "std::basic_streambuf*", "std::locale*", "std::__ostream_insert", "std::endl", "std::flush",
    "std::ostream::*", "std::operator<<", "std::cout", "__libc_single_threaded", "std::cerr", "std::clog", "std::_Hash_bytes", "std::_Rb_tree_*",
    "std::__detail::_Prime_rehash_policy::*", "std::__detail::_List_node_base::*", "std::_List_node_base::*",
    "std::chrono::*::now", "std::__once_callable", "std::__once_call", "std::__once_proxy", "std::mutex::*",
    "std::__shared_count*", "std::_Sp_make_shared_tag::*", "std::__cxx11::to_string", "std::to_string",
    "std::__cxx11::stoi", "std::numeric_limits*", "std::nothrow", "std::align_val_t",
    "typeinfo for *", "typeinfo name for *", "vtable for *", "VTT for *", "construction vtable for *",
    "guard variable for *", "_ITM_*", "__gmon_start__", "_GLOBAL_OFFSET_TABLE_", "__tls_get_addr", "__stack_chk_fail", "__stack_chk_guard",
    "__popcount*", "__udivti3", "__divti3", "__umodti3", "__modti3", "__mulodi4", "__muloti4", "__extend*",
    "__trunc*", "__float*", "__fix*",
    # libc: memory, strings, formatting to the standard streams, aborting
    "memcpy", "memmove", "memset", "memcmp", "memchr", "__memcpy_chk", "__memmove_chk", "__memset_chk", "strlen",
    "strnlen", "strcmp", "strncmp", "strchr", "strrchr", "strstr", "strcpy", "strncpy", "strcat", "strncat",
    "__strcpy_chk", "__strcat_chk", "__strncpy_chk", "strtol", "strtoll", "strtoul", "strtoull", "strtod", "strtof",
    "__isoc23_strto*", "__isoc99_sscanf", "sscanf", "atoi", "atol", "atof", "abs", "labs", "llabs", "div", "ldiv",
    "qsort", "bsearch", "malloc", "calloc", "realloc", "free", "posix_memalign", "aligned_alloc", "memalign",
    "abort", "__assert_fail", "exit", "atexit", "printf", "fprintf", "puts", "putchar", "fputs", "fputc", "fwrite", "fflush",
    "snprintf", "sprintf", "vsnprintf", "vsprintf", "vfprintf", "vprintf", "__printf_chk", "__fprintf_chk",
    "__snprintf_chk", "__sprintf_chk", "__vsnprintf_chk", "__vfprintf_chk", "stdout", "stderr", "__errno_location",
    "clock_gettime", "gettimeofday", "time", "clock", "sched_yield", "strerror", "localeconv", "nanosleep",
    "usleep", "sleep",
    # libm
    *(f"{f}{s}" for f in ("sqrt", "cbrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "pow", "sin",
                          "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh", "acosh",
                          "atanh", "erf", "erfc", "tgamma", "lgamma", "fabs", "floor", "ceil", "round", "lround",
                          "llround", "trunc", "rint", "lrint", "llrint", "nearbyint", "fmod", "remainder", "fmax",
                          "fmin", "fdim", "fma", "hypot", "frexp", "ldexp", "scalbn", "modf", "copysign",
                          "nextafter", "ilogb", "logb", "sincos")
      for s in ("", "f", "l", "_finite", "f_finite", "f32", "f64")),
    "__*_finite", "__fpclassify*", "__isnan*", "__isinf*", "__signbit*",
    # the CUDA runtime (what DENY names excepted) and nvcc's registration and launch stubs
    "cuda*", "__cuda*", "__device_stub__*", "cuTensorMapEncode*", "cuGetErrorString", "cuGetErrorName",
    # torch's tensor API: metadata, allocation, the current stream, errors and warnings
    "c10::detail::torchCheckFail", "c10::detail::torchInternalAssertFail", "c10::detail::maybe_wrap_dim_slow",
    "c10::detail::torchCheckMsgImpl", "c10::detail::StripBasename", "c10::*Error::*", "c10::Error*",
    "c10::Warning::*", "c10::warn", "c10::WarningUtils::*", "c10::operator<<", "c10::toString",
    "c10::DeviceTypeName", "c10::Device::*", "c10::TensorImpl::*", "c10::UndefinedTensorImpl::*", "c10::SymInt::*",
    "c10::SymBool::*", "c10::AutogradMetaInterface::*", "c10::impl::getGlobalPyInterpreter", "c10::SymFloat::*", "c10::SymbolicShapeMeta::*", "c10::SymIntArrayRef*", "c10::StorageImpl::*",
    "c10::Storage::*", "c10::intrusive_ptr*", "c10::impl::device_guard_impl_registry", "c10::impl::GPUTrace::*",
    "c10::impl::VirtualGuardImpl::*", "c10::impl::tls_*", "c10::impl::ExcludeDispatchKeyGuard::*",
    "c10::impl::IncludeDispatchKeyGuard::*", "c10::GradMode::*", "c10::AutoGradMode::*", "c10::AutogradState::*",
    "c10::InferenceMode::*", "c10::Scalar::*", "c10::ScalarType*", "c10::typeMetaToScalarType*",
    "c10::get_default_dtype*", "c10::GetCPUAllocator", "c10::GetAllocator", "c10::Allocator::*",
    "c10::DataPtr*", "c10::throwNullDataPtrError", "c10::warnDeprecatedDataPtr", "c10::impl::cow::is_cow_data_ptr",
    "c10::impl::cow::materialize_cow_storage", "c10::ivalue::*", "c10::IValue::*", "caffe2::TypeMeta::*",
    "caffe2::detail::*",
    "c10::cuda::*", "c10::CuDNNError::*", "at::TensorBase::data_ptr", "at::TensorBase::const_data_ptr",
    "at::TensorBase::mutable_data_ptr", "at::TensorBase::toString", "at::TensorBase::print",
    "at::TensorBase::__dispatch_contiguous", "at::cuda::getCurrentDeviceProperties", "at::cuda::getDeviceProperties",
    "at::cuda::warp_size", "at::cuda::getCurrentCUDAStream", "at::cuda::getNumGPUs",
    "at::cuda::getCUDADeviceAllocator", "at::cuda::canDeviceAccessPeer", "at::print", "at::operator<<",
)

#: what each vendor language may import beyond ALLOW (its library is its language)
LANGUAGE_ALLOW: dict[str, tuple[str, ...]] = {
    "cublas": ("cublas*", "at::cuda::getCurrentCUDABlasHandle", "at::cuda::getCurrentCUDABlasLtHandle",
               "at::cuda::getChosenWorkspaceSize", "at::cuda::getCUDABlasLtWorkspace*"),
    "cudnn": ("cudnn*", "at::native::getCudnnHandle"),
}

#: the shared libraries a solution's library may need (sonames, by prefix)
LIBRARIES = ("libc10.so", "libc10_cuda.so", "libtorch.so", "libtorch_cpu.so", "libtorch_cuda.so", "libcudart.so",
             "libcuda.so", "libstdc++.so", "libm.so", "libgcc_s.so", "libc.so", "ld-linux", "libmvec.so")
LANGUAGE_LIBRARIES = {"cublas": ("libcublas.so", "libcublasLt.so"), "cudnn": ("libcudnn",)}

_OPS = re.compile(r"^at::_ops::(\w+)::call$")
_EXACT = frozenset(p for p in ALLOW if "*" not in p)


@dataclass
class Judgement:
    """The verdict on a library's imports: denied ones (symbol, why), undefined references, all judged."""

    denied: list[tuple[str, str]] = field(default_factory=list)
    undefined: list[str] = field(default_factory=list)
    imports: list[str] = field(default_factory=list)  # every import, demangled


def demangle(names: list[str]) -> list[str]:
    """C++ names as c++filt writes them (unchanged where c++filt is missing or a name is not mangled)."""
    tool = shutil.which("c++filt")
    if not names or tool is None:
        return list(names)
    done = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True, text=True, timeout=60)
    out = done.stdout.splitlines()
    return out if done.returncode == 0 and len(out) == len(names) else list(names)


_OPERATOR = re.compile(r"operator(?:<<=|>>=|<=>|<<|>>|<=|>=|<|>|\(\)|\[\]|->\*?| (?:new|delete)(?:\[\])?| \w+)")


def base(demangled: str) -> str:
    """``float* at::TensorBase::data_ptr<float>() const`` -> ``at::TensorBase::data_ptr``; special names
    (``vtable for X``) keep their prefix, their subject stripped alike."""
    for prefix in ("typeinfo name for ", "typeinfo for ", "construction vtable for ", "vtable for ", "VTT for ",
                   "guard variable for "):
        if demangled.startswith(prefix):
            return prefix + base(demangled[len(prefix):])
    operators: list[str] = []

    def hide(m: re.Match[str]) -> str:
        operators.append(m.group(0))
        return f"operator@{len(operators) - 1}@"

    text, kept, depth = _OPERATOR.sub(hide, demangled), [], 0
    for c in text:
        if c == "<":
            depth += 1
        elif c == ">":
            depth = max(0, depth - 1)
        elif c == "(" and depth == 0:
            break  # the parameter list
        elif depth == 0:
            kept.append(c)
    name = "".join(kept).strip().split(" ")[-1]
    return re.sub(r"operator@(\d+)@", lambda m: operators[int(m.group(1))], name)


def _match(name: str, patterns) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def classify(name: str, language: str) -> str | None:
    """``None`` when ``name`` (a base name) is allowed for ``language``, the DENY category that holds it, or
    ``""`` when it is on neither list."""
    extra = LANGUAGE_ALLOW.get(language, ())
    op = _OPS.match(name)
    if op and op.group(1) in ALLOWED_OPS:
        return None
    if (extra and _match(name, extra)) or name in _EXACT:
        return None  # the language's library, or a name the allowlist spells out in full
    for why, patterns in DENY.items():
        if _match(name, patterns):
            return why
    return None if _match(name, ALLOW) else ""


def judge(undefined: list[str], weak: set[str], needed: list[str], language: str,
          search: list[Path], resolved: set[str] = frozenset()) -> Judgement:
    """Judge a library's imports; ``search``: the directories its needed libraries are found in; ``resolved``:
    imports the link resolved inside the library (from a statically linked C++ runtime: they exist)."""
    out = Judgement()
    names = demangle(undefined)
    out.imports = names
    unknown: list[tuple[str, str]] = []
    for raw, shown in zip(undefined, names):
        why = classify(base(shown), language)
        if why:
            out.denied.append((shown, why))
        elif why == "":
            unknown.append((raw, shown))
    if unknown:
        exported = _exported(needed, search)
        for raw, shown in unknown:
            if raw in exported or raw in resolved:
                out.denied.append((shown, "not on the allowlist of what a kernel's host code calls"))
            elif raw not in weak:
                out.undefined.append(shown)
    allowed = LIBRARIES + LANGUAGE_LIBRARIES.get(language, ())
    for lib in needed:
        if not lib.startswith(allowed):
            out.denied.append((lib, "a shared library a solution may not load"))
    return out


def _exported(needed: list[str], search: list[Path]) -> set[str]:
    from solbench.evaluate.integrity import linked

    found: set[str] = set()
    for lib in needed:
        for d in search:
            path = Path(d) / lib
            if path.is_file():
                found |= linked.exports(path)
                break
    return found
