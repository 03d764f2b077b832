"""The entry point: which scanner reads which file, the sources each language accepts, the solution's own modules,
and the policy applied to the findings."""

from __future__ import annotations

import ast
import dataclasses
import gc

from .allowlist import CPP_SUFFIXES, COMPILED_LANGUAGES
from .cpp import scan_cpp
from .imports import source_findings
from .modules import Own
from .python import PyScanner
from .rules import REJECT, Finding, Policy


def kind_of(path: str, language: str) -> str:
    """How a source is read: "python", "cpp", or "none" for data that nothing executes."""
    dot = path.rfind(".")
    ext = path[dot:].lower() if dot > path.rfind("/") else ""
    if ext == ".py":
        return "python"
    if ext in CPP_SUFFIXES or language in COMPILED_LANGUAGES:
        return "cpp"
    return "none"


def scan_sources(sources: list[tuple[str, str]], language: str, policy: Policy | None = None) -> list[Finding]:
    """Scan a solution's sources; findings of rules in ``policy.allow`` are dropped."""
    lang = (language or "pytorch").lower()
    policy = dataclasses.replace(policy or Policy(), language=lang)
    findings: list[Finding] = []
    gc_was_enabled = gc.isenabled()
    gc.disable()  # parsing allocates many small objects; collecting them mid-scan only costs time
    try:
        own = Own([p for p, _ in sources])
        scanners = []
        for path, content in sources:
            findings.extend(source_findings(path, lang))
            kind = kind_of(path, lang)
            if kind == "cpp":
                findings.extend(scan_cpp(path, content, policy))
            elif kind == "python":
                scanners.append(_python(path, content, lang, policy, own))
        for sc in scanners:  # what each own module binds, before any check follows a chain through it
            if sc is not None and sc.module:
                sc.prepass()
                own.binds[sc.module] = sc.aliases
        for sc in scanners:
            if sc is not None:
                findings.extend(_run(sc))
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


def _python(path: str, content: str, lang: str, policy: Policy, own: Own) -> PyScanner | None:
    try:
        tree = ast.parse(content, filename=path)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None  # the build step reports it
    return PyScanner(path, tree, lang, policy, 0, 0, content, own)


def _run(scanner: PyScanner) -> list[Finding]:
    try:
        return scanner.run()
    except RecursionError:
        return scanner.findings + [Finding("unscannable", REJECT, scanner.path, 1,
                                           "source nests too deeply to analyse")]
