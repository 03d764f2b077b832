"""Static integrity rules: scan a solution's sources before anything of it runs.

Every finding comes from a named :class:`Rule` with a severity: ``reject`` means the solution is not run at all,
``warn`` means the dynamic checks decide. A problem that legitimately needs something a rule matches names that
rule in its :class:`Policy` (``allow``); a problem that forbids library shortcuts lists the dotted names in
``forbid_calls``. docs/STATIC_RULES.md documents every rule.

The package is a registry (rules.py): each check module (processes, introspection, dynamic_code, interception,
system, caching, timing_hardware, language, imports) declares its rules and registers small check functions for
what they look at; python.py walks a Python tree (indexed by tree.py) once and dispatches every node to its checks;
names.py resolves names through aliases, assignments and module namespaces, and folding.py folds strings built
from constants; modules.py follows a resolved name through the modules along it; allowlist.py holds what a
solution may import and ship;
cpp.py token-scans C, C++ and CUDA; scan.py is the entry point. The scan is a heuristic filter in front of the dynamic checks and the sandbox; it is not the only
line of defence.
"""

from __future__ import annotations

# the check modules declare their rules and register their checks on import
from . import caching, cpp, dynamic_code, foreign, interception, introspection, language, processes, system  # noqa: F401,E501
from . import imports, timing_hardware  # noqa: F401
from .python import PyScanner
from .rules import CHECKS, REJECT, RULES, WARN, Check, Finding, Policy, Rule, rejected
from .scan import scan_sources

__all__ = ["CHECKS", "REJECT", "RULES", "WARN", "Check", "Finding", "Policy", "PyScanner", "Rule", "rejected",
           "scan_sources"]
