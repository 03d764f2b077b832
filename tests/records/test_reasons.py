"""The registry of reason codes and warnings (records/reasons.py): complete, current in the docs, no stale entry."""

import ast
import json
import re

import pytest

from solbench.records import reasons
from solbench.records.reasons import CODES, FAMILIES, Kind, lookup, unknown
from tests.paths import EXPLOITS, ROOT
from tests.paths import SRC as SOURCES

SRC = SOURCES / "solbench"
TARGETS = {"reasons": Kind.REASON, "codes": Kind.REASON, "warnings": Kind.WARNING}
#: calls that set reason codes, and which of their arguments holds them
CALLS = {"Rejected": 0, "hack": 1, "fail": 1, "failed": 2}


def _literals(node):
    """The string constants an expression passes as codes: itself, a collection's items, both arms of a choice."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        for x in node.elts:
            yield from _literals(x)
    elif isinstance(node, ast.IfExp):
        yield from _literals(node.body)
        yield from _literals(node.orelse)
    elif isinstance(node, ast.BinOp):
        yield from _literals(node.left)
        yield from _literals(node.right)
    elif isinstance(node, ast.Call) and ast.unparse(node.func) in ("sorted", "list", "set", "frozenset"):
        for x in node.args:
            yield from _literals(x)


def _owner(expr: str) -> str:
    """The collection a list operation works on: ``res.warnings`` and ``result["reasons"]`` by their last name."""
    return re.findall(r"\w+", expr)[-1]


def _reason_pairs(tree):
    """The codes of ``(code, message)`` pairs returned by functions annotated to return them and saying (in their
    docstring) that the pair is a reason."""
    for f in ast.walk(tree):
        if (isinstance(f, ast.FunctionDef) and f.returns is not None and "tuple[str, str]" in ast.unparse(f.returns)
                and "reason" in (ast.get_docstring(f) or "")):
            for r in ast.walk(f):
                if isinstance(r, ast.Return) and isinstance(r.value, ast.Tuple) and r.value.elts:
                    yield r.value.elts[0], r.lineno


def _set_codes():
    """(code, kind, where) for every literal the evaluator (and the agent track's grader) sets as a reason or a
    warning: in a ``reasons``/``codes``/``warnings`` entry, keyword or list operation, as the code argument of
    ``Rejected``, ``hack``, a judging stage's ``fail`` and ``WorkloadReport.failed``, or first in a returned
    ``(code, message)`` pair."""
    files = [*sorted((SRC / "evaluate").rglob("*.py")), SRC / "agents" / "grader.py", SRC / "records" / "scoring.py"]
    for path in files:
        tree = ast.parse(path.read_text())
        for n in ast.walk(tree):
            found = []
            if isinstance(n, ast.Dict):
                found = [(v, TARGETS[k.value]) for k, v in zip(n.keys, n.values)
                         if isinstance(k, ast.Constant) and k.value in TARGETS]
            elif isinstance(n, ast.Call):
                name = ast.unparse(n.func)
                found = [(kw.value, TARGETS[kw.arg]) for kw in n.keywords if kw.arg in TARGETS]
                last = name.rsplit(".", 1)
                if len(last) == 2 and last[1] in ("append", "extend", "add") and n.args:
                    owner = _owner(last[0])
                    if owner in TARGETS:
                        found.append((n.args[0], TARGETS[owner]))
                if last[-1] in CALLS and len(n.args) > CALLS[last[-1]]:
                    found.append((n.args[CALLS[last[-1]]], Kind.REASON))
            elif isinstance(n, ast.AugAssign):
                owner = _owner(ast.unparse(n.target))
                if owner in TARGETS:
                    found = [(n.value, TARGETS[owner])]
            for expr, kind in found:
                for code in _literals(expr):
                    yield code, kind, f"{path.relative_to(ROOT)}:{n.lineno}"
        for expr, line in _reason_pairs(tree):
            for code in _literals(expr):
                yield code, Kind.REASON, f"{path.relative_to(ROOT)}:{line}"


def test_the_scan_sees_the_codes_it_is_meant_to():
    seen = {code for code, _, _ in _set_codes()}
    # one of each way a code is set: a dict entry, a keyword, an append, Rejected, hack, fail, a warning
    assert {"timeout", "compile_error", "input_mutation", "output_recheck", "below_floor", "stale_memory",
            "noisy_timing", "vendor_kernel", "language_unavailable", "bad_submission"} <= seen


def test_every_code_the_evaluator_sets_is_registered():
    missing = [(code, kind.value, where) for code, kind, where in _set_codes() if unknown([code], kind)]
    assert not missing, missing


def test_every_code_the_exploit_corpus_expects_is_a_registered_reason():
    expected = set()
    for manifest in EXPLOITS.glob("MANIFEST*.json"):
        for entry in json.loads(manifest.read_text()):
            expected |= set(entry.get("expect_reasons_any") or []) | set(entry.get("expect_reasons_gpu") or [])
    assert not unknown(expected, Kind.REASON)


def test_no_registered_code_is_stale():
    """Each registered code is set somewhere outside the registry (as a literal in the sources)."""
    text = "\n".join(p.read_text() for p in SRC.rglob("*.py") if p.name != "reasons.py")
    stale = [c for c in CODES if f'"{c}"' not in text]
    assert not stale, stale


def test_entries_are_well_formed():
    for code in [*CODES.values(), *FAMILIES.values()]:
        assert code.kinds and code.rationale.endswith(".") and "\n" not in code.rationale, code.id
        assert bool(code.verdicts) == (Kind.REASON in code.kinds), code.id
    for code in CODES:
        assert lookup(code) is CODES[code]


@pytest.mark.parametrize("code, family", [("static:network", "static:<rule>"),
                                          ("reference_runtime_error", "<baseline>_<verdict>"),
                                          ("compile_timeout", "<baseline>_<verdict>"),
                                          ("baseline_file_incorrect_numerical", "<baseline>_<verdict>")])
def test_families_stand_for_their_codes(code, family):
    assert lookup(code) is FAMILIES[family]


def test_unknown_codes_are_named():
    assert unknown(["timeout", "made_up_code", "reference_passed"], Kind.REASON) == ["made_up_code",
                                                                                     "reference_passed"]
    assert unknown(["noisy_timing"], Kind.REASON) == ["noisy_timing"]  # a warning, not a reason


def test_the_worker_keeps_its_own_warnings():
    assert {"ghost_inconclusive", "vendor_kernel", "dsl_share_low"} <= reasons.worker_warnings()
    assert "time_unconfirmed" not in reasons.worker_warnings()  # the runner's to decide


def test_the_docs_table_is_generated_from_the_registry():
    assert (ROOT / "docs" / "REASONS.md").read_text() == reasons.render()
