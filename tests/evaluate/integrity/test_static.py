"""The static integrity scan: honest kernels pass, known exploits are rejected by the right rule."""

from __future__ import annotations

import textwrap

import pytest

from solbench.evaluate.integrity.static import RULES, Finding, Policy, Rule, rejected, scan_sources
from tests.paths import ROOT


def scan(src: str, language: str = "pytorch", path: str = "solution.py", policy: Policy | None = None) -> list[Finding]:
    return scan_sources([(path, textwrap.dedent(src))], language, policy)


def rejects(src: str, **kw) -> set[str]:
    return {f.rule for f in rejected(scan(src, **kw))}


def warns(src: str, **kw) -> set[str]:
    return {f.rule for f in scan(src, **kw) if f.severity == "warn"}


# --------------------------------------------------------------------------------------------
# the rule table itself


def test_rules_are_well_formed():
    assert len(RULES) >= 20
    for name, rule in RULES.items():
        assert isinstance(rule, Rule) and rule.name == name
        assert rule.severity in ("reject", "warn")
        assert name.replace("_", "").isalnum() and name == name.lower()
        assert rule.rationale.endswith(".") and "\n" not in rule.rationale


def test_every_rule_is_documented():
    doc = (ROOT / "docs" / "STATIC_RULES.md").read_text()
    for name, rule in RULES.items():
        assert f"## `{name}`" in doc, name
        section = doc.split(f"## `{name}`", 1)[1].split("\n## ", 1)[0]
        assert rule.severity in section, name


def test_findings_carry_rule_severity_path_and_line():
    fs = scan("import os\n\nimport socket\n", path="k/main.py")
    (f,) = [f for f in fs if f.rule == "network"]
    assert f == Finding("network", "reject", "k/main.py", 3, f.message)
    assert "socket" in f.message and "\n" not in f.message


def test_rejected_filters_by_severity():
    fs = scan("import ctypes\nimport threading\n")
    assert {f.rule for f in fs} == {"ctypes", "threading", "import_not_allowed"}
    assert [f.rule for f in rejected(fs)] == ["import_not_allowed", "import_not_allowed", "threading"]
    assert [f.rule for f in fs if f.severity == "warn"] == ["ctypes"]


def test_syntax_error_yields_nothing():
    assert scan("def run(x:\n    return x\n") == []
    assert scan("import threading\nx = (", language="triton") == []


def test_policy_allow_drops_findings():
    src = "import threading\nimport socket\n"
    assert rejects(src) == {"threading", "network", "import_not_allowed"}
    assert rejects(src, policy=Policy(allow=frozenset({"threading", "import_not_allowed"}))) == {"network"}


# --------------------------------------------------------------------------------------------
# honest code: no reject findings

HONEST_AUTOTUNED_MATMUL = '''
import functools
import math
from dataclasses import dataclass

import torch
import triton
import triton.language as tl


@dataclass(frozen=True)
class LaunchCfg:
    block_m: int
    block_n: int
    num_warps: int = 4


def _configs():
    return [
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": 32}, num_warps=w, num_stages=s)
        for bm in (64, 128) for bn in (64, 128) for w, s in ((4, 3), (8, 4))
    ]


@triton.autotune(configs=_configs(), key=["M", "N", "K"])
@triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BLOCK_K"] == 0})
@triton.jit
def _matmul(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=getattr(tl, "float32"))
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptr + rm[:, None] * sam + (k * BLOCK_K + rk)[None, :] * sak)
        b = tl.load(b_ptr + (k * BLOCK_K + rk)[:, None] * sbk + rn[None, :] * sbn)
        acc += tl.dot(a, b)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(tl.float16), mask=mask)


@triton.jit
def _bias_relu(c_ptr, bias_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n_cols
    v = tl.load(c_ptr + row * n_cols + cols, mask=m) + tl.load(bias_ptr + cols, mask=m)
    tl.store(c_ptr + row * n_cols + cols, tl.maximum(v, 0.0), mask=m)


@functools.lru_cache(maxsize=None)
def _row_block(n_cols: int) -> int:
    return max(triton.next_power_of_2(n_cols), 16)


_GRID_CACHE: dict = {}
_launch = functools.partial(triton.cdiv)
_DEBUG = False


def run(a, b, bias):
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    scratch = torch.empty(math.prod((M, 1)), device=a.device, dtype=torch.float32)
    key = (M, N, K)
    grid = _GRID_CACHE.get(key)
    if grid is None:
        grid = lambda meta: (_launch(M, meta["BLOCK_M"]), _launch(N, meta["BLOCK_N"]))
        _GRID_CACHE[key] = grid
    _matmul[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                  c.stride(0), c.stride(1))
    _bias_relu[(M,)](c, bias, N, BLOCK=_row_block(N))
    torch.cuda.current_stream().synchronize() if _DEBUG else None
    return c.contiguous().view(M, N).to(torch.float16)
'''


def test_honest_autotuned_triton_matmul_has_no_rejects():
    fs = scan(HONEST_AUTOTUNED_MATMUL, language="triton")
    assert rejected(fs) == []
    # the (M, N, K) launch cache is a shape cache: a warning for the dynamic checks, at most
    assert {f.rule for f in fs} <= {"shape_cache"}


HONEST_CUDA_GRAPH = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _scale(x_ptr, out_ptr, n, s, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * s, mask=m)


class _Graphed:
    def __init__(self):
        self._graphs = {}

    def __call__(self, x, s: float):
        key = (tuple(x.shape), x.dtype, s)
        entry = self._graphs.get(key)
        if entry is None:
            static_in = torch.empty_like(x)
            static_out = torch.empty_like(x)
            n = static_in.numel()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                _scale[(triton.cdiv(n, 1024),)](static_in, static_out, n, s, BLOCK=1024)
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                _scale[(triton.cdiv(n, 1024),)](static_in, static_out, n, s, BLOCK=1024)
            entry = self._graphs[key] = (g, static_in, static_out)
        g, static_in, static_out = entry
        static_in.copy_(x)
        g.replay()
        return static_out.clone()


_impl = _Graphed()


def run(x, s):
    return _impl(x, s)
'''


def test_honest_cuda_graph_replay_only_warns():
    fs = scan(HONEST_CUDA_GRAPH, language="triton")
    assert rejected(fs) == []
    assert {f.rule for f in fs} == {"shape_cache", "stream_creation"}


def test_honest_pytorch_solution_with_backend_flags():
    src = '''
    import torch
    import torch.nn.functional as F

    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    THRESH = 0.5

    def run(q, k, v, out):
        torch.matmul(q, k.transpose(-1, -2), out=out)
        out.copy_(F.softmax(out, dim=-1) @ v)
        return out
    '''
    assert scan(src) == []


def test_honest_cuda_source_with_events_and_graphs():
    src = r'''
    #include <cuda_runtime.h>
    #include <torch/extension.h>
    // std::thread is mentioned only in a comment; "system(" only in a string
    static const char* kNote = "do not call system(\"x\") or fork()";

    __global__ void axpy(const float* x, float* y, float a, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = a * x[i] + y[i];
    }

    void launch(torch::Tensor x, torch::Tensor y, float a) {
        cudaEvent_t e; cudaEventCreate(&e);
        auto stream = at::cuda::getCurrentCUDAStream();
        axpy<<<(x.numel() + 255) / 256, 256, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), a, x.numel());
        cudaEventRecord(e, stream);
        auto z = x.clone();
    }
    '''
    assert scan(src, language="cuda", path="kernel.cu") == []


def test_a_solutions_own_extension_build_is_rejected_and_its_source_still_scanned():
    src = '''
    import torch
    from torch.utils.cpp_extension import load_inline

    CUDA_SRC = """
    #include <torch/extension.h>
    __global__ void k(float* y, int n) { int i = threadIdx.x; if (i < n) y[i] = 0.f; }
    void run_k(torch::Tensor y) { k<<<1, 256>>>(y.data_ptr<float>(), y.numel()); }
    """
    _mod = load_inline("k", cpp_sources="void run_k(torch::Tensor y);", cuda_sources=CUDA_SRC, functions=["run_k"])

    def run(y):
        _mod.run_k(y)
        return y
    '''
    # only the trusted side builds native code: load_inline is a compiler call outside the allowlist
    assert rejects(src) == {"compiler_call", "import_not_allowed"}
    # the embedded C++ is still token-scanned (its kernel here is clean)
    assert rejects(src.replace("y[i] = 0.f;", "y[i] = 0.f; std::thread t(g);")) >= {"threading"}


# --------------------------------------------------------------------------------------------
# exploits: each rejected by the right rule


def test_background_thread_filling_the_output():
    src = '''
    import threading
    import torch

    def run(x, out):
        def fill():
            out.copy_(x * 2)
        threading.Thread(target=fill, daemon=True).start()
        return out
    '''
    assert "threading" in rejects(src)


def test_thread_via_aliases():
    assert "threading" in rejects("import threading as t\ndef run(x):\n    t.Thread(target=print).start()\n")
    fs = scan("from concurrent.futures import ThreadPoolExecutor as P\npool = P(2)\n")
    assert {(f.rule, f.line) for f in rejected(fs)} >= {("threading", 1), ("threading", 2)}
    assert "threading" in rejects("import multiprocessing\n")


def test_patching_event_elapsed_time():
    src = '''
    import torch
    torch.cuda.Event.elapsed_time = lambda self, other: 0.001
    '''
    assert "monkeypatching" in rejects(src)
    assert "monkeypatching" in rejects("from torch.cuda import Event\nEvent.elapsed_time = lambda s, o: 1e-3\n")
    assert "monkeypatching" in rejects("import torch\nE = torch.cuda.Event\nE.elapsed_time = None\n")


@pytest.mark.parametrize("src", [
    "import time\ntime.perf_counter = lambda: 0.0\n",
    "import torch\ntorch.cuda.synchronize = lambda *a: None\n",
    "import builtins\nbuiltins.print = lambda *a, **k: None\n",
    "import torch\nsetattr(torch.cuda, 'synchronize', lambda: None)\n",
    "import sys\nsys.modules['time'] = object()\n",
    "import sys\nsys.modules.update({'time': None})\n",
    "import sys\nsys.modules['time'].perf_counter = lambda: 0\n",
    "import time\ndelattr(time, 'perf_counter')\n",
    "import numpy as np\nnp.allclose = lambda *a, **k: True\n",
    "from solbench.evaluate import stats\nstats.median = min\n",
    "import torch\ntype(torch.empty(1)).add_ = None\n",
    "import torch\ntorch.Tensor.__eq__ = lambda a, b: True\n",
])
def test_monkeypatching(src):
    assert "monkeypatching" in rejects(src)


def test_alias_of_imported_function_then_patching_its_module():
    src = '''
    from time import perf_counter as p
    import time as clock

    def run(x):
        clock.perf_counter = lambda: p() - 1.0
        return x
    '''
    assert "monkeypatching" in rejects(src)


def test_setattr_with_assembled_name():
    r = rejects('import time\nsetattr(time, "perf_" + "counter", lambda: 0)\n')
    assert {"monkeypatching", "name_obfuscation"} <= r


def test_exec_of_base64_payload_direct_and_via_variable():
    direct = 'import base64\nexec(base64.b64decode("aW1wb3J0IG9z"))\n'
    assert {"obfuscated_payload", "dynamic_code"} <= rejects(direct)
    via = '''
    import base64 as b, zlib

    BLOB = "eJzLzE3NzUEA"

    def run(x):
        code = zlib.decompress(b.b64decode(BLOB)).decode()
        fn = compile(code, "<k>", "exec")
        exec(fn, globals())
        return x
    '''
    assert {"obfuscated_payload", "dynamic_code"} <= rejects(via)
    assert "obfuscated_payload" in rejects('payload = bytes.fromhex("7072696e74")\neval(payload)\n')


def test_exec_of_constant_source_is_scanned_inside():
    fs = scan('exec("import threading\\nthreading.Thread(target=print).start()")\n')
    assert {"dynamic_code", "threading"} <= {f.rule for f in rejected(fs)}


def test_import_module_with_assembled_name():
    r = rejects('import importlib\nmod = importlib.import_module("thr" + "eading")\n')
    assert {"dynamic_code", "name_obfuscation", "threading"} <= r
    # a constant module name is an ordinary import, checked against the allowlist (which importlib is not on)
    assert rejects('import importlib\nm = importlib.import_module("math")\n') == {"import_not_allowed"}
    fs = rejected(scan('import importlib\nm = importlib.import_module("socket")\n'))
    assert {"network", "import_not_allowed"} <= {f.rule for f in fs}
    assert any("import_module('socket')" in f.message for f in fs)


def test_getattr_builtins_with_assembled_name():
    r = rejects('f = getattr(__builtins__, "ex" + "ec")\nf("print(1)")\n')
    assert {"name_obfuscation", "dynamic_code"} <= r
    r = rejects('import builtins\ng = getattr(builtins, "".join(["e", "v", "a", "l"]))\n')
    assert {"name_obfuscation", "dynamic_code"} <= r
    assert "name_obfuscation" in rejects('import torch\nfn = getattr(torch, "lumtam"[::-1])\n')
    assert "name_obfuscation" in rejects('import os\nn = chr(115) + "ystem"\ngetattr(os, n)("ls")\n')


@pytest.mark.parametrize("src", [
    'g = globals()["__builtins__"]\n',
    'import torch\nf = vars(torch)["matmul"]\n',
    'import torch\nf = torch.__dict__["matmul"]\n',
    'f = __builtins__["eval"]\n',
    'import torch\nf = object.__getattribute__(torch, "matmul")\n',
])
def test_name_lookups_through_namespaces(src):
    assert "name_obfuscation" in rejects(src)


def test_frame_walks():
    src = '''
    import sys

    def run(x):
        expected = sys._getframe(1).f_locals.get("expected")
        return expected.clone()
    '''
    assert "frame_or_gc_walk" in rejects(src)
    assert "frame_or_gc_walk" in rejects("import inspect\nf = inspect.currentframe().f_back.f_globals\n")
    assert "frame_or_gc_walk" in rejects("def run(x):\n    return run.__globals__\n")
    # the call stack as text names the harness function that calls: enough to tell the profiled call apart
    assert "frame_or_gc_walk" in rejects("import traceback\nwhere = traceback.extract_stack()\n")
    honest = "import traceback\ntry:\n    pass\nexcept Exception:\n    traceback.print_exc()\n"
    assert "frame_or_gc_walk" not in rejects(honest)
    assert "frame_or_gc_walk" in rejects("subs = object.__subclasses__()\n")


def test_gc_walk_for_tensors():
    src = '''
    import gc
    import torch

    def run(x):
        for obj in gc.get_objects():
            if isinstance(obj, torch.Tensor) and obj.shape == x.shape and obj is not x:
                return obj.clone()
    '''
    assert "frame_or_gc_walk" in rejects(src)


def test_pip_install_through_subprocess():
    src = 'import subprocess\nsubprocess.run(["pip", "install", "x"], check=True)\n'
    assert {"subprocess", "runtime_install"} <= rejects(src)
    assert {"subprocess", "runtime_install"} <= rejects('import os\nos.system("python -m pip install fastkern")\n')


@pytest.mark.parametrize("src", [
    'import sys\nsys.path.insert(0, "/tmp")\n',
    'import sys\nsys.path.append("/tmp/x")\n',
    'import sys\nsys.path += ["/tmp"]\n',
    'import site\nsite.addsitedir("/tmp/pkgs")\n',
    'import importlib.util as u\nspec = u.spec_from_file_location("m", "/tmp/m.py")\n',
    'import ensurepip\n',
    'open("helper.py", "w").write("import os")\nimport helper\n',
    'from pathlib import Path\nPath("evil.so").write_bytes(b"...")\n',
])
def test_runtime_install(src):
    assert "runtime_install" in rejects(src)


def test_network():
    assert "network" in rejects("import socket\ns = socket.socket()\n")
    assert "network" in rejects("from urllib.request import urlopen\n")
    assert "network" in rejects("import requests\n")
    assert "network" in rejects("import torch\nm = torch.hub.load('a/b', 'c')\n")


def test_process_memory():
    assert "process_memory" in rejects('f = open("/proc/self/mem", "rb")\n')
    assert "process_memory" in rejects('import os\npid = os.getppid()\np = f"/proc/{pid}/mem"\n')
    assert "process_memory" in rejects('import mmap\nfd = open("/dev/mem")\n')


def test_ctypes_libc_is_rejected_other_ctypes_warns():
    assert "process_memory" in rejects('import ctypes\nlibc = ctypes.CDLL("libc.so.6")\n')
    assert "process_memory" in rejects('import ctypes\nme = ctypes.CDLL(None)\n')
    assert "process_memory" in rejects('import ctypes\nctypes.memmove(0x1000, 0x2000, 8)\n')
    driver = 'import ctypes\ncuda = ctypes.CDLL("libcuda.so.1")\ncuda.cuInit(0)\n'
    assert rejects(driver) == {"import_not_allowed"}  # ctypes is not on the allowlist: it reaches any object
    assert warns(driver) == {"ctypes"}
    assert rejects(driver, policy=Policy(allow=frozenset({"import_not_allowed"}))) == set()


def test_pointer_keyed_cache():
    src = '''
    import torch

    _cache = {}

    def run(x, w):
        key = (x.data_ptr(), w.data_ptr())
        if key in _cache:
            return _cache[key]
        out = x @ w
        _cache[key] = out
        return out
    '''
    assert "output_cache_by_pointer" in rejects(src)
    assert "output_cache_by_pointer" in rejects("C = {}\ndef run(x):\n    return C.get(id(x))\n")
    assert "output_cache_by_pointer" in rejects(
        "C = {}\ndef run(x):\n    return C.setdefault(x.untyped_storage().data_ptr(), x * 2)\n")


def test_last_pointer_one_entry_cache():
    src = '''
    class Impl:
        def __init__(self):
            self._ptr = None
            self._out = None

        def __call__(self, x):
            if x.data_ptr() == self._ptr:
                return self._out
            self._ptr = x.data_ptr()
            self._out = x * 2
            return self._out
    '''
    assert "output_cache_by_pointer" in rejects(src)
    ident = '''
    _last = None
    _out = None

    def run(x):
        global _last, _out
        if x is _last:
            return _out
        _last, _out = x, x.contiguous() * 2
        return _out
    '''
    assert "output_cache_by_pointer" in rejects(ident)


def test_lru_cache_on_tensor_arguments():
    src = '''
    import functools
    import torch

    @functools.lru_cache(maxsize=8)
    def _compute(x, w):
        return torch.relu(x.contiguous() @ w)

    def run(x, w):
        return _compute(x, w)
    '''
    assert "output_cache_by_pointer" in rejects(src)
    by_ptr = '''
    from functools import cache

    @cache
    def _lookup(ptr, n):
        return ptr + n

    def run(x):
        return _lookup(x.data_ptr(), x.numel())
    '''
    assert "output_cache_by_pointer" in rejects(by_ptr)


def test_value_keyed_cache():
    src = '''
    _seen = {}

    def run(x):
        k = x.sum().item()
        if k in _seen:
            return _seen[k]
        _seen[k] = out = x.exp()
        return out
    '''
    assert "value_cache" in rejects(src)
    assert "value_cache" in rejects("C = dict()\ndef run(x):\n    return C[tuple(x.flatten().tolist())]\n")
    assert "value_cache" in rejects("C = {}\ndef run(x):\n    return C[hash(x.cpu().numpy().tobytes())]\n")
    stored = '''
    import torch

    class Impl:
        def __call__(self, x):
            if self._prev is not None and torch.equal(x, self._prev):
                return self._out
            self._prev, self._out = x.clone(), x * 2
            return self._out
    '''
    assert "value_cache" in rejects(stored)


def test_value_key_built_by_a_helper_function():
    src = '''
    import hashlib
    import torch

    _cache = {}

    def _fingerprint(x, scale):
        sample = x[:: max(1, x.shape[0] // 8)].contiguous().cpu()
        return (tuple(x.shape), float(scale), hashlib.blake2b(sample.numpy().tobytes()).digest())

    def run(x, scale):
        key = _fingerprint(x, scale)
        out = _cache.get(key)
        if out is None:
            out = _cache[key] = torch.softmax(x * scale, dim=-1)
        return out
    '''
    assert "value_cache" in rejects(src)


def test_result_channel_forgery():
    src = '''
    import json, os, sys

    def _forge():
        job = json.load(open(sys.argv[1]))
        os.write(int(sys.argv[2]), b"passed")

    _forge()
    '''
    assert "result_channel" in rejects(src)
    assert "result_channel" in rejects('f = open(3, "w")\nf.write("done")\n')


def test_shape_cache_warns():
    src = '''
    _plans = {}

    def run(x):
        plan = _plans.get(x.shape)
        if plan is None:
            plan = _plans[x.shape] = object()
        return x
    '''
    assert rejects(src) == set()
    assert warns(src) == {"shape_cache"}


def test_indexing_tensors_is_not_a_cache():
    src = '''
    def run(cache, slots, k, idx):
        cache[slots.long()] = k
        rows = idx.clamp(min=0)
        return cache[rows], k[: k.size(0)], k[idx.max().item()]
    '''
    assert scan(src) == []


def test_try_except_reference_fallback():
    src = '''
    import torch

    def _kernel(a, b):
        raise RuntimeError("not yet")

    def run(a, b):
        try:
            return _kernel(a, b)
        except Exception:
            return torch.matmul(a, b)
    '''
    assert "reference_fallback" in rejects(src, language="triton")
    helper = '''
    import torch.nn.functional as F

    def _eager(x):
        return F.gelu(x)

    def run(x):
        try:
            return launch(x)
        except RuntimeError:
            return _eager(x)
    '''
    assert "reference_fallback" in rejects(helper, language="triton")
    named = "def run(x):\n    try:\n        return k(x)\n    except Exception:\n        return reference_impl(x)\n"
    assert "reference_fallback" in rejects(named)
    honest = "def run(x):\n    try:\n        return k(x)\n    except Exception as e:\n        raise RuntimeError('kernel failed') from e\n"
    assert rejects(honest) == set()


def test_signal_tampering():
    assert "signal_tamper" in rejects("import signal\nsignal.alarm(0)\n")
    assert "signal_tamper" in rejects("import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n")
    assert "signal_tamper" in rejects("import atexit\natexit.register(print)\n")
    assert "signal_tamper" in rejects("import sys\nsys.settrace(lambda *a: None)\n")
    assert "signal_tamper" in rejects("import os\nos.kill(os.getppid(), 9)\n")


def test_stream_creation_warns():
    src = "import torch\ns = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n    pass\n"
    assert rejects(src) == set() and warns(src) == {"stream_creation"}
    # streams the harness cannot track (and so cannot fence behind the start of a timed call) are rejected
    assert "untracked_stream" in rejects("from cuda import cudart\nerr, s = cudart.cudaStreamCreate()\n")
    assert "untracked_stream" in rejects("import torch\ns = torch.Stream('cuda')\n")
    assert "untracked_stream" in rejects("from torch._C import _CudaStreamBase as B\ns = B(0, 0, 1)\n")
    assert "untracked_stream" not in rejects("import torch\ns = torch.cuda.current_stream()\n")


def test_profiler_use_is_rejected():
    # the language proof profiles one secret call: a solution must not start, stop or query a profiler
    assert "profiler_use" in rejects("import torch\nwith torch.profiler.profile():\n    pass\n")
    assert "profiler_use" in rejects("from torch.autograd import profiler\np = profiler.profile()\n")
    assert "profiler_use" in rejects("import torch\non = torch._C._autograd._profiler_enabled()\n")
    assert "profiler_use" in rejects("import torch\ntorch.cuda.profiler.start()\n")
    assert "profiler_use" in rejects("from cuda import cupti\n")
    assert "profiler_use" in rejects("cuptiSubscribe(&sub, cb, nullptr);\n", language="cuda", path="k.cu")
    assert "profiler_use" in rejects("cudaProfilerStop();\n", language="cuda", path="k.cu")
    assert "profiler_use" in rejects("import torch\non = torch.autograd._profiler_enabled()\n")
    assert "profiler_use" in rejects("import torch\ntorch.autograd._disable_profiler()\n")
    assert "profiler_use" in rejects("from triton import profiler as proton\nproton.start('x')\n")
    assert "profiler_use" in rejects("import torch.profiler as P\nwith P.profile():\n    pass\n")
    honest = "import torch\nimport triton\ntorch.cuda.synchronize()\nx = torch.cuda.current_stream()\n"
    assert "profiler_use" not in rejects(honest) | warns(honest)
    # annotations label a range and start nothing; names that merely contain the word are not the API
    for src in ("from torch.profiler import record_function\nwith record_function('fwd'):\n    pass\n",
                "import torch\nwith torch.autograd.profiler.record_function('fwd'):\n    pass\n",
                "import torch.profiler\nwith torch.profiler.record_function('fwd'):\n    pass\n",
                "cupti_enabled = False\n", "# torch.profiler.profile() was used here\n"):
        assert "profiler_use" not in rejects(src) | warns(src), src
    assert "profiler_use" not in rejects("int cupti_count = 0;\n", language="cuda", path="k.cu")


def test_file_io_warns():
    src = 'import torch\nimport numpy as np\ntorch.save(1, "w.pt")\nnp.save("x.npy", 1)\nt = open("a.txt").read()\n'
    assert rejects(src) == set() and warns(src) == {"file_io"}
    assert warns('from pathlib import Path\nPath("o.bin").write_bytes(b"")\n') == {"file_io"}
    # loading unpickles: code from a file the scan never read
    assert "dynamic_code" in rejects('import torch\nw = torch.load("w.pt", weights_only=False)\n')
    assert "dynamic_code" in rejects('import numpy as np\nw = np.load("w.npy", allow_pickle=True)\n')


def test_persisting_l2_in_python():
    src = '''
    from cuda import cudart
    attr = cudart.cudaStreamAttrValue()
    attr.accessPolicyWindow.hitRatio = 1.0
    cudart.cudaDeviceSetLimit(cudart.cudaLimit.cudaLimitPersistingL2CacheSize, 50 << 20)
    '''
    fs = rejected(scan(src))
    assert {f.rule for f in fs} == {"persisting_l2", "import_not_allowed"}  # cuda.cudart is not on the allowlist
    assert len({f.line for f in fs if f.rule == "persisting_l2"}) == 3
    assert "persisting_l2" in rejects('limit = "cudaLimitPersistingL2CacheSize"\n')


def test_forbidden_calls_through_aliases():
    pol = Policy(forbid_calls=frozenset({"torch.nn.functional.scaled_dot_product_attention", "torch.matmul"}))
    sdpa = "from torch.nn import functional as F\ndef run(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v)\n"
    assert "forbidden_call" in rejects(sdpa, policy=pol)
    assert "forbidden_call" in rejects("import torch\nf = getattr(torch, 'matmul')\n", policy=pol)
    assert "forbidden_call" in rejects("import torch as T\ndef run(a, b):\n    return T.matmul(a, b)\n", policy=pol)
    assert "forbidden_call" in rejects("def run(a, b):\n    return a.matmul(b)\n", policy=pol)
    assert "forbidden_call" in rejects("def run(a, b):\n    return a @ b\n", policy=pol)
    assert "forbidden_call" in rejects("import torch\ndef run(a, b):\n    return torch.ops.aten.mm.default(a, b)\n",
                                       policy=Policy(forbid_calls=frozenset({"torch.mm"})))
    assert rejects("import torch\ndef run(a, b):\n    return torch.add(a, b)\n", policy=pol) == set()
    star = Policy(forbid_calls=frozenset({"torch.nn.functional.*"}))
    assert "forbidden_call" in rejects("import torch.nn.functional as F\ny = F.gelu(1)\n", policy=star)


def test_torch_compute_in_dsl_warns():
    src = '''
    import torch
    import torch.nn.functional as F

    def run(x, w):
        y = torch.empty_like(x)
        z = torch.zeros(4, device=x.device).reshape(2, 2).contiguous().to(torch.float16)
        h = F.layer_norm(x, x.shape[-1:])
        return torch.matmul(h, w) + (x @ w)
    '''
    fs = scan(src, language="triton")
    assert rejected(fs) == [] and {f.rule for f in fs} == {"torch_compute_in_dsl"}
    assert sorted(f.line for f in fs) == [8, 9]  # one finding per rule and line
    assert scan(src, language="pytorch") == []


def test_precision_flags_warn():
    assert warns("import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\n") == {"precision_flags"}
    assert warns("import torch\ntorch.set_float32_matmul_precision('high')\n") == {"precision_flags"}
    assert scan("import torch\ntorch.set_float32_matmul_precision('highest')\n") == []


def test_tensor_subclass_warns():
    src = "import torch\nclass Lazy(torch.Tensor):\n    pass\ndef run(x):\n    return x.as_subclass(Lazy)\n"
    assert warns(src) == {"tensor_subclass"} and rejects(src) == set()


def test_more_evasions():
    assert {"dynamic_code", "threading"} <= rejects('__import__("threading").Thread(target=print).start()\n')
    assert "dynamic_code" in rejects("e = exec\ne(input())\n")
    assert "subprocess" in rejects('from os import system as s\ns("ls")\n')
    assert "monkeypatching" in rejects("import time\nt = time\nt.perf_counter = lambda: 0\n")
    swap = "import torch\ntorch.cuda.Event.elapsed_time.__code__ = (lambda s, o: 0.0).__code__\n"
    assert {"dynamic_code", "monkeypatching"} <= rejects(swap)
    weak = "import weakref\n_c = weakref.WeakKeyDictionary()\ndef run(x):\n    return _c.get(x) or x.contiguous()\n"
    assert "output_cache_by_pointer" in rejects(weak)
    assert warns("import torch\n@torch.compile\ndef f(x):\n    return x\n", language="triton") == {
        "torch_compute_in_dsl", "other_language"}


def test_too_deep_to_scan_is_rejected_not_crashed():
    src = "C = {}\ndef run(x):\n    return C[" + "+".join(["x.data_ptr()"] * 2000) + "]\n"
    assert "unscannable" in rejects(src)


def test_harness_import_rejected():
    assert "harness_import" in rejects("from solbench.evaluate import timing\n")


# --------------------------------------------------------------------------------------------
# the registry


def test_every_check_reports_declared_rules_and_every_rule_has_a_check():
    from solbench.evaluate.integrity.static import CHECKS
    from solbench.evaluate.integrity.static.rules import CPP_PATTERNS, KINDS, NAME_RULES

    reported = set()
    for c in CHECKS:
        assert c.kind in KINDS, c
        assert c.func.__doc__ is None or c.func.__doc__.strip(), c.name
        for r in c.rules:
            assert r == "*" or r in RULES, (c.name, r)
            reported.add(r)
    reported |= {r for rules in NAME_RULES.values() for r in rules} | {p.rule for p in CPP_PATTERNS}
    assert set(RULES) - reported <= {"unscannable", "unexpected_source"}  # raised by the entry point itself


def test_every_rule_is_in_the_registry_table_of_the_docs():
    doc = (ROOT / "docs" / "STATIC_RULES.md").read_text()
    table = doc.split("## The registry", 1)[1].split("\n## ", 1)[0]
    for name, rule in RULES.items():
        assert f"| `{name}` | {rule.severity} |" in table, name
    assert f"{len(RULES)} rules" in doc


# --------------------------------------------------------------------------------------------
# module indirection (issue 11, item 9): names reached through module objects


@pytest.mark.parametrize("src", [
    'import sys\nm = dict(sys.modules)["gc"]\n',
    "import sys\nfor name, mod in list(sys.modules.items()):\n    pass\n",
    "import sys\nmods = [m for m in sys.modules.values()]\n",
    'import sys\nm = sys.modules.get("os")\n',
    "import sys\nm = sys.modules.copy()\n",
    "from sys import modules\n",
    'import sys\nm = vars(sys)["modules"]\n',
    'import sys\nm = getattr(sys, "modules")\n',
    "import sys\nns = vars(sys)\n",
    "import sys\nns = sys.__dict__\n",
    "ns = vars()\n",
    "g = globals()\n",
    "import importlib\nimportlib.reload(importlib)\n",
    'import importlib.util\nspec = importlib.util.find_spec("gc")\n',
    "import importlib\ndef load(name):\n    return importlib.import_module(name)\n",
    'import importlib\nm = importlib.__import__("gc")\n',
    'm = __import__("gc")\n',
    'import builtins\nm = builtins.__import__("gc")\n',
    "b = len.__self__\n",
    "def f(fn):\n    return fn.__builtins__\n",
    "def f(mod):\n    return mod.__loader__\n",
    "def fetch(obj, name):\n    return getattr(obj, name)\n",
    "import torch\nc = getattr(torch, '_C')\ndef f(name):\n    return getattr(c, name)\n",
    "import torch\nfor n in dir(torch):\n    f = getattr(torch, n)\n",
    "import gc\ndef f(name):\n    return getattr(gc, name)\n",
    "def f(fn):\n    return getattr(fn, '__globals__')\n",
    "def f(fr):\n    return getattr(fr, 'f_back')\n",
    "def f(m):\n    return getattr(m, 'modules')\n",
    "import operator\nget = operator.attrgetter('f_locals')\n",
    "import operator\ndef f(n):\n    return operator.attrgetter(n)\n",
    "import functools, sys\nm = functools.reduce(getattr, ('modules',), sys)\n",
    "import importlib\nloaders = list(map(importlib.import_module, ['gc']))\n",
    "import inspect, torch\nm = inspect.getmodule(torch.add)\n",
])
def test_module_indirection_is_rejected(src):
    assert "module_indirection" in rejects(src)


@pytest.mark.parametrize("src,rule", [
    ('import sys\ndict(sys.modules)["gc"].get_objects()\n', "frame_or_gc_walk"),
    ('import sys\nm = dict(sys.modules)["gc"]\nm.get_objects()\n', "frame_or_gc_walk"),
    ('import sys\nsys.modules.get("os").write(1, b"x")\n', "result_channel"),
    ('import sys\nh = sys.modules["sys"]\nprint(h.argv)\n', "result_channel"),
    ('import sys\nvars(sys).get("settrace")(None)\n', "signal_tamper"),
    ('import sys\nns = vars(sys)\nns["setprofile"](None)\n', "signal_tamper"),
    ('import sys\nh = sys.__dict__["modules"]["threading"]\n', "threading"),
    ('e = __builtins__.get("exec")\n', "dynamic_code"),
    ('g = globals()\nb = g["__builtins__"]\ne = b["ex" + "ec"]\n', "dynamic_code"),
    ('b = len.__self__\ne = getattr(b, "eval")\n', "dynamic_code"),
    ('for n in ("__import__",):\n    f = getattr(len.__self__, n)\ng = f("gc").get_objects\n', "frame_or_gc_walk"),
    ('import sys\nfor n in ("settrace", "setprofile"):\n    getattr(sys, n)(None)\n', "signal_tamper"),
    ('import operator, sys\nargv = operator.attrgetter("argv")(sys)\n', "result_channel"),
    ('import functools, sys\nh = functools.reduce(getattr, ("modules",), sys)["os"].write\n', "result_channel"),
    ('import importlib\nns = vars(importlib.import_module("builtins"))\nrun = ns.get("ex" + "ec")\n', "dynamic_code"),
    ('import sys\nb = sys.modules["builtins"]\nns = b if isinstance(b, dict) else vars(b)\ne = ns["exec"]\n',
     "dynamic_code"),
    ('e = exec\nSRC = "import gc\\ngc.get_objects()"\ne(SRC)\n', "frame_or_gc_walk"),
    ("import torch\ntorch.sys.settrace(print)\n", "signal_tamper"),
    ("import os\nmods = os.sys.modules\n", "module_indirection"),
    ("import torch\ntorch.os.system('ls')\n", "subprocess"),
    ('m = __loader__.load_module("gc")\n', "module_indirection"),
])
def test_indirection_resolves_to_the_real_name(src, rule):
    assert rule in rejects(src)


@pytest.mark.parametrize("src", [
    'import triton.language as tl\nacc = getattr(tl, "float32")\n',
    "import math\ndef fn(name):\n    return getattr(math, name)\n",
    "import torch\nDTYPES = {'float16': torch.float16, 'float32': torch.float32}\ndef dt(name):\n    return DTYPES[name]\n",
    'def block(config):\n    return getattr(config, "BLOCK", 64)\n',
    'def cuda(x):\n    return getattr(x, "is_cuda", False)\n',
    'def label(fn):\n    return getattr(fn, "__name__", "kernel")\n',
    'def sizes(cfg):\n    return [getattr(cfg, k) for k in ("BLOCK_M", "BLOCK_N")]\n',
    "import operator\nkey = operator.attrgetter('shape')\n",
])
def test_honest_name_lookups_are_not_indirection(src):
    assert rejects(src) == set()


@pytest.mark.parametrize("src", [
    "class K:\n    def get(self, name):\n        return getattr(self, name)\n\nb = K.get(len, '__se' + 'lf__')\n",
    "class K:\n    def get(self, name):\n        return getattr(self.cfg, name, None)\n",
    "def f(args):\n    return vars(args)\n\nns = f(type(int))\n",
    "class K:\n    def state(self):\n        return dict(self.__dict__)\n\nns = K.state(type)\n",
    "class K:\n    def ns(self):\n        return vars(self)\n\nns = K.ns(type)\n",
    "class K:\n    def __init__(self):\n        self.f = len\n        self.b = self.f.__self__\n",
])
def test_the_solutions_own_objects_are_no_way_around_the_allowlist(src):
    """``self`` is only a parameter (``K.get(len, name)`` calls the method with ``len`` in its place) and an
    attribute of it holds whatever was put there, so computed names, ``vars`` and dunders get no exemption on the
    solution's own objects: a red-team review (2026-12-07) reached builtins through each of these."""
    assert "module_indirection" in rejects(src)


@pytest.mark.parametrize("src", [
    "import warnings\ns = warnings.catch_warnings()._module.sys\n",
    "import enum\ndef m():\n    try:\n        enum.nope\n    except AttributeError as e:\n        return e.obj\n\n"
    "b = m().bltns\n",
    "import enum\ndef m():\n    try:\n        enum.nope\n    except AttributeError as e:\n        return e.obj\n\n"
    "s = getattr(m(), 'sys')\n",
    "def f(ins, tb):\n    return ins.getouterframes(tb)\n",
])
def test_a_module_handed_out_as_a_value_leads_no_further(src):
    """A module reached as a value the scan cannot follow (an object's attribute, an exception's ``obj``) is
    unknown to it, so the names under which modules keep capability modules and lookup builtins are refused
    there, by attribute or by a constant ``getattr`` name (a third red-team pass, 2026-12-07)."""
    assert "module_indirection" in rejects(src)


@pytest.mark.parametrize("src,rule", [
    # a name computed at run time on a module that holds modules is an import the allowlist cannot see
    ("import torch\ndef dt(dtype_name):\n    return getattr(torch, dtype_name)\n", "module_indirection"),
    ("import torch.nn.functional as F\ndef act(x, name):\n    return getattr(F, name)(x)\n", "module_indirection"),
    ("import triton.language as tl\ndef op(name):\n    return getattr(tl.math, name)\n", "module_indirection"),
    # importlib and os are not on the allowlist
    ('import importlib\nm = importlib.import_module("math")\n', "import_not_allowed"),
    ('import importlib.metadata\nv = importlib.metadata.version("triton")\n', "import_not_allowed"),
    ('import os\nv = os.environ.get("BLOCK", "64")\n', "import_not_allowed"),
])
def test_lookups_that_leave_the_allowlist_are_refused(src, rule):
    assert rule in rejects(src)


@pytest.mark.parametrize("src,rule", [
    ("import sys\nsys.settrace(lambda *a: None)\n", "signal_tamper"),
    ("import sys\nsys.setprofile(lambda *a: None)\n", "signal_tamper"),
    ("import sys\nsys.monitoring.use_tool_id(3, 'x')\n", "signal_tamper"),
    ("import sys\nsys.addaudithook(print)\n", "signal_tamper"),
    ("import sys\nsys.call_tracing(print, ())\n", "signal_tamper"),
    ("import threading\nthreading.settrace(print)\n", "signal_tamper"),
    ("import threading\nthreading.setprofile(print)\n", "signal_tamper"),
    ("import threading\nthreading.settrace_all_threads(print)\n", "signal_tamper"),
    ("import cProfile\ncProfile.Profile().enable()\n", "signal_tamper"),
    ("import sys\nf = sys._getframe(1)\n", "frame_or_gc_walk"),
    ("import sys as s\nt = s.settrace\nt(print)\n", "signal_tamper"),
    ("def run(x):\n    breakpoint()\n    return x\n", "signal_tamper"),
])
def test_trace_and_profile_hooks_are_rejected(src, rule):
    assert rule in rejects(src)


@pytest.mark.parametrize("src", [
    "from torch.overrides import TorchFunctionMode\nclass M(TorchFunctionMode):\n    pass\nM().__enter__()\n",
    "import torch\nwith torch.overrides.TorchFunctionMode():\n    pass\n",
    "from torch.utils._python_dispatch import TorchDispatchMode\n",
    "import torch\ntorch._C._push_on_torch_function_stack(object())\n",
    "import torch\ntorch._C._push_on_torch_dispatch_stack(object())\n",
    "import torch\ntorch._C._set_torch_function_mode(object())\n",
    "def push(c, m):\n    c._push_on_torch_function_stack(m)\n",
    "class M:\n    def __torch_function__(self, func, types, args=(), kwargs=None):\n        return func(*args)\n",
    ("import torch\nclass T(torch.Tensor):\n    @classmethod\n    def __torch_dispatch__(cls, f, t, a=(), k=None):\n"
     "        return f(*a)\n"),
    "class W:\n    __torch_function__ = classmethod(lambda *a: None)\n",
    'import torch\nlib = torch.library.Library("aten", "IMPL")\n',
    'import torch\n@torch.library.impl("aten::clone", "cpu")\ndef clone(x):\n    return x\n',
    'import torch\ntorch.library.register_kernel(torch.ops.aten.clone.default, "cpu", print)\n',
])
def test_torch_interception_is_rejected(src):
    assert "torch_interception" in rejects(src)


@pytest.mark.parametrize("src", [
    ("import torch\nclass F(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
     "        return x * 2\n    @staticmethod\n    def backward(ctx, g):\n        return g * 2\n"),
    ('import torch\n@torch.library.custom_op("mylib::scale", mutates_args=())\n'
     "def scale(x: torch.Tensor) -> torch.Tensor:\n    return x * 2\n"),
    'import torch\nlib = torch.library.Library("mylib", "DEF")\n',
    "import torch\nclass P(torch.Tensor):\n    __torch_function__ = torch._C._disabled_torch_function_impl\n",
    "import torch\ndef f(x):\n    return torch.overrides.has_torch_function((x,))\n",
])
def test_autograd_functions_and_own_custom_ops_are_not_interception(src):
    assert "torch_interception" not in rejects(src)


# --------------------------------------------------------------------------------------------
# C / C++ / CUDA token scan


@pytest.mark.parametrize("snippet,rule", [
    ("#include <thread>\nvoid f() { std::thread t([]{}); t.detach(); }", "threading"),
    ("void f() { pthread_create(&t, nullptr, work, nullptr); }", "threading"),
    ("void f() { if (fork() == 0) { execvp(argv[0], argv); } }", "subprocess"),
    ("void f() { std::system(cmd); popen(cmd, mode); }", "subprocess"),
    ("void* h = dlopen(path, RTLD_NOW); auto g = dlsym(h, name);", "dynamic_code"),
    ("#include <sys/socket.h>\nint s = socket(AF_INET, SOCK_STREAM, 0);", "network"),
    ('int fd = open("/proc/self/mem", O_RDWR);', "process_memory"),
    ("long r = ptrace(PTRACE_ATTACH, pid, 0, 0);", "process_memory"),
    ("cudaStreamAttrValue a; a.accessPolicyWindow.num_bytes = n; a.accessPolicyWindow.hitRatio = 1.0f;", "persisting_l2"),
    ("cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, bytes);", "persisting_l2"),
    ("void f() { signal(SIGALRM, SIG_IGN); }", "signal_tamper"),
    ('void f() { PyRun_SimpleString("import os"); }', "dynamic_code"),
    ('void f() { auto m = py::module_::import("threading"); }', "threading"),
    ('void f() { py::module_::import("time").attr("perf_counter") = py::cpp_function(g); }', "monkeypatching"),
])
def test_cpp_exploits(snippet, rule):
    assert rule in rejects(snippet, language="cuda", path="k.cu")


def test_cpp_comments_and_strings_are_ignored():
    src = '/* std::thread t; fork(); */\n// dlopen("x")\nconst char* s = "socket( system( ptrace";\n'
    assert scan(src, language="cuda", path="k.cu") == []


def test_cpp_warnings_and_line_numbers():
    src = "#include <cuda_runtime.h>\n\nvoid f() {\n  cudaStream_t s;\n  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);\n}\n"
    fs = scan(src, language="cuda", path="k.cu")
    assert [(f.rule, f.severity, f.line) for f in fs] == [("untracked_stream", "reject", 5)]
    paste = "#define CALL(name) cublas##name##Ex\n#define OK(x) (x)\n"
    fs = scan(paste, language="cuda", path="k.cuh")
    assert [(f.rule, f.severity, f.line) for f in fs] == [("token_paste", "warn", 1)]


def test_cpp_forbidden_calls():
    pol = Policy(forbid_calls=frozenset({"cublasGemmEx", "at::matmul", "torch.bmm"}))
    src = "void f() {\n  cublasGemmEx(h, a, b);\n  auto c = at::matmul(a, b);\n  auto d = torch::bmm(a, b);\n}\n"
    fs = scan(src, language="cuda", path="k.cu", policy=pol)
    assert [(f.rule, f.line) for f in fs if f.rule == "forbidden_call"] == [
        ("forbidden_call", 2), ("forbidden_call", 3), ("forbidden_call", 4)]
    # without the policy: cuBLAS and PyTorch compute in a CUDA C++ solution are only warnings
    assert [(f.rule, f.severity, f.line) for f in scan(src, language="cuda", path="k.cu")] == [
        ("other_language", "warn", 2), ("other_language", "warn", 3)]


def test_cpp_embedded_in_python_is_scanned_at_the_right_line():
    src = 'import torch\nSRC = """\n#include <thread>\nvoid f() { std::thread t(g); }\n"""\n'
    fs = rejected(scan(src, language="cuda"))
    assert {(f.rule, f.line) for f in fs} >= {("threading", 4)}


def test_language_picks_the_scanner():
    # a .cu file is never parsed as Python; a file whose suffix its language does not accept is refused unread
    assert rejects("import socket\n", language="triton", path="main") == {"unexpected_source"}
    assert rejects("import socket\n", language="triton", path="main.py") == {"network", "import_not_allowed"}
    assert rejects("int s = socket(1, 2, 3);", language="cuda", path="main") == {"network", "unexpected_source"}
    assert rejects("int s = socket(1, 2, 3);", language="cuda", path="main.cu") == {"network"}


# --------------------------------------------------------------------------------------------
# large sources (their scan time is measured by benchmarks/bench_static.py, figures in docs/PERFORMANCE.md)


def test_a_2000_line_honest_file_has_no_reject():
    lines = HONEST_AUTOTUNED_MATMUL.splitlines()
    blocks = []
    i = 0
    while sum(len(b.splitlines()) for b in blocks) < 2000:
        blocks.append(HONEST_AUTOTUNED_MATMUL.replace("def run(", f"def run_{i}(").replace("_matmul", f"_matmul_{i}"))
        i += 1
    src = "\n".join(blocks)
    assert len(src.splitlines()) >= 2000 > len(lines)
    assert rejected(scan_sources([("big.py", src)], "triton")) == []


def test_a_2000_line_honest_cuda_file_has_no_finding():
    body = "\n".join(
        f"__global__ void k{i}(const float* __restrict__ x, float* y, int n) {{ int i = blockIdx.x * blockDim.x"
        f" + threadIdx.x; if (i < n) y[i] = x[i] * {i}.f; }}  // kernel {i}"
        for i in range(2000)
    )
    assert scan_sources([("big.cu", body)], "cuda") == []
