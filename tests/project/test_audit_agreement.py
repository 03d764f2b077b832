"""benchmarks/audit_agreement.py on the CPU: which honest fixtures it takes for a device, and the margin it gives
each workload against the audit's floor (``audit_verdict.verdict``). No GPU is used."""

from __future__ import annotations

import importlib.util
import json

import pytest

from tests.paths import ROOT, TESTS


def _bench():
    spec = importlib.util.spec_from_file_location("audit_agreement", ROOT / "benchmarks" / "audit_agreement.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _entries() -> list[dict]:
    return [e for p in sorted((TESTS / "honest").glob("MANIFEST*.json")) for e in json.loads(p.read_text())]


def test_the_honest_fixtures_are_those_the_test_sets_run_on_each_device():
    bench, entries = _bench(), _entries()
    cpu = {label for label, _, _ in bench.honest("cpu", set())}
    gpu = {label for label, _, _ in bench.honest("cuda", set())}
    assert cpu == {e["file"] for e in entries if e["runs_on"] == "cpu"}
    assert gpu == {e["file"] for e in entries if e.get("gpu_too", True)}
    assert "cuda_graph_cache.py" in gpu - cpu
    (label, problem, path), = bench.honest("cuda", {"cuda_graph_cache.py"})
    assert path == TESTS / "honest" / "cuda_graph_cache.py" and path.exists() and problem.workloads


def test_the_margin_is_the_claim_over_the_verdicts_floor():
    from solbench.evaluate.timing.audit_verdict import AGREE

    margin = _bench().margin
    floor = AGREE["cuda"] * 2.0 - 0.1
    assert margin(1.5, 2.0, 0.1, "cuda") == pytest.approx(1.5 / floor)
    assert margin(1.6, 2.0, 0.1, "cuda") > 1 > margin(1.4, 2.0, 0.1, "cuda")  # the floor is 1.5 ms
    assert margin(0.1, 0.2, 0.15, "cpu") is None  # a floor under zero convicts nothing
    assert margin(None, 2.0, 0.1, "cuda") is None and margin(1.0, None, 0.1, "cuda") is None
