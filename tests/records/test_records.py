"""The records package (``solbench.records``): the bottom layer, and the one list of verdicts."""

import ast
import re

from solbench.records.verdict import VERDICT_ORDER, Verdict, worst
from tests import paths

SRC = paths.SRC / "solbench"


def test_the_records_import_nothing_of_solbench_but_themselves():
    for path in (SRC / "records").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            bad = [n for n in names if n.startswith("solbench") and not n.startswith("solbench.records")]
            assert not bad, (path.name, bad)


def test_verdicts_are_ordered_worst_first_and_compare_as_their_strings():
    assert VERDICT_ORDER[0] == "invalid_reference" and VERDICT_ORDER[-1] == "passed"
    assert worst(["passed", "timeout", "incorrect_numerical"]) == Verdict.TIMEOUT == "timeout"
    assert worst([]) == "unsupported" and all(v.__doc__ for v in Verdict)


_SET = re.compile(r"""(?:\bverdict\s*=\s*|["']verdict["']\s*:\s*)["'](\w+)["']""")


def test_every_verdict_the_code_sets_is_a_member():
    """A verdict spelled in the code is one of ``Verdict``'s: a typo would be a verdict no table knows."""
    seen = {m for path in SRC.rglob("*.py") for m in _SET.findall(path.read_text())}
    seen.discard("GRADER_ERROR")  # the agent track's grader itself failed: no evaluation, so no verdict of one
    assert seen and seen <= set(VERDICT_ORDER), sorted(seen - set(VERDICT_ORDER))
