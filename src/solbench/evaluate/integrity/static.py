"""Static integrity rules: scan a solution's sources before anything of it runs.

Every finding comes from a named :class:`Rule` with a severity: ``reject`` means
the solution is not run at all, ``warn`` means the dynamic checks decide.  A
problem that legitimately needs something a rule matches names that rule in its
:class:`Policy` (``allow``); a problem that forbids library shortcuts lists the
dotted names in ``forbid_calls``.  docs/STATIC_RULES.md documents every rule.

Python sources are parsed with :mod:`ast`; names are resolved through import
aliases and simple assignments (``import torch as t``, ``F = torch.nn.functional``,
``g = getattr(builtins, "exec")``), so a rule matches the real dotted name, not
the spelling.  C, C++ and CUDA sources get a token scan after comments and
string literals are blanked out.  The scan is a heuristic filter in front of
the dynamic checks and the sandbox; it is not the only line of defence.
"""

from __future__ import annotations

import ast
import bisect
import gc
import builtins as _builtins_module
import re
from dataclasses import dataclass

REJECT = "reject"
WARN = "warn"


@dataclass(frozen=True)
class Rule:
    name: str
    severity: str
    rationale: str


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: str
    path: str
    line: int
    message: str


@dataclass
class Policy:
    #: rule names a problem legitimately needs (findings of these are dropped)
    allow: frozenset[str] = frozenset()
    #: dotted names a problem forbids, e.g. "torch.matmul"; "torch.nn.functional.*" forbids a whole namespace
    forbid_calls: frozenset[str] = frozenset()


_RULE_LIST = [
    Rule("threading", REJECT, "Threads, thread pools and worker processes can keep computing after the timer stops."),
    Rule(
        "subprocess",
        REJECT,
        "Child processes and shell commands escape the timed call and the sandbox's accounting.",
    ),
    Rule(
        "monkeypatching",
        REJECT,
        "Replacing attributes of torch, time, triton, builtins, sys, os, gc, numpy or the harness can fake timings or results.",
    ),
    Rule(
        "frame_or_gc_walk",
        REJECT,
        "Walking frames or the garbage collector reaches the harness's expected outputs and timers.",
    ),
    Rule(
        "dynamic_code",
        REJECT,
        "Code built or loaded at run time (exec, eval, compile, unpickling, dlopen) cannot be reviewed statically.",
    ),
    Rule(
        "obfuscated_payload",
        REJECT,
        "Decoding a blob and executing it is how scanners are evaded; honest kernels never need it.",
    ),
    Rule(
        "name_obfuscation",
        REJECT,
        "Attribute and module names assembled at run time hide what the code really touches.",
    ),
    Rule(
        "runtime_install",
        REJECT,
        "Installing packages or changing the import machinery at run time brings in unreviewed code.",
    ),
    Rule("network", REJECT, "A kernel has no reason to talk to the network; it can leak or fetch results."),
    Rule(
        "process_memory",
        REJECT,
        "Reading or writing process memory (/proc, ptrace, libc through ctypes) can rewrite the harness from outside Python.",
    ),
    Rule(
        "ctypes",
        WARN,
        "ctypes or cffi can call the CUDA driver legitimately but also reach arbitrary native code; the dynamic checks decide.",
    ),
    Rule(
        "signal_tamper",
        REJECT,
        "Signal handlers, timers, exit hooks, tracers and process kills interfere with the harness's watchdog and timing.",
    ),
    Rule(
        "output_cache_by_pointer",
        REJECT,
        "Caching results by tensor address or identity replays old outputs instead of computing them.",
    ),
    Rule(
        "value_cache",
        REJECT,
        "Caching results by tensor values or comparing inputs to stored tensors skips the computation on repeated inputs.",
    ),
    Rule(
        "shape_cache",
        WARN,
        "Caches keyed on shapes are normal for autotuning and CUDA graphs but can also replay outputs; the dynamic checks decide.",
    ),
    Rule(
        "reference_fallback",
        REJECT,
        "An exception handler that computes with PyTorch hides a kernel that does not work.",
    ),
    Rule(
        "stream_creation",
        WARN,
        "Work on a side stream can escape events recorded on the default stream; the harness tracks, fences and "
        "times streams made through torch.cuda.Stream and ExternalStream.",
    ),
    Rule(
        "untracked_stream",
        REJECT,
        "A stream made outside torch.cuda.Stream/ExternalStream is invisible to the harness: work on it can run "
        "while the timed stream is held and escape every sample.",
    ),
    Rule(
        "profiler_use",
        REJECT,
        "The language proof profiles one secret call: a solution that starts, stops or queries a profiler can "
        "make that call fail or behave differently from the others.",
    ),
    Rule(
        "file_io",
        WARN,
        "Reading or writing files can load precomputed outputs or inputs; the sandbox's private filesystem decides.",
    ),
    Rule(
        "persisting_l2",
        REJECT,
        "A persisting-L2 set-aside keeps data resident through the cache flush and inflates bandwidth.",
    ),
    Rule("forbidden_call", REJECT, "The problem forbids this library call; using it means the kernel was not written."),
    Rule(
        "torch_compute_in_dsl",
        WARN,
        "Heavy PyTorch compute inside a DSL or CUDA solution may mean the custom kernel does not do the work.",
    ),
    Rule(
        "precision_flags",
        WARN,
        "Enabling TF32 or reduced-precision reductions trades accuracy for speed; the tolerance checks decide.",
    ),
    Rule(
        "tensor_subclass",
        WARN,
        "Tensor subclasses and __class__ swaps can defer work into the untimed correctness check.",
    ),
    Rule(
        "token_paste",
        WARN,
        "Token pasting in a macro can assemble forbidden API names that a token scan cannot see.",
    ),
    Rule(
        "result_channel",
        REJECT,
        "Reading the worker's command line or writing raw file descriptors can forge the harness's result channel.",
    ),
    Rule(
        "harness_import",
        REJECT,
        "The evaluator is not an API for solutions; importing it reaches timers and expected outputs.",
    ),
    Rule("unscannable", REJECT, "A source the scanner cannot analyse (nesting too deep) could hide anything."),
]

RULES: dict[str, Rule] = {r.name: r for r in _RULE_LIST}


def rejected(findings: list[Finding]) -> list[Finding]:
    """The findings of reject severity."""
    return [f for f in findings if f.severity == REJECT]


# --------------------------------------------------------------------------------------------
# name tables

#: a dotted name matches an entry when it equals it or starts with ``entry + "."``
_NAME_RULES: dict[str, tuple[str, ...]] = {}


def _add(rule: str, names: str) -> None:
    for n in names.split():
        _NAME_RULES[n] = _NAME_RULES.get(n, ()) + (rule,)


_add("threading", "threading _thread _dummy_thread concurrent multiprocessing torch.multiprocessing asyncio joblib")
_add("subprocess", "subprocess os.system os.popen os.fork os.forkpty os.startfile pty pexpect commands")
_add(
    "network",
    "socket socketserver ssl urllib urllib3 http requests httpx aiohttp ftplib smtplib poplib imaplib nntplib "
    "telnetlib xmlrpc websocket websockets paramiko torch.hub huggingface_hub grpc zmq pycurl",
)
_add(
    "runtime_install",
    "pip ensurepip site.addsitedir site.main importlib.util.spec_from_file_location importlib.util.module_from_spec "
    "importlib.machinery importlib.reload imp zipimport sys.path sys.meta_path sys.path_hooks sys.path_importer_cache",
)
_add(
    "frame_or_gc_walk",
    "sys._getframe sys._current_frames sys._current_exceptions inspect.currentframe inspect.stack "
    "inspect.getouterframes inspect.getinnerframes inspect.trace gc.get_objects gc.get_referrers gc.get_referents "
    "traceback.walk_stack traceback.walk_tb traceback.extract_stack traceback.format_stack traceback.print_stack "
    "traceback.StackSummary",
)
_add(
    "dynamic_code",
    "exec eval compile __import__ importlib.__import__ types.FunctionType types.CodeType types.LambdaType marshal "
    "pickle.loads pickle.load pickle.Unpickler _pickle dill cloudpickle runpy code.interact code.InteractiveConsole "
    "code.InteractiveInterpreter codeop",
)
_add(
    "signal_tamper",
    "signal.signal signal.alarm signal.setitimer signal.pthread_kill signal.pthread_sigmask signal.siginterrupt "
    "signal.raise_signal signal.set_wakeup_fd atexit sys.settrace sys.setprofile sys.addaudithook sys.monitoring "
    "threading.settrace threading.setprofile threading.settrace_all_threads threading.setprofile_all_threads "
    "faulthandler.register faulthandler.dump_traceback_later faulthandler.cancel_dump_traceback_later "
    "faulthandler.disable os.kill os.killpg os._exit os.abort resource.setrlimit resource.prlimit",
)
_add("ctypes", "ctypes _ctypes cffi")
_add("process_memory", "ctypes.pythonapi ctypes.memmove ctypes.memset ctypes.string_at ctypes.wstring_at")
_add(
    "file_io",
    "open io.open io.FileIO os.open os.remove os.unlink os.rename os.renames os.replace os.rmdir os.removedirs "
    "os.mkdir os.makedirs os.truncate os.link os.symlink os.mkfifo shutil tempfile numpy.load numpy.save "
    "numpy.savez numpy.savez_compressed numpy.fromfile numpy.loadtxt numpy.savetxt numpy.genfromtxt numpy.memmap "
    "torch.load torch.save torch.from_file safetensors h5py mmap",
)
_add(
    "stream_creation",
    "torch.cuda.Stream torch.cuda.stream torch.cuda.streams.Stream torch.cuda.ExternalStream torch.cuda.set_stream "
    "torch.cuda.StreamContext",
)
_add(
    "untracked_stream",
    "torch.Stream torch._C.Stream torch._C._CudaStreamBase torch._utils._CudaStreamBase cupy.cuda.Stream "
    "cupy.cuda.ExternalStream",
)
_add(
    "profiler_use",
    "torch.profiler torch.autograd.profiler torch.autograd.profiler_legacy torch.autograd.profiler_util "
    "torch._C._autograd torch._C._profiler torch.cuda.profiler torch._C._kineto torch.autograd._profiler_enabled "
    "torch.autograd._enable_profiler torch.autograd._disable_profiler torch.autograd._prepare_profiler "
    "torch.autograd._supported_activities torch.autograd._kineto_step torch.autograd.ProfilerState "
    "torch.autograd.ProfilerConfig torch.autograd.ProfilerActivity triton.profiler cupti",
)
#: profiler modules whose import alone starts nothing, and annotations that only label a range in a trace
_PROFILER_QUIET_IMPORTS = frozenset({"torch.profiler", "torch.autograd.profiler", "torch.cuda.profiler"})
_PROFILER_ANNOTATIONS = ("record_function",)
_add("harness_import", "solbench")
_add(
    "result_channel",
    "sys.argv sys.orig_argv os.write os.writev os.pwrite os.pwritev os.fdopen os.dup os.dup2 os.close os.closerange "
    "os.read os.sendfile os.set_inheritable os.set_blocking",
)

_OS_PROCESS = re.compile(r"^os\.(exec\w*|spawn\w*|posix_spawn\w*|fork\w*|popen\w*)$")

#: heavy PyTorch compute (exact names, or prefixes ending with ".")
_TORCH_HEAVY = frozenset(
    "torch.matmul torch.mm torch.bmm torch.einsum torch.addmm torch.addbmm torch.baddbmm torch.addmv torch.mv "
    "torch.chain_matmul torch.tensordot torch.conv1d torch.conv2d torch.conv3d torch.conv_transpose1d "
    "torch.conv_transpose2d torch.conv_transpose3d torch.convolution torch.softmax torch.log_softmax "
    "torch.layer_norm torch.group_norm torch.batch_norm torch.instance_norm torch.rms_norm torch.cdist "
    "torch._scaled_mm torch.compile torch.Tensor.matmul torch.Tensor.mm torch.Tensor.bmm torch.Tensor.softmax".split()
)
_TORCH_HEAVY_PREFIXES = ("torch.nn.functional.", "torch.ops.aten.", "torch._C._nn.", "torch.linalg.", "torch.fft.",
                         "torch._C._VariableFunctions.")
_HEAVY_METHODS = frozenset({"matmul", "mm", "bmm", "softmax", "log_softmax", "einsum", "addmm", "baddbmm"})
_NN_NOT_COMPUTE = frozenset({"Module", "Parameter", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict",
                             "Buffer", "Identity"})

#: roots whose attributes must not be replaced
_PROTECTED_ROOTS = frozenset({"torch", "time", "triton", "builtins", "sys", "gc", "os", "solbench", "numpy",
                              "statistics", "timeit", "math", "random", "importlib", "threading", "signal",
                              "inspect", "functools", "ctypes"})

_FRAME_ATTRS = frozenset({"f_back", "f_globals", "f_locals", "f_builtins", "f_trace", "tb_frame", "gi_frame",
                          "cr_frame", "ag_frame", "__globals__", "__subclasses__"})

_PERSIST = re.compile(
    r"accessPolicyWindow|access_policy_window|hitRatio|hitProp|missProp|hit_ratio|hit_prop|"
    r"(?<!Reset)Persisting|PERSISTING|persisting_l2|StreamAttrValue|KernelNodeAttrValue|"
    r"AccessProperty|ACCESS_PROPERTY|StreamAttributeAccessPolicy|LaunchAttributeAccessPolicy"
)
#: a fast pre-filter for _PERSIST: one of these occurs wherever _PERSIST matches
_PERSIST_WORDS = ("ccessPolicy", "hitRatio", "hitProp", "missProp", "hit_ratio", "hit_prop", "ersisting",
                  "PERSISTING", "persisting_l2", "AttrValue", "AccessProperty", "ACCESS_PROPERTY")
_STREAM_NAME = re.compile(r"cudaStreamCreate|cuStreamCreate|hipStreamCreate|getStreamFromPool")
_PROFILER_NAME = re.compile(r"^cupti(?:$|[A-Z])|cudaProfiler(?:Start|Stop)|cuProfiler(?:Start|Stop)")  # identifiers
_PROFILER_WORDS = re.compile(r"\bcupti\b|\bcupti[A-Z]|cudaProfiler|cuProfiler")  # a file that may hold one
_LIBC = re.compile(r"\blibc\b|libc\.so|libc\.dylib|msvcrt")
_PROC = ("/proc/", "/dev/mem", "/dev/kmem", "/dev/port")
_CPP_HINTS = ("#include", "__global__", "__device__", "TORCH_LIBRARY", "PYBIND11_MODULE", "extern \"C\"")

_PTR_METHODS = frozenset({"data_ptr", "untyped_storage", "storage", "_cdata"})
_PTR_ATTRS = frozenset({"__cuda_array_interface__", "__array_interface__", "_cdata"})
_VALUE_METHODS = frozenset({"item", "tolist", "numpy", "tobytes", "sum", "mean", "max", "min", "norm", "std",
                            "var", "prod", "amax", "amin", "any", "all", "nansum", "abs"})
_VALUE_FUNCS = frozenset({"hash", "torch.sum", "torch.mean", "torch.max", "torch.min", "torch.norm",
                          "torch.std", "torch.prod", "torch.amax", "torch.amin", "torch.any", "torch.all",
                          "bytes", "numpy.asarray", "numpy.array"})
_SHAPE_METHODS = frozenset({"size", "stride", "numel", "dim"})
_TENSOR_ATTRS = frozenset({"shape", "dtype", "device", "data_ptr", "numel", "stride", "contiguous",
                           "is_contiguous", "element_size", "is_cuda", "untyped_storage", "storage_offset",
                           "ndim", "new_empty", "new_zeros", "copy_", "zero_", "fill_", "view", "reshape",
                           "transpose", "permute", "float", "half", "bfloat16", "clone", "detach"})
_CACHE_DECORATORS = frozenset({"functools.lru_cache", "functools.cache", "functools.cached_property"})
_DICT_FACTORIES = frozenset({"dict", "set", "collections.defaultdict", "collections.OrderedDict",
                             "collections.Counter", "weakref.WeakKeyDictionary", "weakref.WeakValueDictionary",
                             "weakref.WeakSet", "frozenset"})
_DECODERS = frozenset(
    "base64.b64decode base64.b32decode base64.b16decode base64.a85decode base64.b85decode base64.decodebytes "
    "base64.urlsafe_b64decode base64.standard_b64decode base64.decodestring base64.b32hexdecode zlib.decompress "
    "gzip.decompress lzma.decompress bz2.decompress codecs.decode binascii.unhexlify binascii.a2b_base64 "
    "binascii.a2b_hex binascii.a2b_uu binascii.a2b_qp bytes.fromhex bytearray.fromhex marshal.loads "
    "pickle.loads zipfile.ZipFile".split()
)
_PAYLOAD_SINKS = frozenset({"exec", "eval", "compile", "__import__", "importlib.import_module",
                            "types.FunctionType", "types.CodeType", "pickle.loads", "marshal.loads"})
_ATTR_BY_NAME = frozenset({"getattr", "setattr", "hasattr", "delattr", "operator.attrgetter",
                           "operator.methodcaller", "object.__getattribute__", "object.__setattr__",
                           "object.__delattr__", "type.__getattribute__", "type.__setattr__",
                           "inspect.getattr_static"})
_SETTERS = frozenset({"setattr", "delattr", "object.__setattr__", "object.__delattr__", "type.__setattr__"})
_STR_BUILDERS = frozenset({"join", "format", "replace", "decode", "lower", "upper", "swapcase", "title",
                           "capitalize", "strip", "lstrip", "rstrip", "translate", "encode", "format_map"})
_PRECISION_ATTRS = frozenset({"allow_tf32", "allow_fp16_reduced_precision_reduction",
                              "allow_bf16_reduced_precision_reduction", "allow_fp16_accumulation"})
#: where the same ATen operator is reachable from Python: forbidding ``torch.X`` forbids all of these
_TORCH_OP_NAMESPACES = ("torch", "torch.ops.aten", "torch._C._nn", "torch._C._VariableFunctions", "torch.Tensor",
                        "torch.nn.functional", "torch.special", "torch.linalg")
_BUILTIN_NAMES = frozenset(dir(_builtins_module)) | {"__builtins__"}
_CPP_EXTS = frozenset({".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".hh", ".hxx", ".inl", ".ipp",
                       ".tcc", ".cuinl"})
_PY_LANGS = frozenset({"pytorch", "python", "torch"})
_REF_NAME = re.compile(r"reference|(?:^|_)ref(?:_|$)", re.IGNORECASE)


def _rules_for(name: str) -> list[str]:
    """Every rule whose table entry is ``name`` or a dotted prefix of it."""
    out: list[str] = []
    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        hit = _NAME_RULES.get(".".join(parts[:i]))
        if hit:
            out.extend(hit)
    if _OS_PROCESS.match(name):
        out.append("subprocess")
    return out


def _is_heavy(name: str) -> bool:
    if name in _TORCH_HEAVY or name.startswith(_TORCH_HEAVY_PREFIXES):
        return True
    if name.startswith("torch.nn.") and name.count(".") == 2:
        leaf = name.rsplit(".", 1)[1]
        return leaf[:1].isupper() and leaf not in _NN_NOT_COMPUTE
    return False


def _one_line(text: str, limit: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _src(node: ast.AST) -> str:
    try:
        return _one_line(ast.unparse(node), 80)
    except Exception:  # pragma: no cover - unparse of odd trees
        return type(node).__name__


# --------------------------------------------------------------------------------------------
# Python


class _PyScanner:
    """One Python file: a pre-pass for imports, aliases and containers, then one recursive visit."""

    def __init__(self, path: str, tree: ast.Module, language: str, policy: Policy, offset: int, depth: int):
        self.path = path
        self.tree = tree
        self.dsl = language not in _PY_LANGS
        self.policy = policy
        self.offset = offset
        self.depth = depth
        self.findings: list[Finding] = []
        self.aliases: dict[str, str] = {}
        self.shadowed: set[str] = set()
        self.dict_names: set[str] = set()
        self.dict_attrs: set[str] = set()
        self.global_names: set[str] = set()
        self.stored_ptr: set[str] = set()
        self.cached_funcs: set[str] = set()
        self.module_defs: dict[str, ast.AST] = {}
        self.uses_ctypes = False
        self.cur: ast.AST = tree
        self.order, self.members = _index(tree)
        self._assign_maps: dict[int, dict[str, list[ast.AST]]] = {}
        self._tensor_maps: dict[int, set[str]] = {}
        self._heavy_helpers: set[str] | None = None
        self.maybe_idents = True
        forbid = {f for f in policy.forbid_calls if "::" not in f}
        self.forbid_plain = {f for f in forbid if "." not in f and not f.endswith("*")}
        exact = {f for f in forbid if not f.endswith("*") and "." in f}
        for f in list(exact):
            if f.startswith("torch."):
                leaf = f.rsplit(".", 1)[1]
                exact.update(f"{ns}.{leaf}" for ns in _TORCH_OP_NAMESPACES)
        self.forbid_exact = exact
        self.forbid_prefix = tuple(f.rstrip("*") for f in forbid if f.endswith("*"))
        self.forbid_methods = {f[len("torch."):] for f in exact if f.startswith("torch.") and f.count(".") == 1}
        self.forbid_matmul = bool(exact & {"torch.matmul", "torch.mm", "torch.bmm"})

    # ---- findings

    def add(self, rule: str, node: ast.AST | int, message: str) -> None:
        line = node if isinstance(node, int) else getattr(node, "lineno", 1)
        self.findings.append(Finding(rule, RULES[rule].severity, self.path, line + self.offset, _one_line(message, 160)))

    # ---- pre-pass

    def prepass(self) -> None:
        assigns: list[tuple[ast.AST, ast.AST]] = []
        for node in self.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.module_defs[node.name] = node
                if node.name in _BUILTIN_NAMES:
                    self.shadowed.add(node.name)
        self.funcs: list[ast.AST] = []
        for node in self.order:
            t = type(node)
            if t is ast.FunctionDef or t is ast.AsyncFunctionDef:
                if node.decorator_list:
                    self.funcs.append(node)
            elif t is ast.Import:
                for a in node.names:
                    if a.asname:
                        self.aliases[a.asname] = a.name
                    else:
                        root = a.name.split(".")[0]
                        self.aliases[root] = root
                    if a.name.split(".")[0] in ("ctypes", "cffi", "_ctypes"):
                        self.uses_ctypes = True
            elif t is ast.ImportFrom:
                if node.level or not node.module:
                    continue
                if node.module.split(".")[0] in ("ctypes", "cffi", "_ctypes"):
                    self.uses_ctypes = True
                for a in node.names:
                    if a.name != "*":
                        self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
            elif t is ast.Assign:
                for tgt in node.targets:
                    assigns.append((tgt, node.value))
            elif t is ast.AnnAssign and node.value is not None:
                assigns.append((node.target, node.value))
                ann = _src(node.annotation).lower()
                if "dict" in ann or "mapping" in ann or "set[" in ann:
                    self._note_container(node.target)
            elif t is ast.Global or t is ast.Nonlocal:
                self.global_names.update(node.names)
            elif t is ast.NamedExpr:
                assigns.append((node.target, node.value))
        # aliases by assignment (two rounds so chains resolve), then containers and stored pointers
        for _ in range(2):
            roots = {v.split(".")[0] for v in self.aliases.values()} | _PROTECTED_ROOTS
            for tgt, val in assigns:
                if isinstance(tgt, ast.Name) and isinstance(val, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)):
                    r = self.resolve(val)
                    if r and tgt.id not in self.aliases and (r.split(".")[0] in roots or r in _BUILTIN_NAMES):
                        if isinstance(val, ast.Call) and not self._is_module_call(val):
                            continue
                        self.aliases[tgt.id] = r
        for tgt, val in assigns:
            if isinstance(val, (ast.Dict, ast.DictComp, ast.Set, ast.SetComp)):
                self._note_container(tgt)
            elif isinstance(val, ast.Call):
                r = self.resolve(val.func)
                if r in _DICT_FACTORIES:
                    self._note_container(tgt)
                elif r in _CACHE_DECORATORS or (
                    isinstance(val.func, ast.Call) and self.resolve(val.func.func) in _CACHE_DECORATORS
                ):
                    if isinstance(tgt, ast.Name):
                        self.cached_funcs.add(tgt.id)
            if isinstance(tgt, ast.Attribute) or (isinstance(tgt, ast.Name) and tgt.id in self.global_names):
                if "pointer" in self._shallow_kinds(val):
                    self.stored_ptr.add(tgt.attr if isinstance(tgt, ast.Attribute) else tgt.id)
        for node in self.funcs:
            for d in node.decorator_list:
                f = d.func if isinstance(d, ast.Call) else d
                if self.resolve(f) in _CACHE_DECORATORS:
                    self.cached_funcs.add(node.name)

    def _is_module_call(self, call: ast.Call) -> bool:
        r = self.resolve(call.func)
        return r in ("getattr", "importlib.import_module", "__import__")

    def _note_container(self, tgt: ast.AST) -> None:
        if isinstance(tgt, ast.Name):
            self.dict_names.add(tgt.id)
        elif isinstance(tgt, ast.Attribute):
            self.dict_attrs.add(tgt.attr)

    # ---- name resolution

    def resolve(self, node: ast.AST) -> str | None:
        t = type(node)
        if t is ast.Name:
            n = node.id
            if n in self.aliases:
                return _norm(self.aliases[n])
            if n in _BUILTIN_NAMES and n not in self.shadowed:
                return _norm(n)
            return None
        if t is ast.Attribute:
            base = self.resolve(node.value)
            return _norm(f"{base}.{node.attr}") if base else None
        if t is ast.Call:
            f = self.resolve(node.func)
            if f == "getattr" and len(node.args) >= 2:
                base = self.resolve(node.args[0])
                name = self.fold(node.args[1])
                return _norm(f"{base}.{name}") if base and name else None
            if f in ("importlib.import_module", "__import__") and node.args:
                return self.fold(node.args[0])
            if f == "vars" and len(node.args) == 1:
                base = self.resolve(node.args[0])
                return f"{base}.__dict__" if base else None
            return None
        if t is ast.Subscript:
            base = self.resolve(node.value)
            if base is None and isinstance(node.value, ast.Call) and self.resolve(node.value.func) == "globals":
                key = self.fold(node.slice)
                return self.resolve(ast.Name(id=key)) if key else None
            if base in ("sys.modules",):
                return self.fold(node.slice)
            if base and (base.endswith(".__dict__") or base == "builtins"):
                key = self.fold(node.slice)
                root = base[: -len(".__dict__")] if base.endswith(".__dict__") else base
                return _norm(f"{root}.{key}") if key else None
            return None
        return None

    # ---- constant folding of string expressions

    def fold(self, node: ast.AST, depth: int = 0) -> str | None:
        if depth > 6:
            return None
        t = type(node)
        if t is ast.Constant:
            return node.value if isinstance(node.value, str) else None
        if t is ast.BinOp and isinstance(node.op, ast.Add):
            a, b = self.fold(node.left, depth + 1), self.fold(node.right, depth + 1)
            return a + b if a is not None and b is not None else None
        if t is ast.JoinedStr:
            parts = []
            for v in node.values:
                p = self.fold(v.value if isinstance(v, ast.FormattedValue) else v, depth + 1)
                if p is None:
                    return None
                parts.append(p)
            return "".join(parts)
        if t is ast.Subscript and isinstance(node.slice, ast.Slice):
            s = self.fold(node.value, depth + 1)
            sl = node.slice
            try:
                bounds = [None if x is None else ast.literal_eval(x) for x in (sl.lower, sl.upper, sl.step)]
                return s[slice(*bounds)] if s is not None else None
            except Exception:
                return None
        if t is ast.Call:
            f = node.func
            if isinstance(f, ast.Name) and f.id == "chr" and len(node.args) == 1:
                try:
                    return chr(ast.literal_eval(node.args[0]))
                except Exception:
                    return None
            if isinstance(f, ast.Name) and f.id in ("reversed", "str") and len(node.args) == 1:
                s = self.fold(node.args[0], depth + 1)
                return s[::-1] if (s is not None and f.id == "reversed") else s
            if isinstance(f, ast.Attribute) and f.attr == "join" and len(node.args) == 1:
                sep = self.fold(f.value, depth + 1)
                arg = node.args[0]
                if sep is None:
                    return None
                if isinstance(arg, (ast.List, ast.Tuple)):
                    parts = [self.fold(e, depth + 1) for e in arg.elts]
                    return None if None in parts else sep.join(parts)
                s = self.fold(arg, depth + 1)
                return sep.join(s) if s is not None else None
            if isinstance(f, ast.Attribute) and f.attr in ("replace", "lower", "upper", "strip", "format"):
                s = self.fold(f.value, depth + 1)
                args = [self.fold(a, depth + 1) for a in node.args]
                if s is None or None in args or node.keywords:
                    return None
                try:
                    return getattr(s, f.attr)(*args)
                except Exception:
                    return None
        if t is ast.Name:
            vals = self.assigned(node.id)
            if len(vals) == 1:
                return self.fold(vals[0], depth + 1)
        return None

    def built(self, node: ast.AST, depth: int = 0) -> bool:
        """Whether a string expression is assembled at run time (not a plain constant)."""
        if depth > 4:
            return False
        t = type(node)
        if t is ast.Constant or t is ast.Attribute:
            return False
        if t is ast.BinOp:
            return isinstance(node.op, (ast.Add, ast.Mod, ast.Mult))
        if t is ast.JoinedStr:
            return True
        if t is ast.Subscript:
            return isinstance(node.slice, ast.Slice) or self.built(node.value, depth + 1)
        if t is ast.Call:
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr in _STR_BUILDERS:
                return True
            r = self.resolve(f)
            return r in ("chr", "reversed", "bytes", "str", "bytearray") or (r in _DECODERS if r else False)
        if t is ast.Name:
            return any(self.built(v, depth + 1) for v in self.assigned(node.id))
        return False

    # ---- scope helpers

    def _scope_map(self, scope: ast.AST) -> dict[str, list[ast.AST]]:
        key = id(scope)
        m = self._assign_maps.get(key)
        if m is not None:
            return m
        m = {}
        for n in self.members.get(key, ()):
            t = type(n)
            if t is ast.Assign:
                for tgt in n.targets:
                    _bind(m, tgt, n.value)
            elif t in (ast.AnnAssign, ast.AugAssign, ast.NamedExpr):
                if n.value is not None:
                    _bind(m, n.target, n.value)
            elif t in (ast.For, ast.AsyncFor, ast.comprehension):
                _bind(m, n.target, n.iter)
            elif t is ast.withitem:
                if n.optional_vars is not None:
                    _bind(m, n.optional_vars, n.context_expr)
        self._assign_maps[key] = m
        return m

    def assigned(self, name: str) -> list[ast.AST]:
        scope = self.cur
        vals = self._scope_map(scope).get(name)
        if vals is None and scope is not self.tree:
            vals = self._scope_map(self.tree).get(name)
        return vals or []

    def tensor_names(self, scope: ast.AST | None = None) -> set[str]:
        scope = scope or self.cur
        key = id(scope)
        s = self._tensor_maps.get(key)
        if s is not None:
            return s
        s = set()
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for a in scope.args.args + scope.args.kwonlyargs + scope.args.posonlyargs:
                if a.annotation is not None and _src(a.annotation).endswith("Tensor"):
                    s.add(a.arg)
        for n in self.members.get(key, ()):
            if type(n) is ast.Attribute and n.attr in _TENSOR_ATTRS and type(n.value) is ast.Name:
                s.add(n.value.id)
        self._tensor_maps[key] = s
        return s

    # ---- key analysis for the cache rules

    def kinds(self, node: ast.AST, depth: int = 0) -> set[str]:
        """What a key expression is built from: 'pointer', 'tensor', 'value', 'shape'."""
        out: set[str] = set()
        self._kinds(node, depth, out, self.tensor_names())
        return out

    def _kinds(self, node: ast.AST, depth: int, out: set[str], tensors: set[str]) -> None:
        t = type(node)
        if t is ast.Call:
            f = node.func
            if isinstance(f, ast.Attribute):
                a = f.attr
                if a in _PTR_METHODS:
                    out.add("pointer")
                elif a in _VALUE_METHODS:
                    out.add("value")
                elif a in _SHAPE_METHODS:
                    out.add("shape")
                if not isinstance(f.value, ast.Name):
                    self._kinds(f.value, depth, out, tensors)
            else:
                if (type(f) is ast.Name and depth < 3 and f.id in self.module_defs
                        and not isinstance(self.module_defs[f.id], ast.ClassDef)):
                    self._helper_kinds(self.module_defs[f.id], depth, out)
                r = self.resolve(f)
                if r == "id" or r == "ctypes.addressof":
                    out.add("pointer")
                    return
                if r in _VALUE_FUNCS or (r and r.startswith("hashlib.")):
                    out.add("value")
                    return
            for a in node.args:
                self._kinds(a, depth, out, tensors)
            for k in node.keywords:
                self._kinds(k.value, depth, out, tensors)
            return
        if t is ast.Attribute:
            if node.attr == "shape":
                out.add("shape")
            elif node.attr in _PTR_ATTRS:
                out.add("pointer")
            if not isinstance(node.value, ast.Name):
                self._kinds(node.value, depth, out, tensors)
            return
        if t is ast.Name:
            if node.id in tensors:
                out.add("tensor")
            if depth < 3:
                for v in self.assigned(node.id):
                    if v is not node:
                        self._kinds(v, depth + 1, out, tensors)
            return
        if t in (ast.Lambda, ast.FunctionDef):
            return
        for child in ast.iter_child_nodes(node):
            self._kinds(child, depth, out, tensors)

    def _helper_kinds(self, fn: ast.AST, depth: int, out: set[str]) -> None:
        """What a module-level helper's return values are built from (``key = _fingerprint(x)``)."""
        saved = self.cur
        self.cur = fn
        try:
            tensors = self.tensor_names(fn)
            for n in self.members.get(id(fn), ()):
                if type(n) is ast.Return and n.value is not None:
                    self._kinds(n.value, depth + 1, out, tensors)
        finally:
            self.cur = saved

    def _shallow_kinds(self, node: ast.AST) -> set[str]:
        out: set[str] = set()
        for n in ast.walk(node):
            if isinstance(n, ast.Call):
                if isinstance(n.func, ast.Attribute) and n.func.attr in _PTR_METHODS:
                    out.add("pointer")
                elif isinstance(n.func, ast.Name) and n.func.id == "id":
                    out.add("pointer")
        return out

    def is_container(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.dict_names
        if isinstance(node, ast.Attribute):
            return node.attr in self.dict_attrs
        return False

    def check_key(self, key: ast.AST, container: ast.AST, anchor: ast.AST, how: str) -> None:
        ks = self.kinds(key)
        if not ks:
            return
        dictish = self.is_container(container)
        if "pointer" in ks:
            self.add("output_cache_by_pointer", anchor, f"{how} keyed on a tensor address or identity: {_src(key)}")
        elif "tensor" in ks and dictish:
            self.add("output_cache_by_pointer", anchor, f"{how} keyed on a tensor object (hashed by identity): {_src(key)}")
        if "value" in ks and dictish:
            self.add("value_cache", anchor, f"{how} keyed on tensor values: {_src(key)}")
        elif "shape" in ks and dictish:
            self.add("shape_cache", anchor, f"{how} keyed on shapes: {_src(key)}")

    # ---- the visit

    def run(self) -> list[Finding]:
        self.prepass()
        handlers = self._handlers()
        for node in self.order:
            h = handlers.get(type(node))
            if h is not None:
                self.cur = node._sb_scope
                h(node)
        return self.findings

    def _handlers(self) -> dict[type, object]:
        out = {}
        for name in dir(self):
            if name.startswith("v_"):
                t = getattr(ast, name[2:], None)
                if t is not None:
                    out[t] = getattr(self, name)
        return out

    def check_name(self, name: str, node: ast.AST, what: str = "uses") -> None:
        for rule in _rules_for(name):
            if rule == "profiler_use" and ((what == "imports" and name in _PROFILER_QUIET_IMPORTS)
                                           or name.rsplit(".", 1)[-1] in _PROFILER_ANNOTATIONS):
                continue  # `from torch.profiler import record_function` and its ranges start no profiler
            self.add(rule, node, f"{what} {name}")
        if self.forbid_exact or self.forbid_prefix:
            hit = name in self.forbid_exact or (self.forbid_prefix and name.startswith(self.forbid_prefix))
            if not hit and "." in name:
                parts = name.split(".")
                hit = any(".".join(parts[:i]) in self.forbid_exact for i in range(2, len(parts)))
            if hit:
                self.add("forbidden_call", node, f"uses {name}, which this problem forbids")

    def v_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.check_name(a.name, node, "imports")
            self._check_ident(a.asname or a.name.rsplit(".", 1)[-1], node)

    def v_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            return
        self.check_name(node.module, node, "imports")
        for a in node.names:
            if a.name != "*":
                self.check_name(f"{node.module}.{a.name}", node, "imports")
                self._check_ident(a.name, node)

    def _check_ident(self, ident: str, node: ast.AST) -> None:
        if ident in self.forbid_plain:
            self.add("forbidden_call", node, f"uses {ident}, which this problem forbids")
        if not self.maybe_idents:
            return
        if _PERSIST.search(ident):
            self.add("persisting_l2", node, f"persisting-L2 control {ident}")
        if _STREAM_NAME.search(ident):
            self.add("untracked_stream", node, f"creates a stream the harness cannot track via {ident}")
        if _PROFILER_NAME.search(ident):
            self.add("profiler_use", node, f"profiler control {ident}")

    def v_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            if not _chain_inner(node):
                r = self.resolve(node)
                if r:
                    self.check_name(r, node)
            self._check_ident(node.id, node)

    def v_Attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        if attr in _FRAME_ATTRS:
            self.add("frame_or_gc_walk", node, f"reaches {attr}")
        elif attr == "__getattribute__":
            self.add("name_obfuscation", node, "uses __getattribute__")
        elif attr == "from_address":
            self.add("process_memory", node, "reads memory at a raw address (from_address)")
        elif attr in ("_make_subclass", "_make_wrapper_subclass", "as_subclass"):
            self.add("tensor_subclass", node, f"makes a tensor subclass ({attr})")
        self._check_ident(attr, node)
        if not _chain_inner(node):  # the outermost link of a dotted chain checks all its prefixes
            r = self.resolve(node)
            if r:
                self.check_name(r, node)

    def v_Constant(self, node: ast.Constant) -> None:
        v = node.value
        if isinstance(v, bytes):
            try:
                v = v.decode("latin-1")
            except Exception:  # pragma: no cover
                return
        if not isinstance(v, str) or not v:
            return
        for p in _PROC:
            if p in v:
                self.add("process_memory", node, f"string names {p}: {v[:60]!r}")
                break
        if self.uses_ctypes and _LIBC.search(v):
            self.add("process_memory", node, f"loads libc through ctypes/cffi: {v[:60]!r}")
        if "\n" in v and any(h in v for h in _CPP_HINTS):
            # embedded C++/CUDA (load_inline, cupy.RawKernel): token-scan it in place
            self.findings.extend(_scan_cpp(self.path, v, self.policy, node.lineno - 1 + self.offset))
            return
        if _PERSIST.search(v):
            self.add("persisting_l2", node, f"persisting-L2 control named in a string: {v[:60]!r}")

    # assignments: monkeypatching, precision flags

    def _check_target(self, tgt: ast.AST, value: ast.AST | None, anchor: ast.AST) -> None:
        if isinstance(tgt, (ast.Tuple, ast.List)):
            for e in tgt.elts:
                self._check_target(e, None, anchor)
            return
        if isinstance(tgt, ast.Starred):
            self._check_target(tgt.value, None, anchor)
            return
        if isinstance(tgt, ast.Attribute):
            base = self.resolve(tgt.value)
            full = f"{base}.{tgt.attr}" if base else tgt.attr
            if tgt.attr == "__code__":
                self.add("dynamic_code", anchor, f"replaces a function's code: {_src(tgt)}")
            if tgt.attr == "__class__":
                self.add("tensor_subclass", anchor, f"swaps an object's class: {_src(tgt)}")
            if tgt.attr in _PRECISION_ATTRS and not _falsy(value):
                self.add("precision_flags", anchor, f"enables reduced precision: {_src(tgt)}")
                return
            if tgt.attr == "fp32_precision" and value is not None and self.fold(value) not in (None, "ieee", "highest"):
                self.add("precision_flags", anchor, f"enables reduced precision: {_src(tgt)}")
                return
            if base and base.split(".")[0] in _PROTECTED_ROOTS:
                parts = set(base.split("."))
                if (parts & {"config", "backends", "_config"}) and _literal(value):
                    return  # setting a library's configuration value, not replacing code
                if base.startswith("os.environ"):
                    return
                self.add("monkeypatching", anchor, f"assigns to {full}")
            elif isinstance(tgt.value, ast.Call) and self.resolve(tgt.value.func) == "type":
                self.add("monkeypatching", anchor, f"assigns to a class attribute through type(): {_src(tgt)}")
            elif isinstance(tgt.value, ast.Attribute) and tgt.value.attr == "__class__":
                self.add("monkeypatching", anchor, f"assigns to a class attribute through __class__: {_src(tgt)}")
        elif isinstance(tgt, ast.Subscript):
            base = self.resolve(tgt.value)
            if base == "sys.modules":
                self.add("monkeypatching", anchor, f"writes into sys.modules: {_src(tgt)}")
            elif base and (base == "builtins" or base.endswith(".__dict__")) and base.split(".")[0] in _PROTECTED_ROOTS:
                self.add("monkeypatching", anchor, f"writes into {base}: {_src(tgt)}")
            elif base == "sys.path":
                pass  # reported as runtime_install by the reference itself

    def v_Assign(self, node: ast.Assign) -> None:
        for tgt in node.targets:
            self._check_target(tgt, node.value, node)

    def v_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_target(node.target, node.value, node)
        if self.resolve(node.target) == "sys.path":
            self.add("runtime_install", node, "extends sys.path")

    def v_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._check_target(node.target, node.value, node)

    def v_Delete(self, node: ast.Delete) -> None:
        for tgt in node.targets:
            self._check_target(tgt, None, node)

    # scopes, decorators, classes

    def v_FunctionDef(self, node: ast.FunctionDef) -> None:
        if self.dsl:
            for d in node.decorator_list:
                r = self.resolve(d.func if isinstance(d, ast.Call) else d)
                if r and _is_heavy(r):
                    self.add("torch_compute_in_dsl", d, f"decorates {node.name} with {r} in a non-PyTorch solution")
        if node.name in ("__torch_function__", "__torch_dispatch__"):
            self.add("tensor_subclass", node, f"defines {node.name}")
        if node.name in self.cached_funcs and any(
            self.resolve(d.func if isinstance(d, ast.Call) else d) in _CACHE_DECORATORS for d in node.decorator_list
        ):
            tensors = self.tensor_names(node)
            for a in node.args.args + node.args.kwonlyargs + node.args.posonlyargs:
                if a.arg in tensors and a.arg not in ("self", "cls"):
                    self.add("output_cache_by_pointer", node,
                             f"{node.name} is memoized on tensor parameter {a.arg!r} (hashed by identity)")
                    break

    v_AsyncFunctionDef = v_FunctionDef

    def v_ClassDef(self, node: ast.ClassDef) -> None:
        for b in node.bases:
            r = self.resolve(b)
            if r in ("torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase", "torch.nn.Parameter"):
                self.add("tensor_subclass", node, f"class {node.name} subclasses {r}")

    # calls

    def v_Call(self, node: ast.Call) -> None:
        f = node.func
        r = self.resolve(f)
        args = node.args
        if r:
            self._call_by_name(node, r, args)
        if isinstance(f, ast.Attribute):
            self._call_by_method(node, f, r)
        elif isinstance(f, ast.Name) and f.id in self.cached_funcs:
            for a in list(args) + [k.value for k in node.keywords]:
                ks = self.kinds(a)
                if "pointer" in ks or "tensor" in ks:
                    self.add("output_cache_by_pointer", node, f"memoized {f.id}() called with a tensor or its address")
                    break
                if "value" in ks:
                    self.add("value_cache", node, f"memoized {f.id}() called with tensor values")
                    break
        if self.dsl and r and _is_heavy(r):
            self.add("torch_compute_in_dsl", node, f"calls {r} in a {'non-PyTorch'} solution")

    def _call_by_name(self, node: ast.Call, r: str, args: list[ast.AST]) -> None:
        if r in ("exec", "eval", "compile"):
            if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
                self._scan_embedded(args[0])
        if r in _PAYLOAD_SINKS:
            for a in list(args) + [k.value for k in node.keywords]:
                dec = self._decoder_in(a, 0)
                if dec:
                    self.add("obfuscated_payload", node, f"{r}() of data decoded by {dec}")
                    break
        if r in ("importlib.import_module", "__import__", "importlib.__import__"):
            if args and not isinstance(args[0], ast.Constant):
                self.add("dynamic_code", node, f"{r}() with a computed module name: {_src(args[0])}")
                if self.built(args[0]):
                    self.add("name_obfuscation", node, f"module name assembled at run time: {_src(args[0])}")
            mod = self.fold(args[0]) if args else None
            if mod:
                self.check_name(mod, node, "imports")
        if r in _ATTR_BY_NAME:
            idx = 0 if r.startswith("operator.") else 1
            name_arg = args[idx] if len(args) > idx else None
            if name_arg is not None and self.built(name_arg):
                self.add("name_obfuscation", node, f"{r}() with a name assembled at run time: {_src(name_arg)}")
            if r in _SETTERS and args:
                base = self.resolve(args[0])
                if base and base.split(".")[0] in _PROTECTED_ROOTS:
                    self.add("monkeypatching", node, f"{r}() on {base}")
                elif isinstance(args[0], ast.Call) and self.resolve(args[0].func) == "type":
                    self.add("monkeypatching", node, f"{r}() on a class through type()")
            if r == "getattr" and len(args) >= 2:
                full = self.resolve(node)
                if full:
                    self.check_name(full, node)
        if r in ("sys.modules.update", "sys.modules.setdefault", "sys.modules.pop", "sys.modules.__setitem__",
                 "sys.modules.clear", "sys.modules.popitem", "sys.modules.__delitem__"):
            self.add("monkeypatching", node, f"{r}()")
        elif r.endswith((".__dict__.update", ".__dict__.__setitem__", ".__dict__.setdefault", ".__dict__.pop")):
            if r.split(".")[0] in _PROTECTED_ROOTS:
                self.add("monkeypatching", node, f"{r}()")
        if r == "torch.set_float32_matmul_precision" and args and self.fold(args[0]) != "highest":
            self.add("precision_flags", node, f"torch.set_float32_matmul_precision({_src(args[0])})")
        if r.startswith(("ctypes.", "cffi.")) or r in ("ctypes", "cffi"):
            if r.endswith(("CDLL", "PyDLL", "LoadLibrary", "dlopen", "find_library")):
                a0 = args[0] if args else None
                if a0 is not None and isinstance(a0, ast.Constant) and a0.value is None:
                    self.add("process_memory", node, f"{r}(None) exposes libc and the process's own symbols")
                elif a0 is not None and r.endswith("find_library") and self.fold(a0) == "c":
                    self.add("process_memory", node, "ctypes.util.find_library('c') locates libc")
        if r.startswith("subprocess.") or r in ("os.system", "os.popen") or _OS_PROCESS.match(r):
            words = " ".join(c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and isinstance(c.value, str))
            if re.search(r"\b(pip3?|conda|uv|mamba|easy_install)\b", words) and "install" in words:
                self.add("runtime_install", node, f"installs packages through {r}")
        if r in ("open", "io.open", "io.FileIO") and args and isinstance(args[0], ast.Constant) \
                and isinstance(args[0].value, int):
            self.add("result_channel", node, f"{r}() on raw file descriptor {args[0].value}")
        if r in ("open", "io.open", "os.open"):
            target = self.fold(args[0]) if args else None
            mode = self.fold(args[1]) if len(args) > 1 else None
            for k in node.keywords:
                if k.arg == "mode":
                    mode = self.fold(k.value)
            if target and _is_code_file(target) and mode and any(c in mode for c in "wax+"):
                self.add("runtime_install", node, f"writes a code file {target!r}")
        self._forbid_plain_args(node, r)

    def _forbid_plain_args(self, node: ast.Call, r: str) -> None:
        if self.forbid_plain and r in ("getattr", "ctypes.CDLL") and len(node.args) >= 2:
            n = self.fold(node.args[1])
            if n in self.forbid_plain:
                self.add("forbidden_call", node, f"uses {n}, which this problem forbids")

    def _call_by_method(self, node: ast.Call, f: ast.Attribute, r: str | None) -> None:
        a = f.attr
        if r is None:
            if self.dsl and a in _HEAVY_METHODS:
                self.add("torch_compute_in_dsl", node, f"calls .{a}() in a non-PyTorch solution")
            if a in self.forbid_methods:
                self.add("forbidden_call", node, f"calls .{a}(), the method form of torch.{a}, which this problem forbids")
        if a in ("write_text", "write_bytes") or (a == "open" and r is None):
            consts = [c.value for c in ast.walk(f.value) if isinstance(c, ast.Constant) and isinstance(c.value, str)]
            mode = self.fold(node.args[0]) if (a == "open" and node.args) else None
            writing = a != "open" or (mode is not None and any(c in mode for c in "wax+"))
            if writing and any(_is_code_file(c) for c in consts):
                self.add("runtime_install", node, f"writes a code file: {_src(f.value)}")
        if r is None and a in ("read_text", "write_text", "read_bytes", "write_bytes", "unlink", "tofile",
                                "rmdir", "touch", "rename", "replace") and not (a == "replace" and node.args and
                                                                            isinstance(node.args[0], ast.Constant)):
            if a in ("read_text", "write_text", "read_bytes", "write_bytes", "tofile", "unlink", "touch"):
                self.add("file_io", node, f"file access via .{a}()")
        if a in ("get", "setdefault", "pop", "__getitem__", "__setitem__", "__contains__") and node.args:
            self.check_key(node.args[0], f.value, node, f"cache .{a}()")
        if a in ("equal", "allclose") or r in ("torch.equal", "torch.allclose"):
            operands = list(node.args) + ([f.value] if r is None else [])
            for o in operands:
                if isinstance(o, ast.Attribute) and self.resolve(o) is None:
                    if isinstance(o.value, ast.Name) and o.value.id in ("self", "cls"):
                        self.add("value_cache", node, f"compares an input with a stored tensor {_src(o)}")
                        break
                if isinstance(o, ast.Name) and o.id in self.global_names:
                    self.add("value_cache", node, f"compares an input with a stored tensor {o.id}")
                    break

    def _decoder_in(self, node: ast.AST, depth: int) -> str | None:
        for n in ast.walk(node):
            if isinstance(n, ast.Call):
                r = self.resolve(n.func)
                if r in _DECODERS:
                    return r
                if isinstance(n.func, ast.Attribute) and n.func.attr in ("fromhex", "decompress", "b64decode"):
                    return n.func.attr
            elif isinstance(n, ast.Name) and depth < 3:
                for v in self.assigned(n.id):
                    d = self._decoder_in(v, depth + 1)
                    if d:
                        return d
        return None

    def _scan_embedded(self, const: ast.Constant) -> None:
        if self.depth >= 3 or len(const.value) > 200_000:
            return
        try:
            tree = ast.parse(const.value)
        except (SyntaxError, ValueError):
            return
        sub = _PyScanner(self.path, tree, "pytorch" if not self.dsl else "triton", self.policy,
                         self.offset + const.lineno - 1, self.depth + 1)
        sub.maybe_idents = self.maybe_idents
        self.findings.extend(sub.run())

    # subscripts, comparisons, dict displays: the cache rules and name tricks

    def v_Subscript(self, node: ast.Subscript) -> None:
        v = node.value
        if isinstance(v, ast.Call):
            fr = self.resolve(v.func)
            if fr in ("globals", "locals", "vars"):
                self.add("name_obfuscation", node, f"looks names up through {fr}()[...]: {_src(node)}")
        elif isinstance(v, ast.Attribute) and v.attr == "__dict__":
            if self.resolve(v.value) or (isinstance(v.value, ast.Call) and self.resolve(v.value.func) == "type"):
                self.add("name_obfuscation", node, f"looks names up through __dict__[...]: {_src(node)}")
        base = self.resolve(v)
        if base == "builtins":
            self.add("name_obfuscation", node, f"looks names up through __builtins__[...]: {_src(node)}")
        elif base == "sys.modules" and not isinstance(node.slice, ast.Constant) and self.built(node.slice):
            self.add("name_obfuscation", node, f"sys.modules lookup with an assembled name: {_src(node)}")
        if not isinstance(node.slice, ast.Slice):
            self.check_key(node.slice, v, node, "subscript")

    def v_Compare(self, node: ast.Compare) -> None:
        left = node.left
        for op, right in zip(node.ops, node.comparators):
            if isinstance(op, (ast.In, ast.NotIn)):
                self.check_key(left, right, node, "membership test")
            elif isinstance(op, (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)):
                for a, b in ((left, right), (right, left)):
                    if self._stored_compare(a, b, op, node):
                        break
            left = right

    def _stored_compare(self, a: ast.AST, b: ast.AST, op: ast.cmpop, node: ast.AST) -> bool:
        """``x.data_ptr() == self._last_ptr`` or ``x is self._last_x``: a one-entry cache by identity."""
        if isinstance(b, ast.Attribute):
            if self.resolve(b) is not None:
                return False
            stored = (isinstance(b.value, ast.Name) and b.value.id in ("self", "cls")) or b.attr in self.stored_ptr
        elif isinstance(b, ast.Name):
            stored = b.id in self.global_names
        else:
            return False
        if not stored:
            return False
        if "pointer" in self.kinds(a):
            self.add("output_cache_by_pointer", node, f"compares a tensor address with a stored one: {_src(node)}")
            return True
        if isinstance(op, (ast.Is, ast.IsNot)) and isinstance(a, ast.Name) and a.id in self.tensor_names():
            self.add("output_cache_by_pointer", node, f"compares a tensor's identity with a stored one: {_src(node)}")
            return True
        return False

    def v_Dict(self, node: ast.Dict) -> None:
        for k in node.keys:
            if k is not None:
                ks = self.kinds(k)
                if "pointer" in ks:
                    self.add("output_cache_by_pointer", node, f"dict keyed on a tensor address or identity: {_src(k)}")
                elif "value" in ks:
                    self.add("value_cache", node, f"dict keyed on tensor values: {_src(k)}")

    def v_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult):
            if self.dsl:
                self.add("torch_compute_in_dsl", node, "uses the @ operator in a non-PyTorch solution")
            if self.forbid_matmul:
                self.add("forbidden_call", node, "uses the @ operator, i.e. torch.matmul, which this problem forbids")

    # try/except fallbacks

    def v_Try(self, node: ast.Try) -> None:
        blocks = [h.body for h in node.handlers] + [node.orelse]
        for body in blocks:
            for stmt in body:
                hit = self._fallback_in(stmt)
                if hit:
                    self.add("reference_fallback", hit[0], f"exception path computes with {hit[1]}")
                    break

    v_TryStar = v_Try

    def _fallback_in(self, stmt: ast.AST) -> tuple[ast.AST, str] | None:
        helpers = self._helpers()
        for n in ast.walk(stmt):
            if isinstance(n, ast.Call):
                r = self.resolve(n.func)
                if r and _is_heavy(r) and r != "torch.compile":
                    return n, r
                f = n.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
                if name:
                    if r is None and isinstance(f, ast.Attribute) and name in _HEAVY_METHODS:
                        return n, f".{name}()"
                    if _REF_NAME.search(name):
                        return n, f"{name}()"
                    if isinstance(f, ast.Name) and name in helpers:
                        return n, f"{name}() (which calls PyTorch compute)"
            elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult):
                return n, "the @ operator"
        return None

    def _helpers(self) -> set[str]:
        """Module-level functions whose bodies call heavy PyTorch compute directly."""
        if self._heavy_helpers is None:
            self._heavy_helpers = set()
            for name, d in self.module_defs.items():
                if isinstance(d, ast.ClassDef) or any(
                    isinstance(dec, (ast.Attribute, ast.Name)) and (self.resolve(dec) or "").startswith("triton.")
                    for dec in d.decorator_list
                ):
                    continue
                for n in ast.walk(d):
                    if isinstance(n, ast.Call):
                        r = self.resolve(n.func)
                        if r and _is_heavy(r) and r != "torch.compile":
                            self._heavy_helpers.add(name)
                            break
                    elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult):
                        self._heavy_helpers.add(name)
                        break
        return self._heavy_helpers


_FIELDS: dict[type, tuple[str, ...]] = {}
#: fields that never hold a node worth visiting (names, operators, contexts)
_SCALAR_FIELDS = frozenset({"ctx", "type_comment", "op", "ops", "id", "attr", "arg", "name", "names", "module",
                            "level", "kind", "conversion", "is_async", "simple"})


def _index(tree: ast.Module) -> tuple[list[ast.AST], dict[int, list[ast.AST]]]:
    """Every node in source pre-order, each tagged with its parent and its scope (module or function).

    Returns the order and, per scope, the nodes that belong to it directly (a nested function's
    body belongs to that function; its decorators and defaults to the enclosing scope).
    """
    order: list[ast.AST] = []
    members: dict[int, list[ast.AST]] = {id(tree): []}
    tree._sb_parent = None
    tree._sb_scope = tree
    stack: list[ast.AST] = [tree]
    AST = ast.AST
    fields_cache = _FIELDS
    func_types = (ast.FunctionDef, ast.AsyncFunctionDef)
    while stack:
        node = stack.pop()
        order.append(node)
        scope = node._sb_scope
        members[id(scope)].append(node)
        t = node.__class__
        fields = fields_cache.get(t)
        if fields is None:
            fields = fields_cache[t] = () if t is ast.Constant else tuple(f for f in t._fields if f not in _SCALAR_FIELDS)
        is_func = t in func_types
        if is_func:
            members[id(node)] = []
        kids: list[ast.AST] = []
        for f in fields:
            v = getattr(node, f, None)
            if v is None:
                continue
            child_scope = node if (is_func and f == "body") else scope
            if v.__class__ is list:
                for x in v:
                    if isinstance(x, AST):
                        x._sb_parent = node
                        x._sb_scope = child_scope
                        kids.append(x)
            elif isinstance(v, AST):
                v._sb_parent = node
                v._sb_scope = child_scope
                kids.append(v)
        kids.reverse()
        stack.extend(kids)
    return order, members


def _chain_inner(node: ast.AST) -> bool:
    """Whether ``node`` is the base of an enclosing attribute access (``a`` in ``a.b``)."""
    p = node._sb_parent
    return p.__class__ is ast.Attribute and p.value is node


def _norm(name: str) -> str:
    for p in ("builtins.", "__builtins__.", "__builtin__."):
        if name.startswith(p):
            return name[len(p):]
    if name in ("__builtins__", "__builtin__"):
        return "builtins"
    if name.startswith("np."):
        return "numpy." + name[3:]
    return name


def _bind(m: dict[str, list[ast.AST]], tgt: ast.AST, value: ast.AST) -> None:
    if isinstance(tgt, ast.Name):
        m.setdefault(tgt.id, []).append(value)
    elif isinstance(tgt, (ast.Tuple, ast.List)):
        for e in tgt.elts:
            _bind(m, e, value)
    elif isinstance(tgt, ast.Starred):
        _bind(m, tgt.value, value)


def _falsy(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and not node.value


def _literal(node: ast.AST | None) -> bool:
    if node is None:
        return True
    try:
        ast.literal_eval(node)
        return True
    except Exception:
        return False


def _is_code_file(path: str) -> bool:
    return path.endswith((".py", ".so", ".pth", ".pyc", ".pyd", ".pyx"))


# --------------------------------------------------------------------------------------------
# C / C++ / CUDA

_CPP_STRIP = re.compile(
    r'//[^\n]*|/\*.*?\*/|R"([^(\s"\\]{0,16})\((.*?)\)\1"|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
    re.DOTALL,
)
_CPP_DEFINE = re.compile(r"^[ \t]*#[ \t]*define\b(?:[^\n]*\\\n)*[^\n]*", re.MULTILINE)
_CPP_IMPORT = re.compile(r'(?:PyImport_ImportModule\w*|py::module_?::import)\s*\(\s*"([^"]+)"')
_CPP_PY_IMPORT = re.compile(r"py::module_?::import|PyImport_\w+")
_CPP_ATTR_SET = re.compile(r"\.attr\s*\([^()]*\)\s*=(?!=)")

#: (pattern, rule, what, identifiers, substrings): the pattern only runs when one of the identifiers
#: occurs in the code, or one of the substrings does (most honest kernels skip every pattern)
_CPP_RULES: list[tuple[re.Pattern[str], str, str, frozenset[str], tuple[str, ...]]] = [
    (re.compile(r"std\s*::\s*j?thread\b|std\s*::\s*async\b|\bpthread_create\b|boost\s*::\s*thread\b|"
                r"\bCreateThread\b|#\s*include\s*<\s*thread\s*>"),
     "threading", "starts a thread", frozenset({"thread", "jthread", "async", "pthread_create", "CreateThread"}), ()),
    (re.compile(r"(?<![\w.>])(?:v?fork|system|popen|exec(?:l|lp|le|v|vp|vpe|ve)|posix_spawnp?)\s*\("),
     "subprocess", "starts a process or shell",
     frozenset("fork vfork system popen execl execlp execle execv execvp execvpe execve posix_spawn posix_spawnp".split()),
     ()),
    (re.compile(r"\b(?:dlopen|dlsym|dlmopen|dlvsym|LoadLibrary\w*|GetProcAddress|PyRun_\w+|Py_CompileString\w*|"
                r"PyEval_EvalCode\w*|PyImport_ExecCode\w*)\b"),
     "dynamic_code", "loads or runs code at run time",
     frozenset({"dlopen", "dlsym", "dlmopen", "dlvsym", "GetProcAddress"}),
     ("LoadLibrary", "PyRun_", "Py_CompileString", "PyEval_EvalCode", "PyImport_ExecCode")),
    (re.compile(r"(?<![\w.>])socket\s*\(|sys/socket\.h|netinet/|arpa/inet\.h|\bgetaddrinfo\b|\bgethostbyname\b|"
                r"\bcurl_easy_\w+"),
     "network", "uses the network", frozenset({"socket", "getaddrinfo", "gethostbyname"}),
     ("netinet", "arpa/inet", "curl_easy")),
    (re.compile(r"\bptrace\b|\bprocess_vm_(?:readv|writev)\b"), "process_memory", "touches another process's memory",
     frozenset({"ptrace", "process_vm_readv", "process_vm_writev"}), ()),
    (re.compile(r"(?<![\w.>])(?:signal|sigaction|alarm|setitimer|atexit|at_quick_exit|kill|killpg)\s*\(|"
                r"\bPyEval_SetTrace\b|\bPyEval_SetProfile\b|\bPySys_AddAuditHook\b|\bPy_AtExit\b"),
     "signal_tamper", "installs a signal handler, timer, exit hook or tracer",
     frozenset("signal sigaction alarm setitimer atexit at_quick_exit kill killpg PyEval_SetTrace PyEval_SetProfile "
               "PySys_AddAuditHook Py_AtExit".split()), ()),
    (re.compile(r"\bPyEval_GetFrame\b|\bPyThreadState_GetFrame\b|\bPyFrame_\w+|\bPyEval_GetGlobals\b|"
                r"\bPyEval_GetLocals\b|\bPyEval_GetBuiltins\b"),
     "frame_or_gc_walk", "walks Python frames",
     frozenset({"PyEval_GetFrame", "PyThreadState_GetFrame", "PyEval_GetGlobals", "PyEval_GetLocals",
                "PyEval_GetBuiltins"}), ("PyFrame_",)),
    (re.compile(r"\bPyObject_(?:Set|Del)Attr\w*"), "monkeypatching", "sets attributes of Python objects",
     frozenset(), ("PyObject_SetAttr", "PyObject_DelAttr")),
    (_PERSIST, "persisting_l2", "persisting-L2 control", frozenset(), _PERSIST_WORDS),
    (re.compile(r"\b(?:cudaStreamCreate\w*|cuStreamCreate\w*|hipStreamCreate\w*|getStreamFromPool)\b"),
     "untracked_stream", "creates a stream the harness cannot track", frozenset(),
     ("StreamCreate", "getStreamFromPool")),
    (re.compile(r"\bcupti[A-Z]\w*|\bcudaProfiler(?:Start|Stop)\b|\bcuProfiler(?:Start|Stop)\b"), "profiler_use",
     "starts, stops or queries a profiler", frozenset(), ("cupti", "Profiler")),
    (re.compile(r"\bfopen\b|\b(?:std\s*::\s*)?[io]?fstream\b"), "file_io", "opens a file",
     frozenset({"fopen", "fstream", "ifstream", "ofstream"}), ()),
]
_CPP_IDENT = re.compile(r"[A-Za-z_]\w*")


def _strip_cpp(text: str) -> tuple[str, list[tuple[int, str]]]:
    """Blank out comments and string/char literals (keeping newlines); return the literals by offset."""
    literals: list[tuple[int, str]] = []

    def repl(m: re.Match[str]) -> str:
        s = m.group(0)
        if s[0] in "\"'R":
            literals.append((m.start(), m.group(2) if s[0] == "R" else s[1:-1]))
        return re.sub(r"[^\n]", " ", s)

    return _CPP_STRIP.sub(repl, text), literals


def _scan_cpp(path: str, text: str, policy: Policy, offset: int = 0) -> list[Finding]:
    code, literals = _strip_cpp(text)
    newlines = _newlines(code)

    out: list[Finding] = []

    def add(rule: str, pos: int, msg: str) -> None:
        line = bisect.bisect_right(newlines, pos) + 1 + offset
        out.append(Finding(rule, RULES[rule].severity, path, line, _one_line(msg, 160)))

    idents = set(_CPP_IDENT.findall(code))
    for rx, rule, what, words, subs in _CPP_RULES:
        if not (words & idents or any(w in code for w in subs)):
            continue
        for m in rx.finditer(code):
            add(rule, m.start(), f"{what}: {m.group(0).strip()}")
    for m in _CPP_DEFINE.finditer(code) if "##" in code else ():
        if "##" in m.group(0):
            add("token_paste", m.start() + m.group(0).index("##"), f"token pasting in a macro: {m.group(0).strip()[:80]}")
    for pos, lit in literals:
        for p in _PROC:
            if p in lit:
                add("process_memory", pos, f"string names {p}: {lit[:60]!r}")
                break
    for m in _CPP_IMPORT.finditer(text) if "import" in text or "PyImport_" in text else ():
        for rule in _rules_for(m.group(1)):
            add(rule, m.start(), f"imports Python module {m.group(1)}")
    if _CPP_PY_IMPORT.search(code):
        for m in _CPP_ATTR_SET.finditer(code):
            add("monkeypatching", m.start(), f"assigns an attribute of an imported Python module: {m.group(0)}")
    for name in policy.forbid_calls:
        rx = _forbid_cpp_regex(name)
        for m in rx.finditer(code):
            add("forbidden_call", m.start(), f"uses {m.group(0)}, which this problem forbids")
    return out


def _newlines(code: str) -> list[int]:
    out = []
    i = code.find("\n")
    while i >= 0:
        out.append(i)
        i = code.find("\n", i + 1)
    return out


_FORBID_RX_CACHE: dict[str, re.Pattern[str]] = {}


def _forbid_cpp_regex(name: str) -> re.Pattern[str]:
    rx = _FORBID_RX_CACHE.get(name)
    if rx is not None:
        return rx
    wildcard = name.endswith("*")
    base = name.rstrip("*").rstrip(".")
    if "::" in base or "." not in base:
        alts = [re.escape(base)]
    else:
        parts = base.split(".")
        alts = [re.escape("::".join(parts))]
        if parts[0] == "torch":
            alts.append(re.escape("::".join(["at"] + parts[1:])))
            if len(parts) == 2:
                alts.append(re.escape(f"at::native::{parts[1]}"))
    tail = r"(?:::)?\w*" if wildcard else r"\b"
    rx = re.compile(r"(?<![\w])(?:" + "|".join(alts) + ")" + tail)
    _FORBID_RX_CACHE[name] = rx
    return rx


# --------------------------------------------------------------------------------------------
# entry point


def _kind_of(path: str, language: str) -> str:
    dot = path.rfind(".")
    ext = path[dot:].lower() if dot > path.rfind("/") else ""
    if ext in (".py", ".pyi"):
        return "python"
    if ext in _CPP_EXTS:
        return "cpp"
    if language in _PY_LANGS or language == "triton":
        return "python"
    if ext in ("", ".txt", ".json", ".md", ".yaml", ".yml", ".toml"):
        return "none" if ext else "cpp"
    return "cpp"


def scan_sources(sources: list[tuple[str, str]], language: str, policy: Policy | None = None) -> list[Finding]:
    """Scan a solution's sources; findings of rules in ``policy.allow`` are dropped."""
    policy = policy or Policy()
    lang = (language or "pytorch").lower()
    findings: list[Finding] = []
    gc_was_enabled = gc.isenabled()
    gc.disable()  # parsing allocates many small objects; collecting them mid-scan only costs time
    try:
        for path, content in sources:
            findings.extend(_scan_one(path, content, lang, policy))
    finally:
        if gc_was_enabled:
            gc.enable()
    seen: set[tuple[str, str, int]] = set()
    out: list[Finding] = []
    for f in findings:
        if f.rule in policy.allow:
            continue
        key = (f.rule, f.path, f.line)
        if key in seen:
            continue
        seen.add(key)
        out.append(f)
    out.sort(key=lambda f: (f.path, f.line, f.rule))
    return out


def _scan_one(path: str, content: str, lang: str, policy: Policy) -> list[Finding]:
    kind = _kind_of(path, lang)
    if kind == "cpp":
        return _scan_cpp(path, content, policy)
    if kind != "python":
        return []
    try:
        tree = ast.parse(content, filename=path)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return []  # the build step reports it
    scanner = _PyScanner(path, tree, lang, policy, 0, 0)
    scanner.maybe_idents = bool(_PERSIST.search(content) or _STREAM_NAME.search(content)
                                or _PROFILER_WORDS.search(content))
    try:
        return scanner.run()
    except RecursionError:
        return scanner.findings + [Finding("unscannable", REJECT, path, 1, "source nests too deeply to analyse")]
