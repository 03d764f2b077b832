import os
from pathlib import Path

# before torch loads OpenMP: its workers sleep when a parallel region ends instead of spinning for milliseconds on a
# core the other test workers, and the evaluations' processes (keeper.child_env), need
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest  # noqa: E402
import torch  # noqa: E402

from tests.paths import AXPY

os.environ.setdefault("TRITON_CACHE_DIR", str(Path(os.environ.get("TMPDIR", "/tmp")) / "solbench-triton-cache"))


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def inline_solution(problem, name: str, src: str, *extra):
    """A one-file PyTorch solution (``k.py::run``, returning its outputs) written in a test."""
    from solbench.problems.solution import Solution, SourceFile

    return Solution(name=name, definition=problem.name, spec={"language": "pytorch", "entry_point": "k.py::run",
                                                               "destination_passing_style": False},
                    sources=[SourceFile(path="k.py", content=src), *extra])


@pytest.fixture
def axpy():
    from solbench.problems.problem import load_problem

    return load_problem(AXPY)


#: the outcomes of tests/corpus/test_exploits.py's two corpus tests, counted from their reports (in the process
#: that prints the summary, also when pytest-xdist runs the tests in others), printed at the end of the run
INTEGRITY_TALLY = {"exploits_caught": 0, "exploits_missed": [], "honest_passed": 0, "false_rejects": []}
_TALLIED = {"test_exploit_is_caught": ("exploits_caught", "exploits_missed"),
            "test_honest_solution_passes": ("honest_passed", "false_rejects")}


def pytest_runtest_logreport(report):
    """Counts the corpus's outcomes; with SOLBENCH_INSTAFAIL set (scripts/gpu-check.sh sets it), a failure's
    report is printed when it happens: a stage stopped at its time limit loses pytest's summary at the end."""
    test, _, param = report.nodeid.rpartition("::")[2].partition("[")
    if test in _TALLIED and report.when == "call" and not report.skipped:
        good, bad = _TALLIED[test]
        if report.passed:
            INTEGRITY_TALLY[good] += 1
        else:
            INTEGRITY_TALLY[bad].append(param.rstrip("]"))
    if report.failed and os.environ.get("SOLBENCH_INSTAFAIL"):
        print(f"\nINSTAFAIL {report.nodeid} ({report.when}): {report.longreprtext[-2500:]}", flush=True)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    t = INTEGRITY_TALLY
    if not (t["exploits_caught"] or t["exploits_missed"] or t["honest_passed"] or t["false_rejects"]):
        return
    terminalreporter.write_sep("=", "integrity corpus")
    terminalreporter.write_line(f"exploits caught: {t['exploits_caught']}, missed: {len(t['exploits_missed'])} "
                                f"{t['exploits_missed']}")
    terminalreporter.write_line(f"honest solutions passed: {t['honest_passed']}, false rejects: "
                                f"{len(t['false_rejects'])} {t['false_rejects']}")
