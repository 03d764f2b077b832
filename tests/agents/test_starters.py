"""Language templates: every starter problem and the full suite render starters in triton, cuda_cpp, cute_dsl,
tilelang and tvm_tirx (and pytorch), so each problem can be posed as a pair of variants that differ only in the
language."""

from __future__ import annotations

import ast
import json

import pytest

from solbench.agents.starters import starter_files
from solbench.problems.suite import select_problems
from tests import forkcli
from tests.paths import ROOT

LANGS = ("triton", "cuda_cpp", "cute_dsl", "tilelang", "tvm_tirx", "pytorch")


def _check(problem, lang: str) -> None:
    files = starter_files(lang, problem)
    d = problem.definition
    if lang == "cuda_cpp":
        assert set(files) == {"main.cpp", "kernel.h", "kernel.cu"}
        sig = next(ln for ln in files["main.cpp"].splitlines() if ln.startswith("void run("))
        assert all(f" {n}" in sig for n in [*d.inputs, *d.outputs]), sig
        assert "PYBIND11_MODULE" in files["main.cpp"] and "__global__" in files["kernel.cu"]
        # the kernels' file sees CUDA only (a quick nvcc build); torch stays in main.cpp
        assert "torch" not in files["kernel.cu"] and '#include "kernel.h"' in files["main.cpp"]
    else:
        [src] = files.values()
        tree = ast.parse(src)
        run = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run")
        assert [a.arg for a in run.args.args] == [*d.inputs, *d.outputs]


@pytest.mark.parametrize("lang", LANGS)
def test_every_starter_problem_has_each_language(lang):
    for problem in select_problems("starter"):
        _check(problem, lang)


def test_the_full_suite_renders_in_every_language():
    problems = select_problems("full")
    assert len(problems) >= 30
    for problem in problems:
        for lang in LANGS:
            _check(problem, lang)


def test_show_language_prints_the_starter():
    env = {"PYTHONPATH": str(ROOT / "src")}
    import os

    res = forkcli.run("show", "rmsnorm", "--language", "cuda_cpp", "--json", env={**os.environ, **env})
    assert res.returncode == 0, res.stderr
    files = json.loads(res.stdout)
    assert "void run(torch::Tensor x, torch::Tensor weight, double eps, torch::Tensor out)" in files["main.cpp"]
    bad = forkcli.run("show", "rmsnorm", "--language", "fortran", env={**os.environ, **env})
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
