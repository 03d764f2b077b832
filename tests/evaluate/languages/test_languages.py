"""Every kernel language SOL-ExecBench names is known; one this machine cannot run is an `unsupported` verdict
with the reason and the install command (decided before any candidate starts), never a crash."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from solbench.errors import UserError
from solbench.evaluate.languages import get_language
from solbench.evaluate.runner import EvalOptions, evaluate
from solbench.problems.problem import load_problem
from solbench.problems.solution import load_solution
from tests import forkcli
from tests.paths import AXPY, FIXTURES, ROOT

SOL_EXECBENCH = ("pytorch", "triton", "cute_dsl", "cutile", "cudnn_frontend", "cuda_cpp", "cutlass", "cudnn", "cublas")
DSL_SOURCE = ("import torch\n\n\ndef run(x, y, alpha, out):\n    out.copy_(y + alpha * x)\n")


def _solution(tmp_path: Path, language: str) -> Path:
    path = tmp_path / f"{language}.json"
    path.write_text(json.dumps({"name": f"axpy-{language}", "definition": "axpy_fixture", "author": "test",
                                "spec": {"language": language, "entry_point": "main.py::run",
                                         "destination_passing_style": True},
                                "sources": [{"path": "main.py", "content": DSL_SOURCE}]}))
    return path


def test_every_sol_execbench_language_is_known():
    for name in SOL_EXECBENCH + ("tilelang", "tvm_tirx"):
        assert get_language(name).name == name
    with pytest.raises(UserError, match="unknown solution language 'fortran'"):
        get_language("fortran")


@pytest.mark.parametrize("language", ["cute_dsl", "tilelang", "tvm_tirx", "cutile", "cudnn_frontend"])
def test_a_gpu_dsl_on_the_cpu_is_unsupported_with_the_reason(language, tmp_path):
    problem = load_problem(AXPY)
    ev = evaluate(problem, load_solution(_solution(tmp_path, language), problem.name),
                  EvalOptions(device="cpu", baselines=()))
    assert ev.verdict == "unsupported" and all(w.verdict == "unsupported" for w in ev.workloads)
    assert all(w.reasons == ["language_unavailable"] for w in ev.workloads)
    assert "need a CUDA device" in ev.message and language in ev.message
    assert ev.environment["platform"]["id"].startswith("cpu:")


def test_a_missing_package_names_the_install_command():
    why = get_language("cute_dsl").unavailable("cuda")
    assert why is not None and "pip install nvidia-cutlass-dsl" in why
    assert "13.3" in get_language("cutile").install


def test_the_cli_says_unsupported_in_one_line(tmp_path):
    res = forkcli.run("eval", "--problem", AXPY, "--solution", _solution(tmp_path, "cute_dsl"), "--device", "cpu",
                      "--db", tmp_path / "r.db", "--json", env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert res.returncode == 0, res.stderr
    ev = json.loads(res.stdout[res.stdout.index("{"):])
    assert ev["verdict"] == "unsupported" and "Traceback" not in res.stderr


FORMAT = FIXTURES / "sol_execbench"
#: on this CPU machine: what each language's fixture gets (the C++ ones carry CUDA sources)
ON_CPU = {"pytorch": "passed", "triton": "passed", "cute_dsl": "unsupported", "cutile": "unsupported",
          "cudnn_frontend": "unsupported", "cutlass": "unsupported", "cublas": "unsupported", "cudnn": "unsupported",
          "tilelang": "unsupported", "tvm_tirx": "unsupported"}


@pytest.mark.parametrize("language", sorted(ON_CPU))
def test_sol_execbench_format_fixtures_load_unmodified(language):
    """One fixture per SOL-ExecBench language (and TileLang, TVM TIRx), in its Solution JSON format (`languages` list, target_hardware,
    binding, compile_options, dependencies): loaded as is, routed to its plug-in, and judged; what this machine
    cannot run is unsupported with a reason, never an error."""
    problem = load_problem(AXPY)
    solution = load_solution(FORMAT / f"axpy_{language}.json", problem.definition)
    assert solution.language == language and get_language(language).name == language
    ev = evaluate(problem, solution, EvalOptions(device="cpu", baselines=(), time_candidate=False))
    assert ev.verdict == ON_CPU[language], (ev.message, ev.log[-1500:] if ev.log else None)
    if ev.verdict == "unsupported":
        assert ev.message and all(w.reasons == ["language_unavailable"] for w in ev.workloads)
