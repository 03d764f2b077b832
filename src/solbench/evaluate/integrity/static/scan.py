"""The entry point: which scanner reads which file, and the policy applied to the findings."""

from __future__ import annotations

import ast
import dataclasses
import gc

from .cpp import scan_cpp
from .python import PY_LANGS, PyScanner
from .rules import REJECT, Finding, Policy

CPP_EXTS = frozenset({".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".hh", ".hxx", ".inl", ".ipp",
                      ".tcc", ".cuinl"})


def kind_of(path: str, language: str) -> str:
    dot = path.rfind(".")
    ext = path[dot:].lower() if dot > path.rfind("/") else ""
    if ext in (".py", ".pyi"):
        return "python"
    if ext in CPP_EXTS:
        return "cpp"
    if language in PY_LANGS or language == "triton":
        return "python"
    if ext in ("", ".txt", ".json", ".md", ".yaml", ".yml", ".toml"):
        return "none" if ext else "cpp"
    return "cpp"


def scan_sources(sources: list[tuple[str, str]], language: str, policy: Policy | None = None) -> list[Finding]:
    """Scan a solution's sources; findings of rules in ``policy.allow`` are dropped."""
    lang = (language or "pytorch").lower()
    policy = dataclasses.replace(policy or Policy(), language=lang)
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
    kind = kind_of(path, lang)
    if kind == "cpp":
        return scan_cpp(path, content, policy)
    if kind != "python":
        return []
    try:
        tree = ast.parse(content, filename=path)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return []  # the build step reports it
    scanner = PyScanner(path, tree, lang, policy, 0, 0, content)
    try:
        return scanner.run()
    except RecursionError:
        return scanner.findings + [Finding("unscannable", REJECT, path, 1, "source nests too deeply to analyse")]
