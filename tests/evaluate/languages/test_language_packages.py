"""A kernel language's own package folder (``$SOLBENCH_LANG_ROOT/<language>``): only a solution in that language
gets it on its path, its .pth files run, it comes before the environment's packages, and the trusted side asks a
child process whether the language's package imports (missing, broken or there) without importing it itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from solbench.evaluate.languages import get_language, packages
from tests.paths import ROOT



@pytest.fixture()
def lang_root(tmp_path, monkeypatch):
    """Two languages that both bring a package named ``tvm`` (as TileLang's fork and apache-tvm do)."""
    for lang in ("tilelang", "tvm_tirx"):
        pkg = tmp_path / lang / "tvm"
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text(f"WHOSE = {lang!r}\n")
    # a .pth that adds a folder, as CuTe DSL's does
    (tmp_path / "tilelang" / "extra").mkdir()
    (tmp_path / "tilelang" / "extra" / "tilelang_extra.py").write_text("X = 1\n")
    (tmp_path / "tilelang" / "extra.pth").write_text("extra\n")
    # a package that is there but does not import
    (tmp_path / "tvm_tirx" / "broken_pkg").mkdir()
    (tmp_path / "tvm_tirx" / "broken_pkg" / "__init__.py").write_text("raise RuntimeError('no libfoo.so here')\n")
    monkeypatch.setenv(packages.ROOT_ENV, str(tmp_path))
    packages.probe.cache_clear()
    yield tmp_path
    packages.probe.cache_clear()


def _in_child(code: str, root: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), packages.ROOT_ENV: str(root)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_solution_gets_its_own_languages_folder_only(lang_root):
    code = ("import json, sys; from solbench.evaluate.languages import get_language\n"
            "get_language('{lang}').install_hooks('cpu')\n"
            "import tvm; out = {{'whose': tvm.WHOSE, 'first': sys.path[0]}}\n"
            "try:\n    import tilelang_extra; out['pth'] = True\nexcept ImportError:\n    out['pth'] = False\n"
            "print(json.dumps(out))")
    tl = _in_child(code.format(lang="tilelang"), lang_root)
    assert tl["whose"] == "tilelang" and tl["pth"] is True
    assert tl["first"].startswith(str(lang_root / "tilelang"))  # ahead of the environment's site-packages
    tirx = _in_child(code.format(lang="tvm_tirx"), lang_root)
    assert tirx["whose"] == "tvm_tirx" and tirx["pth"] is False


def test_the_trusted_side_probes_in_a_child(lang_root):
    assert packages.folder("tilelang") == lang_root / "tilelang" and packages.folder("cute_dsl") is None
    assert packages.probe("tilelang", "tvm") is None and "tvm" not in sys.modules
    assert packages.probe("tilelang", "no_such_package_xyz") == ("missing", "")
    kind, detail = packages.probe("tvm_tirx", "broken_pkg")
    assert kind == "broken" and "no libfoo.so here" in detail
    # the plug-in turns these into unsupported reasons with the install command
    plug = get_language("tvm_tirx")
    assert "does not import" in plug._import_problem("broken_pkg") and plug.install in plug._import_problem("x_y_z")


def test_without_a_root_nothing_changes(monkeypatch):
    monkeypatch.delenv(packages.ROOT_ENV, raising=False)
    before = list(sys.path)
    packages.activate("tilelang")
    assert packages.folder("tilelang") is None and sys.path == before


def test_the_candidates_sandbox_may_read_the_languages_folders(lang_root):
    from solbench.evaluate.isolation.view import sandbox_view
    from solbench.evaluate.trusted.keeper import child_env

    view = sandbox_view(None, "cpu")
    assert os.path.realpath(lang_root) in view["readable"]
    assert child_env()[packages.ROOT_ENV] == str(lang_root)
