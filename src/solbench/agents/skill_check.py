"""The mechanical check of a SKILL.md: evidence-backed claims in prose, no code, commands or API calls.

MetaKernelBench's transfer protocol hands a skill from one attempt to another on the condition that it holds
knowledge, not a solution. The instruction alone does not hold (a 10-line solution crossed arms inside a skill), so
every skill is checked before it is kept or handed on. What is cut, by rule:

* ``fenced``: fenced blocks (```` ``` ```` or ``~~~``, any info string, an unclosed one to the end) and ``<pre>``
  blocks, fences included;
* ``python``: a line that parses as a Python statement other than prose-like expressions (a bare name, number,
  string, formula or comparison of names and numbers, a ``label: word`` annotation): assignments, calls,
  attribute or item access, imports, definitions, control-flow headers (``for ...:``), returns, decorators;
* ``c``: a line of C, C++ or CUDA: preprocessor directives (``#include``, ``#define``, ``#pragma`` ...), a line of
  only brackets, a line ending in ``;`` or ``{`` that holds ``(``, ``=`` or ``[``, a line starting with ``}``, a
  line holding ``__global__``, ``__device__``, ``__shared__`` or a ``<<<...>>>`` launch;
* ``shell``: a command line: a prompt (``$``, ``>>>``), ``./name``, or a command word (pip, python, nvcc, ncu,
  make, git, export ...) followed by a flag, a path or an assignment;
* ``continuation``: the lines after a code line whose brackets are still open, and the rest of an indented block
  (four spaces or a tab, after a blank line) any of whose lines is code;
* ``inline``: in prose, an inline code span (backticks, ``<code>``) holding anything but a name or a number, a
  dotted call (``torch.mm(a, b)``) or a C++ qualified name (``at::mm``): replaced by ``[code removed]``.

Each run of cut lines becomes one line ``[N lines of code removed]``. A skill whose cut characters are more than
half of its own is withheld whole (:data:`WITHHELD`). Markdown list and quote markers are not part of a line's
check. Encoded or paraphrased code ("load x, scale it by alpha") passes: that is knowledge, which a skill may hold.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

WITHHELD = "[SKILL.md withheld: {cut} of {total} characters were code, which a skill may not hold]"
REMOVED = "[code removed]"
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_MARKER = re.compile(r"^\s*(?:>\s*)*(?:[-*+]\s+|\d+[.)]\s+)?")
_SHELL_WORDS = {"pip", "pip3", "python", "python3", "nvcc", "ncu", "nsys", "make", "cmake", "git", "bash", "sh",
                "export", "cd", "ls", "cat", "echo", "sudo", "conda", "apt", "apt-get", "torchrun", "pytest",
                "solbench", "g++", "gcc", "clang", "clang++", "cuobjdump", "nvidia-smi", "env", "chmod", "rm", "cp"}
_ARG = re.compile(r"-{1,2}[A-Za-z]|\.{0,2}/\w|\w+/\w|\w+=\S|\S+\.(py|cu|cpp|h|so|txt|json)$")  # flag, path, VAR=
_C_DIRECTIVE = re.compile(r"^#\s*(include|define|pragma|ifdef|ifndef|endif|undef|if|else|elif)\b")
_C_WORDS = re.compile(r"__global__|__device__|__shared__|__syncthreads|<<<.*>>>")
_SPAN = re.compile(r"(`+)([^`\n]+?)\1|<code>(.*?)</code>")
_CALL = re.compile(r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\s*\([^()\n]*\)")
_QUALIFIED = re.compile(r"\b[A-Za-z_]\w*(?:::[A-Za-z_~]\w*)+")
_PLAIN = re.compile(r"^[\w.+\-/%x ]+$")  # a name, a number, a dtype, a size: kept in a span
_OPEN, _CLOSE = "([{", ")]}"
_CODE_STMTS = (ast.Assign, ast.AugAssign, ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef,
               ast.ClassDef, ast.Return, ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith,
               ast.Try, ast.Raise, ast.Assert, ast.Delete, ast.Global, ast.Nonlocal, ast.Pass, ast.Break,
               ast.Continue)
_PROSE_EXPRS = (ast.Name, ast.Constant, ast.BinOp, ast.Compare, ast.UnaryOp, ast.BoolOp, ast.Tuple)


@dataclass
class Checked:
    text: str  # what is kept (or the withheld note)
    lines_cut: int = 0
    spans_cut: int = 0
    reasons: dict[str, int] = field(default_factory=dict)  # lines or spans cut per rule
    chars_cut: int = 0
    chars: int = 0
    withheld: bool = False

    def report(self) -> dict:
        return {"lines_cut": self.lines_cut, "spans_cut": self.spans_cut, "reasons": dict(self.reasons),
                "chars_cut": self.chars_cut, "chars": self.chars, "withheld": self.withheld}


def _balance(s: str) -> int:
    return sum(s.count(c) for c in _OPEN) - sum(s.count(c) for c in _CLOSE)


def _closed(s: str) -> str:
    """``s`` with its open brackets closed, in order, so that one line of a longer statement can be parsed."""
    stack = []
    for ch in s:
        if ch in _OPEN:
            stack.append(_CLOSE[_OPEN.index(ch)])
        elif ch in _CLOSE and stack and stack[-1] == ch:
            stack.pop()
    return s + "".join(reversed(stack))


def _prose_expr(node: ast.expr) -> bool:
    if isinstance(node, (ast.Tuple, ast.BoolOp)):
        return all(_prose_expr(e) for e in (node.elts if isinstance(node, ast.Tuple) else node.values))
    if isinstance(node, ast.BinOp):
        return _prose_expr(node.left) and _prose_expr(node.right)
    if isinstance(node, ast.Compare):
        return _prose_expr(node.left) and all(_prose_expr(c) for c in node.comparators)
    if isinstance(node, ast.UnaryOp):
        return _prose_expr(node.operand)
    return isinstance(node, (ast.Name, ast.Constant))


def _python(s: str) -> bool:
    if re.match(r"^@[A-Za-z_][\w.]*(\(.*)?$", s):  # a decorator
        return True
    src = _closed(s)
    if src.rstrip().endswith(":"):
        src += "\n    pass"
    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError):
        return False
    for stmt in tree.body:
        if isinstance(stmt, _CODE_STMTS) or (isinstance(stmt, ast.AnnAssign) and stmt.value is not None):
            return True
        if isinstance(stmt, ast.Expr) and not _prose_expr(stmt.value):
            return True
    return False


def _c(s: str) -> bool:
    if _C_DIRECTIVE.match(s) and not s.startswith("# ") or _C_WORDS.search(s):
        return True
    if re.fullmatch(r"[{}()\[\];\s]+", s) or s.startswith("}"):
        return True
    return s.endswith((";", "{")) and any(c in s for c in "(=[")


def _shell(s: str) -> bool:
    if re.match(r"^(\$|>>>)\s*\S", s) or re.match(r"^\./[\w.-]+", s):
        return True
    words = s.split()
    return len(words) > 1 and words[0] in _SHELL_WORDS and any(_ARG.match(w) for w in words[1:])


def rule(line: str) -> str | None:
    """Which rule makes ``line`` code (``python``, ``c``, ``shell``), or None for prose."""
    s = _MARKER.sub("", line, count=1).strip()
    if not s or s.startswith("|"):
        return None
    for name, test in (("c", _c), ("shell", _shell), ("python", _python)):
        if test(s):
            return name
    return None


def _mark(lines: list[str]) -> list[str | None]:
    """The rule that cuts each line, or None."""
    why: list[str | None] = [None] * len(lines)
    fence, depth = None, 0
    for i, line in enumerate(lines):
        m = _FENCE.match(line)
        if fence is not None:
            why[i] = "fenced"
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line[m.end():].strip():
                fence = None
            continue
        if m:
            fence, why[i] = m.group(1), "fenced"
            continue
        if line.strip().lower().startswith("<pre"):
            fence, why[i] = "</pre>", "fenced"
            continue
        if depth > 0 and line.strip():
            why[i], depth = "continuation", max(0, depth + _balance(line))
            continue
        why[i] = rule(line)
        depth = max(0, _balance(line)) if why[i] else 0
    _indented_blocks(lines, why)
    return why


def _indented_blocks(lines: list[str], why: list[str | None]) -> None:
    i = 0
    while i < len(lines):
        if lines[i].startswith(("    ", "\t")) and (i == 0 or not lines[i - 1].strip()):
            j = i
            while j < len(lines) and lines[j].strip() and lines[j].startswith(("    ", "\t")):
                j += 1
            if any(why[k] for k in range(i, j)):
                for k in range(i, j):
                    why[k] = why[k] or "continuation"
            i = j
        else:
            i += 1


def _spans(line: str, out: Checked) -> str:
    def span(m: re.Match) -> str:
        inner = m.group(2) if m.group(2) is not None else m.group(3)
        if _PLAIN.match(inner.strip()) and not _CALL.search(inner):
            return m.group(0)
        return cut(m, "inline")

    def cut(m: re.Match, reason: str = "inline") -> str:
        out.spans_cut += 1
        out.chars_cut += len(m.group(0))
        out.reasons[reason] = out.reasons.get(reason, 0) + 1
        return REMOVED

    line = _SPAN.sub(span, line)
    line = _CALL.sub(cut, line)
    return _QUALIFIED.sub(cut, line)


def check(text: str) -> Checked:
    """``text`` with its code cut (see the module's docstring), and what was cut."""
    lines = text.splitlines()
    out = Checked(text="", chars=sum(len(x.strip()) for x in lines))
    why = _mark(lines)
    kept: list[str] = []
    run = 0
    for line, reason in zip([*lines, ""], [*why, None]):
        if reason:
            run += 1
            out.lines_cut += 1
            out.chars_cut += len(line.strip())
            out.reasons[reason] = out.reasons.get(reason, 0) + 1
            continue
        if run:
            kept.append(f"[{run} line{'s' if run > 1 else ''} of code removed]")
            run = 0
        kept.append(_spans(line, out))
    out.text = "\n".join(kept[:-1]).strip()
    if out.chars and out.chars_cut * 2 > out.chars:
        out.withheld, out.text = True, WITHHELD.format(cut=out.chars_cut, total=out.chars)
    return out
