"""Counted work kept across processes (``analysis.work_cache``): what is read back is what a trace gives, the key
moves with every input of a count, held-out shapes never reach the disk, and a bad or unwritable cache costs a
trace, never an error."""

import os
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from solbench.analysis import roofline, work_cache
from solbench.analysis.heldout import draw_heldout
from solbench.problems.problem import load_problem
from solbench.problems.suite import select_problems
from tests.paths import AXPY


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache of the test's own, and a process that has counted nothing yet."""
    monkeypatch.setenv("SOLBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(work_cache, "_MEMO", work_cache.OrderedDict())
    return tmp_path / "cache" / "work"


def _forget(monkeypatch):
    """As a fresh process: nothing in memory, only what is on disk."""
    monkeypatch.setattr(work_cache, "_MEMO", work_cache.OrderedDict())


def _problems():
    """An override with a note, custom inputs, a plain trace, and scalars among the inputs."""
    names = {"sdpa_causal_bwd", "log_softmax_bwd", "rmsnorm"}
    return [p for p in select_problems("full") if p.name in names] + [load_problem(AXPY)]


def test_a_count_read_back_is_the_count_a_trace_gives(cache, monkeypatch):
    problems = _problems()
    assert len(problems) == 4
    for p in problems:
        for w in p.workloads[:3]:
            first = roofline.count_work(p, w)
            _forget(monkeypatch)
            assert asdict(roofline.count_work(p, w)) == asdict(first) == asdict(roofline._count(p, w, None)), \
                (p.name, w.uuid)
    assert len(list(cache.glob("*.json"))) == sum(len(p.workloads[:3]) for p in problems)


def test_a_kept_count_is_read_without_tracing(cache, monkeypatch):
    p = load_problem(AXPY)
    w = p.workloads[0]
    counted = roofline.count_work(p, w)
    _forget(monkeypatch)
    monkeypatch.setattr(roofline, "_count", lambda *a: pytest.fail("traced again"))
    again = roofline.count_work(p, w)
    assert again == counted and again is not counted
    again.flops["vector_fp32"] = -1.0  # what a caller does to its copy stays there
    assert roofline.count_work(p, w) == counted


def test_the_key_moves_with_every_input_of_a_count(monkeypatch):
    p = load_problem(AXPY)
    w = p.workloads[0]
    base = work_cache.key(p, w)
    assert base == work_cache.key(load_problem(AXPY), w)  # the same inputs, the same key
    scalar = next(n for n, s in w.inputs.items() if getattr(s, "value", None) is not None)
    moved = {
        "axes": (p, w.model_copy(update={"axes": {k: v + 1 for k, v in w.axes.items()}})),
        "a scalar input": (p, w.model_copy(update={"inputs": {
            **w.inputs, scalar: w.inputs[scalar].model_copy(update={"value": 3.5})}})),
        "the reference": (replace(p, reference_source=p.reference_source + "\n# changed\n"), w),
        "the definition": (replace(p, definition=p.definition.model_copy(update={"description": "another"})), w),
    }
    keys = {what: work_cache.key(*args) for what, args in moved.items()}
    assert base not in keys.values() and len(set(keys.values())) == len(keys), keys
    monkeypatch.setattr(work_cache, "_code", lambda: "other counting code or torch")
    assert work_cache.key(p, w) != base


def test_the_key_covers_every_source_a_count_can_use():
    """Whatever module of solbench a trace passes through (the counting rules, the definition's axes, the inputs'
    roles, a reference's import) is among the digested sources."""
    import sys

    p = load_problem(AXPY)
    roofline._count(p, p.workloads[0], None)
    files = set(work_cache.code_files())
    counting = ("solbench.analysis", "solbench.problems", "solbench.expr")
    used = {Path(m.__file__).resolve() for name, m in list(sys.modules.items())
            if name.startswith(counting) and getattr(m, "__file__", None)}
    assert used and used <= files, sorted(str(f) for f in used - files)
    assert {f.name for f in files} >= {"counting.py", "rules.py", "roofline.py", "definition.py", "expr.py"}


def test_held_out_shapes_never_reach_the_disk(cache):
    p = load_problem(AXPY)
    drawn = draw_heldout(p, 3, seed=7, device="cpu")
    assert len(drawn) == 3
    public = {work_cache.key(p, w) for w in p.workloads}
    on_disk = {f.stem for f in cache.glob("*.json")}
    assert on_disk and on_disk <= public  # the templates' counts only
    assert not {work_cache.key(p, w) for w in drawn} & on_disk


def test_a_bad_file_is_counted_again_and_replaced(cache, monkeypatch):
    p = load_problem(AXPY)
    w = p.workloads[0]
    good = roofline.count_work(p, w)
    path = cache / f"{work_cache.key(p, w)}.json"
    for bad in ("not json", '{"flops": {"vector_fp32": "many"}, "bytes": 1}', "[]"):
        path.write_text(bad)
        _forget(monkeypatch)
        assert roofline.count_work(p, w) == good
        assert work_cache.load(work_cache.key(p, w)) == asdict(good)


def test_an_unwritable_cache_costs_a_trace_not_an_error(tmp_path, monkeypatch):
    (tmp_path / "work").write_text("in the way")  # no directory can be made there, even by root
    monkeypatch.setenv("SOLBENCH_CACHE", str(tmp_path))
    _forget(monkeypatch)
    p = load_problem(AXPY)
    assert roofline.count_work(p, p.workloads[0]).bytes > 0


def test_prune_keeps_the_newest_and_sweeps_leftover_writes(tmp_path):
    for i in range(6):
        f = tmp_path / f"{i:02d}.json"
        f.write_text("{}")
        os.utime(f, (1000 + i, 1000 + i))
    (tmp_path / ".work-x.tmp").write_text("")
    assert work_cache.prune(tmp_path, limit=4) == 3
    assert sorted(f.name for f in tmp_path.iterdir()) == ["02.json", "03.json", "04.json", "05.json"]


def test_memory_holds_a_bounded_number_of_counts(cache, monkeypatch):
    monkeypatch.setattr(work_cache, "MEMO_ENTRIES", 3)
    for i in range(5):
        work_cache.keep(f"k{i}", {"flops": {}, "bytes": i, "overridden": [], "traced": True, "note": None},
                        persist=False)
    assert list(work_cache._MEMO) == ["k2", "k3", "k4"]
    assert work_cache.load("k0") is None and not cache.exists()
