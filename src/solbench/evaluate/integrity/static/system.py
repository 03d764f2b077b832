"""The world outside the kernel: installs and import machinery, network, files, process memory, ctypes and the
harness's own package."""

from __future__ import annotations

import ast
import re

from .rules import (
    REJECT,
    WARN,
    cpp_pattern,
    names,
    on_attr,
    on_call,
    on_string,
    rule,
    src,
    visits,
)

rule("runtime_install", REJECT,
     "Installing packages or changing the import machinery at run time brings in unreviewed code.")
rule("network", REJECT, "A kernel has no reason to talk to the network; it can leak or fetch results.")
rule("process_memory", REJECT,
     "Reading or writing process memory (/proc, ptrace, libc through ctypes) can rewrite the harness from outside "
     "Python.")
rule("ctypes", WARN,
     "ctypes or cffi can call the CUDA driver legitimately but also reach arbitrary native code; the dynamic "
     "checks decide.")
rule("file_io", WARN,
     "Reading or writing files can load precomputed outputs or inputs; the sandbox's private filesystem decides.")
rule("harness_import", REJECT,
     "The evaluator is not an API for solutions; importing it reaches timers and expected outputs.")

names(
    "network",
    "socket socketserver ssl urllib urllib3 http requests httpx aiohttp ftplib smtplib poplib imaplib nntplib "
    "telnetlib xmlrpc websocket websockets paramiko torch.hub huggingface_hub grpc zmq pycurl",
)
names(
    "runtime_install",
    "pip ensurepip site.addsitedir site.main importlib.util.spec_from_file_location importlib.util.module_from_spec "
    "importlib.machinery importlib.reload imp zipimport sys.path sys.meta_path sys.path_hooks sys.path_importer_cache",
)
names("ctypes", "ctypes _ctypes cffi")
names("process_memory", "ctypes.pythonapi ctypes.memmove ctypes.memset ctypes.string_at ctypes.wstring_at")
names(
    "file_io",
    "open io.open io.FileIO os.open os.remove os.unlink os.rename os.renames os.replace os.rmdir os.removedirs "
    "os.mkdir os.makedirs os.truncate os.link os.symlink os.mkfifo shutil tempfile numpy.load numpy.save "
    "numpy.savez numpy.savez_compressed numpy.fromfile numpy.loadtxt numpy.savetxt numpy.genfromtxt numpy.memmap "
    "torch.load torch.save torch.from_file safetensors h5py mmap",
)
names("harness_import", "solbench")

cpp_pattern("network", r"(?<![\w.>])socket\s*\(|sys/socket\.h|netinet/|arpa/inet\.h|\bgetaddrinfo\b|"
                       r"\bgethostbyname\b|\bcurl_easy_\w+",
            "uses the network", words="socket getaddrinfo gethostbyname", subs="netinet arpa/inet curl_easy")
cpp_pattern("process_memory", r"\bptrace\b|\bprocess_vm_(?:readv|writev)\b", "touches another process's memory",
            words="ptrace process_vm_readv process_vm_writev")
cpp_pattern("file_io", r"\bfopen\b|\b(?:std\s*::\s*)?[io]?fstream\b", "opens a file",
            words="fopen fstream ifstream ofstream")

PROC = ("/proc/", "/dev/mem", "/dev/kmem", "/dev/port")
_LIBC = re.compile(r"\blibc\b|libc\.so|libc\.dylib|msvcrt")
_OS_PROCESS = re.compile(r"^os\.(exec\w*|spawn\w*|posix_spawn\w*|fork\w*|popen\w*)$")
_PIP = re.compile(r"\b(pip3?|conda|uv|mamba|easy_install)\b")
_FILE_METHODS = frozenset({"read_text", "write_text", "read_bytes", "write_bytes", "tofile", "unlink", "touch"})


def is_code_file(path: str) -> bool:
    return path.endswith((".py", ".so", ".pth", ".pyc", ".pyd", ".pyx"))


def _writing(mode: str | None) -> bool:
    return mode is not None and any(c in mode for c in "wax+")


# ---- process memory and ctypes


@on_attr("process_memory", "from_address")
def raw_address(s, node: ast.Attribute) -> None:
    s.add("process_memory", node, "reads memory at a raw address (from_address)")


@on_string("process_memory")
def proc_path(s, node: ast.Constant, v: str) -> None:
    for p in PROC:
        if p in v:
            s.add("process_memory", node, f"string names {p}: {v[:60]!r}")
            break


@on_string("process_memory", when=lambda s: s.uses_ctypes)
def libc_name(s, node: ast.Constant, v: str) -> None:
    if _LIBC.search(v):
        s.add("process_memory", node, f"loads libc through ctypes/cffi: {v[:60]!r}")


@on_call("process_memory")
def libc_handle(s, node: ast.Call, r: str | None) -> None:
    """``CDLL(None)`` and ``find_library("c")`` expose libc and the process's own symbols."""
    if not r or not (r.startswith(("ctypes.", "cffi.")) or r in ("ctypes", "cffi")):
        return
    if r.endswith(("CDLL", "PyDLL", "LoadLibrary", "dlopen", "find_library")):
        a0 = node.args[0] if node.args else None
        if a0 is not None and isinstance(a0, ast.Constant) and a0.value is None:
            s.add("process_memory", node, f"{r}(None) exposes libc and the process's own symbols")
        elif a0 is not None and r.endswith("find_library") and s.fold(a0) == "c":
            s.add("process_memory", node, "ctypes.util.find_library('c') locates libc")


# ---- installs


@on_call("runtime_install")
def pip_through_subprocess(s, node: ast.Call, r: str | None) -> None:
    if r and (r.startswith("subprocess.") or r in ("os.system", "os.popen") or _OS_PROCESS.match(r)):
        words = " ".join(c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and isinstance(c.value, str))
        if _PIP.search(words) and "install" in words:
            s.add("runtime_install", node, f"installs packages through {r}")


@on_call("runtime_install", "open", "io.open", "os.open")
def open_code_file(s, node: ast.Call, r: str) -> None:
    args = node.args
    target = s.fold(args[0]) if args else None
    mode = s.fold(args[1]) if len(args) > 1 else None
    for k in node.keywords:
        if k.arg == "mode":
            mode = s.fold(k.value)
    if target and is_code_file(target) and mode and _writing(mode):
        s.add("runtime_install", node, f"writes a code file {target!r}")


@on_call("runtime_install")
def write_code_file_method(s, node: ast.Call, r: str | None) -> None:
    """``Path("x.py").write_text(...)``, ``Path("x.so").open("wb")``."""
    f = node.func
    if not isinstance(f, ast.Attribute):
        return
    a = f.attr
    if a in ("write_text", "write_bytes") or (a == "open" and r is None):
        consts = [c.value for c in ast.walk(f.value) if isinstance(c, ast.Constant) and isinstance(c.value, str)]
        mode = s.fold(node.args[0]) if (a == "open" and node.args) else None
        writing = a != "open" or _writing(mode)
        if writing and any(is_code_file(c) for c in consts):
            s.add("runtime_install", node, f"writes a code file: {src(f.value)}")


@visits("runtime_install", ast.AugAssign)
def extend_sys_path(s, node: ast.AugAssign) -> None:
    if s.resolve(node.target) == "sys.path":
        s.add("runtime_install", node, "extends sys.path")


# ---- files


@on_call("file_io")
def file_method(s, node: ast.Call, r: str | None) -> None:
    """``p.read_text()`` and the like on something that is not a known module."""
    f = node.func
    if r is None and isinstance(f, ast.Attribute) and f.attr in _FILE_METHODS:
        s.add("file_io", node, f"file access via .{f.attr}()")


#: the attributes through which numpy and torch take a buffer at an address an object states
ADDRESS_PROTOCOLS = frozenset({"__array_interface__", "__cuda_array_interface__", "__array_struct__"})


def _stated(node: ast.AST) -> str | None:
    """The name a node sets or defines: an attribute stored, a name, a function's name, a string constant (a
    dict's key, ``setattr``'s name)."""
    t = type(node)
    if t is ast.Attribute:
        return node.attr if type(node.ctx) is ast.Store else None
    if t is ast.Name:
        return node.id
    if t in (ast.FunctionDef, ast.AsyncFunctionDef):
        return node.name
    return node.value if t is ast.Constant and isinstance(node.value, str) else None


@visits("process_memory", ast.Attribute, ast.Name, ast.FunctionDef, ast.AsyncFunctionDef, ast.Constant)
def stated_address(s, node: ast.AST) -> None:
    """An object of the solution's that states an array interface (set, defined, or named in a dict) hands numpy
    or torch any address it likes: raw memory to read and write. Reading a tensor's is everyday interop."""
    name = _stated(node)
    if name in ADDRESS_PROTOCOLS:
        s.add("process_memory", node, f"states {name}: an address numpy or torch would read and write")
