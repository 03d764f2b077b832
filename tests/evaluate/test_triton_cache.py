"""A solution's Triton cache carried to its next evaluation is one Triton reads there: its group files, which name
the kernels' files by absolute path, are rewritten for the new directory, and a group naming anything else is
removed, never followed."""

import json
import os
import uuid
from pathlib import Path

import pytest

from solbench.evaluate import build_cache, triton_cache
from solbench.evaluate.runner import EvalOptions, evaluate
from solbench.problems.solution import load_solution

FILES = ("_axpy.cubin", "_axpy.json", "_axpy.ptx")


def _cache(root: Path, key: str = "KEY") -> Path:
    """A cache as Triton's file cache leaves one: a kernel's files and the group naming them by absolute path."""
    d = root / key
    d.mkdir(parents=True)
    for f in FILES:
        (d / f).write_bytes(b"x" * 16)
    (d / "__grp___axpy.json").write_text(json.dumps({"child_paths": {f: str(d / f) for f in FILES}}))
    return d


def _read_group(monkeypatch, cache: Path, key: str, filename: str):
    """What Triton's own file cache finds for ``filename`` in ``cache``."""
    from triton.runtime.cache import FileCacheManager

    monkeypatch.setenv("TRITON_CACHE_DIR", str(cache))
    return FileCacheManager(key).get_group(filename)


def test_a_plain_copy_misses_and_a_carried_cache_is_read_where_it_lies(tmp_path, monkeypatch):
    import shutil

    _cache(tmp_path / "candidate1")  # compiled in one evaluation's directory, kept, and that directory removed
    triton_cache.carry_out(tmp_path / "candidate1", tmp_path / "stored", below=tmp_path)
    shutil.rmtree(tmp_path / "candidate1")
    plain = tmp_path / "plain"
    triton_cache._copy(tmp_path / "stored", plain)
    assert _read_group(monkeypatch, plain, "KEY", "_axpy.json") is None  # the premise: Triton misses a moved cache
    carried = tmp_path / "candidate2" / "triton"
    triton_cache.carry_in(tmp_path / "stored", carried)
    found = _read_group(monkeypatch, carried, "KEY", "_axpy.json")
    assert found == {f: str(carried / "KEY" / f) for f in FILES}
    # the stored cache is as it was: only the candidate's copy changed
    stored = json.loads((tmp_path / "stored" / "KEY" / "__grp___axpy.json").read_text())["child_paths"]
    assert stored == {f: str(tmp_path / "candidate1" / "KEY" / f) for f in FILES}


@pytest.mark.parametrize("listed", [
    {"passwd": "/etc/passwd"},  # a file not beside the group
    {"../x": "/somewhere/../x"},  # a name with a directory in it
    {"_axpy.cubin": "/old/other.cubin"},  # a path whose file is not the name
    {"link": "/old/link"},  # a link beside the group
    [], {}, "child_paths",  # not a group
], ids=["elsewhere", "dotdot", "renamed", "link", "list", "empty", "string"])
def test_a_group_naming_anything_but_its_own_files_is_removed(tmp_path, listed):
    d = _cache(tmp_path / "cache")
    os.symlink(d / "_axpy.cubin", d / "link")
    (d / "__grp___axpy.json").write_text(json.dumps({"child_paths": listed} if listed != "child_paths" else listed))
    assert triton_cache.relocate(tmp_path / "cache") == 0
    assert not (d / "__grp___axpy.json").exists()
    assert sorted(p.name for p in d.iterdir()) == sorted([*FILES, "link"])


def test_a_group_that_is_a_link_or_too_large_is_removed_and_its_target_kept(tmp_path):
    d = _cache(tmp_path / "cache")
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"child_paths": {f: str(d / f) for f in FILES}}))
    (d / "__grp___axpy.json").unlink()
    os.symlink(outside, d / "__grp___axpy.json")
    (d / "__grp___big.json").write_text(" " * (triton_cache.MAX_GROUP_BYTES + 1))
    assert triton_cache.relocate(tmp_path / "cache") == 0
    assert not os.path.lexists(d / "__grp___axpy.json") and not (d / "__grp___big.json").exists()
    assert json.loads(outside.read_text())["child_paths"]["_axpy.json"] == str(d / "_axpy.json")


@pytest.mark.gpu
def test_a_triton_solutions_cache_is_read_by_triton_in_its_next_evaluation(axpy, tmp_path, monkeypatch):
    """On the GPU, what Triton compiled in one evaluation (its cache kept under the solution's digest) is found
    by Triton's own file cache once carried into another directory: the next evaluation loads, not compiles."""
    monkeypatch.setenv("SOLBENCH_CACHE", str(tmp_path / "cache"))
    src = Path(__file__).parents[1] / "fixtures" / "solutions" / "axpy_triton.py"
    own = tmp_path / "axpy_triton.py"
    own.write_text(src.read_text() + f"# {uuid.uuid4().hex}\n")  # sources of its own: a cache of its own
    sol = load_solution(own, axpy.name)
    ev = evaluate(axpy, sol, EvalOptions(device="cuda", baselines=(), time_candidate=False, draws=1))
    assert ev.verdict == "passed", [w.message for w in ev.workloads]
    stored = tmp_path / "cache" / "triton" / sol.digest()
    groups = sorted(stored.glob(f"*/{triton_cache.GROUP_PREFIX}*.json"))
    assert groups, "nothing compiled was kept"
    carried = tmp_path / "next" / "triton"
    triton_cache.carry_in(stored, carried)
    for g in groups:
        found = _read_group(monkeypatch, carried, g.parent.name, g.name.removeprefix(triton_cache.GROUP_PREFIX))
        assert found and all(Path(p).parent == carried / g.parent.name for p in found.values()), (g, found)


def test_a_file_being_written_is_not_carried_and_a_copy_lands_whole(tmp_path):
    """A copy is written beside its target and renamed into place, so an evaluation carrying the same cache at
    that moment reads a whole file or none, and what another copy is still writing is never carried on."""
    d = _cache(tmp_path / "stored")
    (d / "._axpy.cubin.123.abcd.part").write_bytes(b"half")
    triton_cache.carry_in(tmp_path / "stored", tmp_path / "carried")
    got = tmp_path / "carried" / "KEY"
    assert sorted(p.name for p in got.iterdir()) == sorted([*FILES, "__grp___axpy.json"])
    assert all((got / f).read_bytes() == b"x" * 16 for f in FILES)


def _stored(root: Path, name: str, nbytes: int, age_s: float) -> Path:
    """A solution's stored cache of ``nbytes`` in one kernel file, last used ``age_s`` ago."""
    import time

    d = root / name / "KEY"
    d.mkdir(parents=True)
    (d / "k.cubin").write_bytes(b"\1" * nbytes)
    t = time.time() - age_s
    os.utime(root / name, (t, t))
    return root / name


def test_the_least_recently_used_caches_go_first_and_the_one_in_use_stays(tmp_path):
    for name, age in (("a", 300), ("b", 200), ("c", 100)):
        _stored(tmp_path, name, 64 << 10, age)
    one = build_cache.tree_bytes(tmp_path / "a")
    assert one >= 64 << 10
    assert triton_cache.evict(tmp_path, 2 * one, keep="a") == ["b"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "c"]
    assert triton_cache.evict(tmp_path, 2 * one) == []


def test_a_copy_back_that_adds_bytes_brings_the_store_within_its_bound(tmp_path, monkeypatch):
    monkeypatch.setenv("SOLBENCH_TRITON_CACHE_BYTES", str(1 << 20))  # the least bound there is
    store = tmp_path / "store"
    for name, age in (("old", 300), ("older", 400)):
        _stored(store, name, 600 << 10, age)
    _cache(tmp_path / "candidate", "NEW")
    triton_cache.carry_out(tmp_path / "candidate", store / "mine", below=tmp_path)
    assert sorted(p.name for p in store.iterdir()) == ["mine", "old"]  # over 1 MiB with it: the least recent went
    triton_cache.carry_out(tmp_path / "candidate", store / "mine", below=tmp_path)  # adds nothing: evicts nothing
    assert sorted(p.name for p in store.iterdir()) == ["mine", "old"]
