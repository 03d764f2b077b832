"""The rule registry: rules, findings, the policy, and the checks registered for each rule.

As in bandit, every check is one small function registered by a decorator for what it looks at: AST node types
(:func:`visits`), calls by their resolved callee (:func:`on_call`), attribute names (:func:`on_attr`), identifiers
(:func:`on_ident`), string constants (:func:`on_string`), assignment targets (:func:`on_target`), resolved dotted
names (:func:`on_name`, and the declarative table :func:`names`) or C++ text (:func:`on_cpp`, :func:`cpp_pattern`).
Each check names the rule (or rules) it reports; each rule has an id, a severity and a rationale. ``RULES`` and
``CHECKS`` are what docs/STATIC_RULES.md documents.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
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
    #: only the solution's own language may do the work (``foreign_language`` rejects another's use)
    single_language: bool = False
    #: the solution's language (set by ``scan_sources``)
    language: str = ""


#: every rule by id, in the order the check modules declare them
RULES: dict[str, Rule] = {}


def rule(name: str, severity: str, rationale: str) -> str:
    """Declare a rule; returns its id."""
    if name in RULES:
        raise ValueError(f"rule {name!r} declared twice")
    if severity not in (REJECT, WARN):
        raise ValueError(f"rule {name!r}: severity must be {REJECT!r} or {WARN!r}")
    RULES[name] = Rule(name, severity, rationale)
    return name


def rejected(findings: list[Finding]) -> list[Finding]:
    """The findings of reject severity."""
    return [f for f in findings if f.severity == REJECT]


# --------------------------------------------------------------------------------------------
# checks

#: what a check is registered for (``Check.kind``)
KINDS = ("node", "call", "attr", "ident", "string", "target", "name", "cpp")


@dataclass(frozen=True)
class Check:
    func: Callable[..., None]
    #: the rules it reports ("*" for a check that reports whatever the name table says)
    rules: tuple[str, ...]
    kind: str
    #: node types, callee names, attribute names or target types it runs on; () for all of its kind
    keys: tuple
    #: evaluated once per file: whether the check runs there at all (None: always)
    when: Callable[[object], bool] | None

    @property
    def name(self) -> str:
        return self.func.__name__


CHECKS: list[Check] = []
#: run once per Python file after the name pre-pass, before any check (they set up per-file state)
SETUPS: list[Callable[[object], None]] = []


def _register(kind: str, rules: str | tuple[str, ...], keys: tuple, when) -> Callable:
    rules_t = (rules,) if isinstance(rules, str) else tuple(rules)

    def deco(fn: Callable) -> Callable:
        CHECKS.append(Check(fn, rules_t, kind, keys, when))
        return fn

    return deco


def visits(rules: str | tuple[str, ...], *node_types: type, when=None) -> Callable:
    """``fn(scanner, node)`` on every node of these AST types."""
    return _register("node", rules, node_types, when)


def on_call(rules: str | tuple[str, ...], *callees: str, when=None) -> Callable:
    """``fn(scanner, call, callee)`` on calls whose callee resolves to one of ``callees`` (on every call when none
    is given; ``callee`` is then None where the callee does not resolve)."""
    return _register("call", rules, callees, when)


def on_attr(rules: str | tuple[str, ...], *attrs: str, when=None) -> Callable:
    """``fn(scanner, node)`` on ``x.<attr>`` for each of ``attrs``, whatever ``x`` is."""
    return _register("attr", rules, attrs, when)


def on_ident(rules: str | tuple[str, ...], when=None) -> Callable:
    """``fn(scanner, identifier, node)`` on every identifier loaded, imported or used as an attribute name."""
    return _register("ident", rules, (), when)


def on_string(rules: str | tuple[str, ...], when=None) -> Callable:
    """``fn(scanner, node, text)`` on every non-empty str (or bytes, read as latin-1) constant."""
    return _register("string", rules, (), when)


def on_target(rules: str | tuple[str, ...], *target_types: type, when=None) -> Callable:
    """``fn(scanner, target, value, anchor)`` on each target of an assignment or ``del`` (tuples unpacked; the
    value is None for unpacked elements and deletions)."""
    return _register("target", rules, target_types, when)


def on_name(rules: str | tuple[str, ...], when=None) -> Callable:
    """``fn(scanner, dotted, node, what)`` on every resolved dotted name (``what``: "uses" or "imports")."""
    return _register("name", rules, (), when)


def on_cpp(rules: str | tuple[str, ...], when=None) -> Callable:
    """``fn(ctx)`` on every C/C++/CUDA text (see ``cpp.CppText``)."""
    return _register("cpp", rules, (), when)


def setup(fn: Callable[[object], None]) -> Callable[[object], None]:
    SETUPS.append(fn)
    return fn


@dataclass(frozen=True)
class CppPattern:
    rule: str
    regex: re.Pattern[str]
    what: str
    #: the regex only runs on code holding one of these identifiers, or one of these substrings (a cheap gate:
    #: most honest kernels skip every pattern)
    words: frozenset[str]
    subs: tuple[str, ...]


CPP_PATTERNS: list[CppPattern] = []


def cpp_pattern(rule_name: str, regex: str | re.Pattern[str], what: str, words: str = "", subs: str = "") -> None:
    """Report ``rule_name`` wherever ``regex`` matches C/C++/CUDA code (comments and literals blanked out)."""
    if rule_name not in RULES:
        raise ValueError(f"cpp_pattern() for undeclared rule {rule_name!r}")
    rx = regex if isinstance(regex, re.Pattern) else re.compile(regex)
    CPP_PATTERNS.append(CppPattern(rule_name, rx, what, frozenset(words.split()), tuple(subs.split())))


# --------------------------------------------------------------------------------------------
# the name table: dotted names a rule matches (an entry matches itself and everything under it)

NAME_RULES: dict[str, tuple[str, ...]] = {}
NAME_PATTERNS: list[tuple[re.Pattern[str], str]] = []
#: per rule, ``unless(name, what)``: a name the table matches that the rule still leaves alone
NAME_FILTERS: dict[str, Callable[[str, str], bool]] = {}


def names(rule_name: str, table: str = "", *, pattern: str | None = None,
          unless: Callable[[str, str], bool] | None = None) -> None:
    """Make ``rule_name`` match the whitespace-separated dotted names of ``table`` (and what lies under them), and
    the full names matching ``pattern``."""
    if rule_name not in RULES:
        raise ValueError(f"names() for undeclared rule {rule_name!r}")
    for n in table.split():
        NAME_RULES[n] = NAME_RULES.get(n, ()) + (rule_name,)
    if pattern:
        NAME_PATTERNS.append((re.compile(pattern), rule_name))
    if unless is not None:
        NAME_FILTERS[rule_name] = unless


def rules_for(name: str) -> list[str]:
    """Every rule whose table entry is ``name`` or a dotted prefix of it, or whose pattern matches it."""
    out: list[str] = []
    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        hit = NAME_RULES.get(".".join(parts[:i]))
        if hit:
            out.extend(hit)
    for rx, r in NAME_PATTERNS:
        if rx.match(name):
            out.append(r)
    return out


# --------------------------------------------------------------------------------------------
# message helpers


def one_line(text: str, limit: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def src(node: ast.AST) -> str:
    try:
        return one_line(ast.unparse(node), 80)
    except Exception:  # pragma: no cover - unparse of odd trees
        return type(node).__name__
