"""The import allowlist of the static scan (issue 21, root cause 3, and the Python side of root cause 2): every
shipped example, starter, honest corpus file and honest fixture passes it; imports, chains and strings that leave
it, files of a suffix the language does not accept and a solution's own compiler calls are refused."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from solbench.evaluate.integrity.static import rejected, scan_sources
from solbench.evaluate.integrity.static.allowlist import (ALIASES, DENIED, LANGUAGE_PACKAGES, STDLIB_ALLOWED,
                                                          TORCH_ALLOWED)
from solbench.evaluate.integrity.static.modules import reach
from solbench.problems.solution import load_solution
from tests.paths import ROOT, TESTS

NEW_RULES = {"import_not_allowed", "unexpected_source", "compiler_call"}
#: fixtures that are not honest solutions, and the rule that refuses each
DISHONEST_FIXTURES = {
    "background_thread.py": "threading", "crash.py": "signal_tamper", "fork_bomb.py": "subprocess",
    "hang.py": "import_not_allowed", "import_error.py": "import_not_allowed", "leave_child.py": "subprocess",
    "patch_timer.py": "monkeypatching", "phone_home.py": "network", "seed_hunt.py": "frame_or_gc_walk",
    "segfault.py": "process_memory", "tamper_then_fault.py": "monkeypatching",
}


def scan(src: str, language: str = "pytorch", path: str = "main.py") -> set[str]:
    return {f.rule for f in rejected(scan_sources([(path, textwrap.dedent(src))], language))}


def _solution_files() -> list[Path]:
    found = sorted(ROOT.glob("src/solbench/suite/**/solutions/*"))
    found += sorted(p for p in (TESTS / "honest").iterdir() if p.suffix in (".py", ".json")
                    and not p.name.startswith("MANIFEST"))
    for pattern in ("fixtures/sol_execbench/*.json", "fixtures/solutions/*", "fixtures/**/solutions/*",
                    "fixtures/cuda_cpp/*.json", "fixtures/gpu/*.py"):
        found += sorted(TESTS.glob(pattern))
    return [p for p in dict.fromkeys(found) if p.suffix in (".py", ".json")]


def _sources(path: Path) -> tuple[list[tuple[str, str]], str] | None:
    try:
        sol = load_solution(path)
    except Exception:  # malformed fixtures are there to be refused by the loader
        return None
    return [(s.path, s.content) for s in sol.sources], sol.spec.language  # a bare .py's language is guessed


@pytest.mark.parametrize("path", _solution_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_shipped_and_honest_solutions_pass_the_allowlist(path):
    loaded = _sources(path)
    if loaded is None:
        pytest.skip("not a loadable solution (a loader fixture)")
    sources, language = loaded
    rules = {f.rule for f in rejected(scan_sources(sources, language))}
    if path.name in DISHONEST_FIXTURES and "fixtures" in path.parts:
        assert DISHONEST_FIXTURES[path.name] in rules, rules
        return
    assert rules == set(), (path.name, rules)


def test_every_starter_passes_the_allowlist():
    from solbench.agents.starters import starter_files
    from solbench.problems.suite import select_problems

    problems = select_problems("full")
    assert len(problems) >= 30
    for problem in problems:
        for language in ("triton", "cuda_cpp", "cute_dsl", "tilelang", "tvm_tirx", "pytorch"):
            files = starter_files(language, problem)
            fs = rejected(scan_sources(list(files.items()), language))
            assert fs == [], (problem.name, language, fs)


def test_the_i21_03_exploits_are_refused_by_the_scan():
    entries = json.loads((TESTS / "exploits" / "MANIFEST-i21-imports.json").read_text())
    assert len(entries) >= 10
    for e in entries:
        sol = load_solution(TESTS / "exploits" / e["file"])
        fs = rejected(scan_sources([(s.path, s.content) for s in sol.sources], e["language"]))
        assert {f"static:{f.rule}" for f in fs} & set(e["expect_reasons_any"]), (e["file"], fs)
    honest = json.loads((TESTS / "honest" / "MANIFEST-i21-imports.json").read_text())
    assert len(honest) >= 5 and all((TESTS / "honest" / h["file"]).is_file() for h in honest)


# --------------------------------------------------------------------------------------------
# imports, chains, strings


@pytest.mark.parametrize("src", [
    "import torch.utils.dlpack\nfrom torch.utils.dlpack import from_dlpack\ny = torch.utils.dlpack.from_dlpack\n",
    "import numpy as np\na = np.random.rand(3)\nb = np.searchsorted(a, 1)\nc = np.linalg.norm(a)\n",
    "import torch\nf = torch.ops.aten.mm.default\ng = torch.ops.mylib.op\n",
    "import torch\nn = torch.cuda.memory_allocated()\ns = torch.cuda.current_stream()\n",
    "from cutlass.cute.runtime import from_dlpack\nimport cutlass\nimport cutlass.cute as cute\nx = cute.arch\n",
    "import cuda.bindings.driver as cuda\ns = cuda.CUstream(0)\n",
    "import torch\ntorch.backends.cudnn.benchmark = True\n",
    "import triton.language as tl\nh = hasattr(tl, 'float8e4nv')\nf = tl.extra.cuda.libdevice.exp\n",
    "from triton.language.extra import libdevice\n",
    "import torch\nclass F(torch.autograd.Function):\n    pass\n",
    "import warnings\nwarnings.filterwarnings('ignore')\nimport random\nrandom.seed(0)\n",
    "x = 'torch.float32'\ny = 'kernel.cu'\nz = 'pkg.config'\n",
    "import torch\nF = torch.nn.functional\ndef g():\n    T = torch\n    return T.ones(1)\n",
    "import torch\ndef f(dtype=torch.float32):\n    return dtype\n",
    "import torch\nv = torch.__version__\nx = torch._scaled_mm\n",
    "from __future__ import annotations\nimport typing\nT = typing.Optional[int]\n",
    "import torch\n@torch.no_grad()\ndef f(x):\n    return x\n",
])
def test_allowed_uses(src):
    assert scan(src) == set()


@pytest.mark.parametrize("src,rule", [
    ("import os\n", "import_not_allowed"),
    ("import time\nt = time.perf_counter()\n", "import_not_allowed"),
    ("import pydoc\nm = pydoc.locate('solbench.evaluate.timing.rounds')\n", "import_not_allowed"),
    ("from unittest import mock\nmock.patch('solbench.evaluate.timing.rounds.time').start()\n", "import_not_allowed"),
    ("import logging.config\nr = logging.config.BaseConfigurator({}).resolve\n", "import_not_allowed"),
    ("def f():\n    if True:\n        import sys\n", "import_not_allowed"),
    ("import torch as t\nm = t.sys.modules\n", "import_not_allowed"),
    ("import torch.nn.functional as F\nm = F.importlib.import_module\n", "import_not_allowed"),
    ("import typing\nx = typing.sys\n", "import_not_allowed"),
    ("import enum\nb = enum.bltns\n", "import_not_allowed"),
    ("import functools\nb = functools.__builtins__\n", "import_not_allowed"),
    ("import numpy as np\nc = np.ctypeslib\n", "import_not_allowed"),
    ("from torch import sys\n", "import_not_allowed"),
    ("from torch.utils import swap_tensors\n", "import_not_allowed"),
    ("import torch\nm = torch._C\n", "import_not_allowed"),
    ("import torch\nm = torch.utils.cpp_extension.load\n", "compiler_call"),
    ("import torch\nk = torch.cuda.jiterator._create_jit_fn('x')\n", "compiler_call"),
    ("import torch\nf = torch.compile(lambda x: x)\n", "compiler_call"),
    ("import triton\nk = triton.compile('x')\n", "compiler_call"),
    ("import triton\nd = triton.runtime.driver.active\n", "import_not_allowed"),
    ("import dataclasses\nf = dataclasses._create_fn('f', (), ['return 1'])\n", "import_not_allowed"),
    ("def f(x):\n    return x.untyped_storage().type('solbench.evaluate.timing.rounds.Round')\n", "import_not_allowed"),
    ("x = 'os:system'\n", "import_not_allowed"),
    ("m = __import__('sys')\n", "import_not_allowed"),
    ("import solbench\n", "harness_import"),
    ("import torch\nx = [torch]\n", "module_indirection"),
    ("import torch\ndef lib():\n    return torch\n", "module_indirection"),
    ("import torch\nf = lambda: torch\n", "module_indirection"),
    ("import torch\ndef f(m=torch):\n    return m\n", "module_indirection"),
    ("import torch, numpy\nm = torch\nm = numpy\n", "module_indirection"),
    ("import torch\nclass C:\n    t = torch\n", "module_indirection"),
    ("class C:\n    import torch\n", "module_indirection"),
    ("from torch import *\n", "module_indirection"),
    ("import torch\nx = torch.__getattr__('_dynamo')\n", "module_indirection"),
    ("x = help('modules')\n", "module_indirection"),
    ("import torch\ntorch.ops.import_module('x')\n", "module_indirection"),
    ("import typing\ntyping.get_type_hints(print)\n", "dynamic_code"),
    ("import torch\ntorch.ops.load_library('x.so')\n", "dynamic_code"),
    ("import torch\ntorch.set_default_device('cuda')\n", "torch_interception"),
    ("import copy\ncopy.dispatch_table[int] = print\n", "monkeypatching"),
    ("import warnings\nwarnings.showwarning = print\n", "monkeypatching"),
    ("import contextlib\nwith contextlib.chdir('/'):\n    pass\n", "monkeypatching"),
    ("import numpy as np\nnp.seterrcall(print)\n", "signal_tamper"),
    ("x = input()\n", "result_channel"),
])
def test_refused_uses(src, rule):
    assert rule in scan(src)


def test_the_solutions_own_modules_are_followed_through_what_they_bind():
    helper = ("helper.py", "import torch as t\nimport torch.nn.functional as F\n\ndef scale(x):\n    return x\n")
    ok = [("main.py", "import helper\ny = helper.t.ones(1)\nz = helper.scale(2)\nw = helper.F.softmax\n"), helper]
    assert rejected(scan_sources(ok, "pytorch")) == []
    bad = [("main.py", "import helper\nm = helper.t.sys.modules\n"), helper]
    assert "import_not_allowed" in {f.rule for f in rejected(scan_sources(bad, "pytorch"))}
    rel = [("pkg/__init__.py", ""), ("pkg/tools.py", "import torch.nn.functional as F\n"),
           ("pkg/main.py", "from .tools import F\nfrom . import tools\nx = F.importlib\ny = tools.F.softmax\n")]
    fs = rejected(scan_sources(rel, "pytorch"))
    assert [(f.rule, f.path, f.line) for f in fs] == [("import_not_allowed", "pkg/main.py", 3)]
    # a file named like a module the environment has does not make that module the solution's own
    for name in ("pydoc", "solbench", "os"):
        shadow = [("main.py", f"import {name}\n"), (f"{name}.py", "X = 1\n")]
        assert "import_not_allowed" in {f.rule for f in rejected(scan_sources(shadow, "pytorch"))}, name
    own = [("main.py", "import my_helpers\nx = my_helpers.X\n"), ("my_helpers.py", "X = 1\n")]
    assert rejected(scan_sources(own, "pytorch")) == []


def test_chains_are_followed_to_the_module_they_reach():
    assert reach("torch.sys.modules").name == "sys.modules"
    assert reach("enum.bltns.exec").name == "exec"
    assert reach("torch.nn.functional.importlib.import_module").name == "importlib.import_module"
    assert reach("torch.utils.dlpack.from_dlpack").module == "torch.utils.dlpack"
    assert reach("torch.utils.cpp_extension.load").module == "torch.utils.cpp_extension"
    assert reach("triton.language.core.builtins.exec").name == "exec"
    assert reach("torch.float32").module == "torch" and reach("len").module is None


# --------------------------------------------------------------------------------------------
# sources


@pytest.mark.parametrize("language,path,ok", [
    ("pytorch", "main.py", True), ("pytorch", "table.json", True), ("pytorch", "README.md", True),
    ("pytorch", "notes.txt", True), ("triton", "kernel.cu", False), ("pytorch", "kernel.kern", False),
    ("pytorch", "Makefile", False), ("pytorch", "lib.so", False), ("pytorch", "mod.pyc", False),
    ("cute_dsl", "helper.cpp", False), ("cuda_cpp", "kernel.cu", True), ("cuda_cpp", "kernel.h", True),
    ("cutlass", "main.cpp", True), ("cuda_cpp", "helper.py", False), ("cublas", "table.json", False),
    ("cudnn", "data.txt", False),
])
def test_each_language_accepts_its_own_suffixes(language, path, ok):
    fs = scan_sources([(path, "x = 1\n")], language)
    assert ("unexpected_source" not in {f.rule for f in fs}) is ok


def test_an_unknown_suffix_built_at_run_time_is_refused():
    sol = load_solution(TESTS / "exploits" / "i21_03_unknown_suffix_cpp_extension.json")
    fs = rejected(scan_sources([(s.path, s.content) for s in sol.sources], "pytorch"))
    assert {(f.rule, f.path) for f in fs} >= {("unexpected_source", "kernel.kern"), ("compiler_call", "main.py")}


# --------------------------------------------------------------------------------------------
# the list itself


def test_every_allowlist_entry_is_documented():
    doc = (ROOT / "docs" / "STATIC_RULES.md").read_text()
    section = doc.split("## `import_not_allowed`", 1)[1].split("\n## ", 1)[0]
    entries = " ".join([STDLIB_ALLOWED, TORCH_ALLOWED, DENIED, *LANGUAGE_PACKAGES.values()]).split()
    for entry in entries:
        assert f"`{entry}`" in section or f"`{entry.removesuffix('.*')}`" in section, entry
    for language in LANGUAGE_PACKAGES:
        assert f"| `{language}` |" in section, language


def test_the_kernel_package_alias_table_is_current():
    """The scanner never imports a kernel language; what the installed Triton's allowed modules hold under
    another module's name must be in the table (a new release that adds one fails here)."""
    import importlib
    import pkgutil
    import types

    triton = pytest.importorskip("triton")
    language = importlib.import_module("triton.language")
    found = {}
    for info in pkgutil.walk_packages(language.__path__, "triton.language."):
        try:
            importlib.import_module(info.name)
        except Exception:
            continue
    for name, mod in list(sys.modules.items()):
        if not (name == "triton" or name.startswith("triton.language") or name == "triton.tools.tensor_descriptor"):
            continue
        for attr, value in vars(mod).items():
            if isinstance(value, types.ModuleType) and value.__name__ != f"{name}.{attr}":
                found[(name, attr)] = value.__name__
    missing = {k: v for k, v in found.items() if ALIASES.get(k) != v}
    assert not missing, f"add to allowlist.ALIASES (triton {triton.__version__}): {missing}"


def test_the_scan_imports_no_kernel_language():
    src = ("import sys\nfrom solbench.evaluate.integrity.static import scan_sources\n"
           "code = 'import triton\\nimport triton.language as tl\\nimport cutlass.cute as cute\\n"
           "x = tl.core.builtins\\ny = cute.arch.sys\\n'\n"
           "fs = scan_sources([('main.py', code)], 'triton')\n"
           "print(sorted({f.line for f in fs if f.rule == 'import_not_allowed'}),"
           " any(m.split('.')[0] in ('triton', 'cutlass') for m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    # tl.core.builtins (from the alias table) and cute.arch.sys (named like a module that matters) are refused,
    # and neither package was imported to find out
    assert out.stdout.strip() == "[4, 5] False", out.stdout
