"""Code out of a model's reply: fenced blocks, file names, the entry file, repeats and truncation.

``extract_code(text)`` reads Markdown fences (```` ``` ```` or ``~~~``, any length, any indentation). A block is
code when its info string names Python (``python``, ``py``, ...), when it carries a file name, or when it has no
info string and parses as Python. A block's file name comes from its info string (```` ```python title=kernel.py ````,
```` ```python kernel.py ````, ```` ```kernel.py ````), else from the line before it (``# file: kernel.py``,
``**kernel.py**``, ``### kernel.py``, ```` `kernel.py`: ````), else from a ``# file: kernel.py`` first line.
The entry file is the one that defines the entry function (``run``); an unnamed block that defines it revises
the current entry file. Later blocks replace earlier ones of the same file, so the last complete version wins.
An unterminated final fence (a reply cut off) is kept if its code still parses, else the reply is reported
truncated. A reply with no fence at all is taken whole if it parses and defines the entry.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from pydantic import BaseModel, Field

PYTHON_INFO = {"python", "py", "python3", "py3", "triton", "pytorch", "torch", "ipython"}
NOT_CODE = {"text", "txt", "plain", "console", "bash", "sh", "shell", "zsh", "output", "log", "json", "yaml", "toml",
            "diff", "patch", "markdown", "md", "pycon", "traceback"}
CODE_EXT = r"(?:py|cu|cuh|cpp|cc|cxx|c|h|hpp)"
_NAME = rf"[\w./][\w.\-/]*\.{CODE_EXT}"
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n]*?)[ \t]*$")
_INFO_KEY = re.compile(rf"""(?:title|file|filename|name|path)\s*[=:]\s*["']?(?P<n>{_NAME})["']?""", re.IGNORECASE)
_INFO_BARE = re.compile(rf"(?:^|[\s:{{.,])(?P<n>{_NAME})(?=$|[\s}},])")
# a line that only names a file: "# file: k.py", "File: k.py", "**k.py**", "### k.py", "`k.py`:", "k.py:"
_LABEL = re.compile(rf"""^\s*(?:[#/*>\-]+\s*)*(?:\*\*|__)?\s*(?:(?:file|filename|path)\s*[:=]?\s*)?[`"']?"""
                    rf"""(?P<n>{_NAME})[`"']?\s*(?:\*\*|__)?\s*:?\s*(?:\*\*|__)?\s*$""", re.IGNORECASE)
_SENTENCE = re.compile(rf"`(?P<n>{_NAME})`|\b(?P<m>{_NAME})\b")
_FIRST_LINE = re.compile(rf"^\s*(?:#|//)\s*(?:file(?:name)?\s*[:=]?\s*)?(?P<n>{_NAME})\s*$", re.IGNORECASE)


class Extracted(BaseModel):
    """The files found (name -> source), the one defining the entry function, or why nothing usable was found."""
    files: dict[str, str] = Field(default_factory=dict)
    entry_file: str | None = None
    problem: str | None = None  # a short reason the loop can feed back; None when files and entry_file are usable
    truncated: bool = False  # the reply ended inside a code block

    @property
    def ok(self) -> bool:
        return self.problem is None and self.entry_file is not None


@dataclass
class Block:
    info: str
    code: str
    closed: bool
    before: str  # the last non-blank line before the fence ("" when none)

    @property
    def lang(self) -> str:
        first = self.info.split()[0].lower() if self.info.split() else ""
        return re.split(r"[:{}=,]", first.lstrip("{."), maxsplit=1)[0]


def fenced_blocks(text: str) -> list[Block]:
    """Every fenced block in order; the last one may be unterminated (``closed`` False)."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i, last_text = 0, ""
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m or (m["fence"][0] == "`" and "`" in m["info"]):
            if lines[i].strip():
                last_text = lines[i]
            i += 1
            continue
        fence, indent = m["fence"], len(m["indent"].expandtabs())
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not closing.match(lines[j]):
            body.append(_dedent(lines[j], indent))
            j += 1
        blocks.append(Block(m["info"], "\n".join(body).strip("\n") + "\n", j < len(lines), last_text))
        last_text, i = "", j + 1
    return blocks


def _dedent(line: str, n: int) -> str:
    k = 0
    while k < n and k < len(line) and line[k] in " \t":
        k += 1
    return line[k:]


def _clean(name: str) -> str:
    p = PurePosixPath(name.strip().strip("`'\"").removeprefix("./"))
    return p.name if p.is_absolute() or ".." in p.parts else str(p)


def block_name(b: Block) -> str | None:
    """The file name a block carries: info string, then the line before it, then its own first line."""
    m = _INFO_KEY.search(b.info) or _INFO_BARE.search(b.info)
    if m:
        return _clean(m["n"])
    before = b.before.strip()
    if before and len(before) <= 160:
        m = _LABEL.match(before)
        if m:
            return _clean(m["n"])
        if before.endswith(":"):  # "Here is the updated `kernel.py`:" names one file
            found = {x["n"] or x["m"] for x in _SENTENCE.finditer(before)}
            if len(found) == 1:
                return _clean(found.pop())
    first = next((ln for ln in b.code.splitlines() if ln.strip()), "")
    m = _FIRST_LINE.match(first)
    return _clean(m["n"]) if m else None


def parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):  # ValueError: null bytes
        return False
    return True


def defines(code: str, names: tuple[str, ...]) -> bool:
    """Does the module define one of ``names`` at top level (a function, a class, or an assignment)?"""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):  # judged by text: the grader will report the syntax error itself
        return any(re.search(rf"^(?:async\s+)?(?:def|class)\s+{re.escape(n)}\b", code, re.MULTILINE) for n in names)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in names:
            return True
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
            if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
        if any(isinstance(t, ast.Name) and t.id in names for t in targets):
            return True
    return False


def _is_code(b: Block, name: str | None) -> bool:
    if b.lang in PYTHON_INFO:
        return True
    if b.lang in NOT_CODE:
        return False
    if name is not None:  # ```cuda with a file name, ```kernel.py, or a labelled plain block
        return True
    return b.lang == "" and parses(b.code)


def extract_code(text: str | None, entry: str | tuple[str, ...] = "run",
                 default_name: str = "solution.py") -> Extracted:
    """The solution's files in a model's reply (see the module's docstring for the rules)."""
    entries = (entry,) if isinstance(entry, str) else tuple(entry)
    want = " or ".join(f"`{e}`" for e in entries)
    if not text or not text.strip():
        return Extracted(problem="the reply is empty: no code found")
    blocks = fenced_blocks(text)
    if not blocks:
        if parses(text) and defines(text, entries):
            return Extracted(files={default_name: text.strip("\n") + "\n"}, entry_file=default_name)
        return Extracted(problem=f"no code block found: put the whole solution in one ```python block that "
                                 f"defines {want}")
    files: dict[str, str] = {}
    named: set[str] = set()  # files whose name the reply gave (others are default_name)
    entry_file: str | None = None
    snippets: list[str] = []  # unnamed blocks that define nothing asked for
    truncated = cut_unparsed = False
    for b in blocks:
        name = block_name(b)
        if not b.closed:
            truncated = True
            if not parses(b.code):
                cut_unparsed = cut_unparsed or b.lang not in NOT_CODE
                continue
        if not b.code.strip() or not _is_code(b, name):
            continue
        has_entry = (name is None or name.endswith(".py")) and defines(b.code, entries)
        if name is None:
            if not has_entry:
                snippets.append(b.code)
                continue
            name = entry_file or default_name  # an unnamed version of the entry file revises it
        else:
            named.add(name)
        files[name] = b.code
        if has_entry:
            if entry_file and entry_file != name and entry_file not in named:
                files.pop(entry_file, None)  # an unnamed earlier version, superseded by a named file
            entry_file = name
        elif name == entry_file:
            entry_file = None  # the last version of the entry file no longer defines the entry
    if entry_file is None:
        stale = [n for n in files if n.endswith(".py") and defines(files[n], entries)]
        entry_file = stale[-1] if stale else None
    if entry_file is not None:
        return Extracted(files=files, entry_file=entry_file, truncated=truncated)
    if cut_unparsed:
        return Extracted(files=files, truncated=True,
                         problem="the reply was cut off inside a code block and the code does not parse: "
                                 "send the complete file again, shorter if need be")
    if not files and snippets:
        files = {default_name: snippets[-1]}
    if files:
        return Extracted(files=files, truncated=truncated, problem=f"no code block defines the entry function {want}")
    return Extracted(truncated=truncated, problem="the reply has code blocks, but none holds Python code")
