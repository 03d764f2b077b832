"""The C, C++ and CUDA scan: comments and string literals are blanked out, then the registered patterns
(``cpp_pattern`` in each concern's module) and the checks below run on the code."""

from __future__ import annotations

import ast
import bisect
import re

from .rules import (
    CHECKS,
    CPP_PATTERNS,
    REJECT,
    RULES,
    WARN,
    Finding,
    Policy,
    on_cpp,
    on_string,
    one_line,
    rule,
    rules_for,
)
from .system import PROC
from .timing_hardware import is_embedded_cpp

rule("token_paste", WARN, "Token pasting in a macro can assemble forbidden API names that a token scan cannot see.")
rule("asm_label", REJECT,
     "A declaration renamed with an asm label calls a symbol no name in the source spells (the built library's "
     "imports are checked as well: native_symbol).")

_CPP_STRIP = re.compile(
    r'//[^\n]*|/\*.*?\*/|R"([^(\s"\\]{0,16})\((.*?)\)\1"|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
    re.DOTALL,
)
_CPP_DEFINE = re.compile(r"^[ \t]*#[ \t]*define\b(?:[^\n]*\\\n)*[^\n]*", re.MULTILINE)
_CPP_IMPORT = re.compile(r'(?:PyImport_ImportModule\w*|py::module_?::import)\s*\(\s*"([^"]+)"')
_CPP_PY_IMPORT = re.compile(r"py::module_?::import|PyImport_\w+")
_CPP_ATTR_SET = re.compile(r"\.attr\s*\([^()]*\)\s*=(?!=)")
_CPP_IDENT = re.compile(r"[A-Za-z_]\w*")


class CppText:
    """One C/C++/CUDA text as the checks see it."""

    def __init__(self, path: str, text: str, policy: Policy, offset: int):
        self.path = path
        self.text = text
        self.policy = policy
        self.offset = offset
        self.code, self.literals = strip_cpp(text)
        self.newlines = _newlines(self.code)
        self.idents = frozenset(_CPP_IDENT.findall(self.code))  # the gate of the patterns and checks below
        self.findings: list[Finding] = []

    def add(self, rule_name: str, pos: int, msg: str) -> None:
        line = bisect.bisect_right(self.newlines, pos) + 1 + self.offset
        self.findings.append(Finding(rule_name, RULES[rule_name].severity, self.path, line, one_line(msg, 160)))


def strip_cpp(text: str) -> tuple[str, list[tuple[int, str]]]:
    """Blank out comments and string/char literals (keeping newlines); return the literals by offset."""
    literals: list[tuple[int, str]] = []

    def repl(m: re.Match[str]) -> str:
        s = m.group(0)
        if s[0] in "\"'R":
            literals.append((m.start(), m.group(2) if s[0] == "R" else s[1:-1]))
        return re.sub(r"[^\n]", " ", s)

    return _CPP_STRIP.sub(repl, text), literals


def scan_cpp(path: str, text: str, policy: Policy, offset: int = 0) -> list[Finding]:
    ctx = CppText(path, text, policy, offset)
    code, idents = ctx.code, ctx.idents
    for p in CPP_PATTERNS:
        if not (p.words & idents or any(w in code for w in p.subs)):
            continue
        for m in p.regex.finditer(code):
            ctx.add(p.rule, m.start(), f"{p.what}: {m.group(0).strip()}")
    for c in CHECKS:
        if c.kind == "cpp" and (c.when is None or c.when(ctx)):
            c.func(ctx)
    return ctx.findings


def _newlines(code: str) -> list[int]:
    out = []
    i = code.find("\n")
    while i >= 0:
        out.append(i)
        i = code.find("\n", i + 1)
    return out


# ---- checks on C++ text
#: ``int f(const char*) __asm__("PyRun_SimpleString");``: a declarator (a closing parenthesis or a name) and a
#: string-only asm; statements (``asm volatile("...")`` after ``;``, ``{`` or ``}``) are inline assembly
_ASM_LABEL = re.compile(r"(?:\)|\b(?!volatile\b|__volatile__\b|goto\b|return\b|else\b|do\b)[A-Za-z_]\w*)"
                        r"(?:\s*(?:const|noexcept|throw\s*\(\s*\)))*\s*\b(?:__asm__|__asm|asm)\s*\(\s*\)")
_PY_EVAL = re.compile(r"\b(?:py|pybind11)\s*::\s*(?:exec|eval|eval_file)\b")
_OPENMP = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+omp\b|\bomp_[a-z_]+\s*\(|\bGOMP_\w+|\b__kmpc_\w+", re.MULTILINE)
_POSIX_CALLS = ("open", "openat", "open64", "creat", "opendir", "fdopendir", "scandir", "mmap", "mmap64", "mprotect",
                "shm_open", "memfd_create", "ftruncate", "readlink")
_POSIX_FILES = re.compile(r"(?<![\w.>:])(?:" + "|".join(_POSIX_CALLS) + r")\s*\(")


@on_cpp("asm_label", when=lambda ctx: "asm" in ctx.code)
def asm_label(ctx: CppText) -> None:
    for m in _ASM_LABEL.finditer(ctx.code):
        label = next((lit for pos, lit in ctx.literals if pos >= m.start()), "")
        ctx.add("asm_label", m.start(), f"a declaration bound to the symbol {label[:60]!r} by an asm label")


#: each route's regex runs only where the code holds one of its identifiers (or, for OpenMP, substrings): a
#: necessary condition of a match, so the gate changes no finding and most kernels skip every regex
_ROUTES = ((_PY_EVAL, frozenset({"py", "pybind11"}), (), "dynamic_code", "runs Python source from C++"),
           (_OPENMP, frozenset(), ("omp", "GOMP_", "__kmpc_"), "threading", "OpenMP starts CPU threads"),
           (_POSIX_FILES, frozenset(_POSIX_CALLS), (), "file_io",
            "opens, maps or lists files through POSIX"))


@on_cpp(("dynamic_code", "threading", "file_io"))
def native_routes(ctx: CppText) -> None:
    """Python run from C++ (``py::exec``), OpenMP's threads, POSIX files and mappings: the static scan's first
    look; the built library's imports decide (``native.symbols``)."""
    for rx, words, subs, name, what in _ROUTES:
        if not (words & ctx.idents or any(w in ctx.code for w in subs)):
            continue
        for m in rx.finditer(ctx.code):
            ctx.add(name, m.start(), f"{what}: {m.group(0).strip()[:60]}")


@on_cpp("token_paste", when=lambda ctx: "##" in ctx.code)
def token_paste(ctx: CppText) -> None:
    """``#define CALL(x) cublas##x``: pasting can assemble a name the token scan never sees."""
    for m in _CPP_DEFINE.finditer(ctx.code):
        if "##" in m.group(0):
            ctx.add("token_paste", m.start() + m.group(0).index("##"),
                    f"token pasting in a macro: {m.group(0).strip()[:80]}")


@on_cpp("process_memory")
def proc_literal(ctx: CppText) -> None:
    for pos, lit in ctx.literals:
        for p in PROC:
            if p in lit:
                ctx.add("process_memory", pos, f"string names {p}: {lit[:60]!r}")
                break


@on_cpp("*", when=lambda ctx: "import" in ctx.text or "PyImport_" in ctx.text)
def python_import(ctx: CppText) -> None:
    """``py::module_::import("threading")``: the Python name table applies to the module imported."""
    for m in _CPP_IMPORT.finditer(ctx.text):
        for r in rules_for(m.group(1)):
            ctx.add(r, m.start(), f"imports Python module {m.group(1)}")


@on_cpp("monkeypatching")
def python_attribute_set(ctx: CppText) -> None:
    """``mod.attr("perf_counter") = fake`` in a file that imports Python modules."""
    if _CPP_PY_IMPORT.search(ctx.code):
        for m in _CPP_ATTR_SET.finditer(ctx.code):
            ctx.add("monkeypatching", m.start(), f"assigns an attribute of an imported Python module: {m.group(0)}")


@on_cpp("forbidden_call", when=lambda ctx: bool(ctx.policy.forbid_calls))
def forbidden_cpp_call(ctx: CppText) -> None:
    for name in ctx.policy.forbid_calls:
        for m in _forbid_cpp_regex(name).finditer(ctx.code):
            ctx.add("forbidden_call", m.start(), f"uses {m.group(0)}, which this problem forbids")


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


# ---- C++ embedded in Python


@on_string("*")
def embedded_cpp(s, node: ast.Constant, v: str) -> None:
    """C++/CUDA source in a Python string (load_inline, cupy.RawKernel) is token-scanned in place."""
    if is_embedded_cpp(v):
        s.findings.extend(scan_cpp(s.path, v, s.policy, node.lineno - 1 + s.offset))
