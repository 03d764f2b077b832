"""A native solution's build on the trusted side (``native.carry``): the library and solbench's binding."""

from __future__ import annotations

import threading

from solbench.evaluate.native import build as native_build
from solbench.evaluate.native.carry import Carry
from tests.paths import AXPY, FIXTURES

WAIT_S = 60.0  # far longer than either fake build: only a build that never starts runs into it


def _solution():
    from solbench.evaluate.languages.cuda_cpp import CudaCpp
    from solbench.problems.problem import load_problem
    from solbench.problems.solution import load_solution

    return CudaCpp(), load_solution(FIXTURES / "cuda_cpp" / "axpy_cpp.json", load_problem(AXPY).definition)


def test_the_binding_builds_beside_the_library_not_after_it(tmp_path, monkeypatch):
    """On a machine's first native solution both builds are about as long (20 to 50 s each on the H200): each fake
    build here waits until the other has started, so built one after the other they would never both finish."""
    started = {"library": threading.Event(), "binding": threading.Event()}

    def fake(kind: str, other: str, name: str):
        def build(plan, *args):
            started[kind].set()
            return native_build.Outcome(files={name: b"x"}) if started[other].wait(WAIT_S) else \
                native_build.compile_error(f"the {other} never started while the {kind} was building")
        return build

    monkeypatch.setattr(native_build, "library", fake("library", "binding", "lib.so"))
    monkeypatch.setattr(native_build, "binding", fake("binding", "library", "binding.so"))
    language, solution = _solution()
    carry = Carry(language, solution, "cpu", tmp_path / "private", tmp_path / "cache", view={"hidden": []})
    assert carry.failed is None, carry.failed
    assert carry.report["cached"] is False and carry.report["binding_cached"] is False
    assert sorted(p.name for p in (tmp_path / "private" / "build" / carry.key).iterdir()) == ["binding.so", "lib.so"]

    again = Carry(language, solution, "cpu", tmp_path / "private2", tmp_path / "cache", view={"hidden": []})
    assert again.report["cached"] is True and again.report["binding_cached"] is True  # both from the cache


def test_a_binding_that_does_not_build_fails_the_evaluation_with_its_message(tmp_path, monkeypatch):
    monkeypatch.setattr(native_build, "library", lambda plan, *a: native_build.Outcome(files={"lib.so": b"x"}))
    monkeypatch.setattr(native_build, "binding", lambda plan, *a: native_build.compile_error("no compiler here"))
    language, solution = _solution()
    carry = Carry(language, solution, "cpu", tmp_path / "private", tmp_path / "cache", view={"hidden": []})
    assert carry.failed == {"verdict": "compile_error", "reasons": ["compile_error"], "message": "no compiler here"}
