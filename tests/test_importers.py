"""Importers on small fixtures written here: KernelBench files and a FlashInfer-Trace dataset."""

import json

import pytest
import torch

from conftest import FIXTURES, inline_solution
from solbench.errors import UserError
from solbench.evaluate.runner import EvalOptions, evaluate
from solbench.problems.importers import import_flashinfer_trace, import_kernelbench
from solbench.problems.inputs import make_inputs
from solbench.problems.problem import load_problem

IMPORT = FIXTURES / "import"


def test_kernelbench_file_becomes_a_problem(tmp_path):
    [d] = import_kernelbench(IMPORT / "kernelbench", tmp_path)
    p = load_problem(d)
    assert p.name == "19_scaled_linear_relu" and "kernelbench:level1" in p.definition.tags
    # the forward's input, then the parameters and buffers as inputs
    names = list(p.definition.inputs)
    assert names[0] == "input_0" and "param_linear_weight" in names and "param_norm_running_var" in names
    assert p.definition.shape_of(p.definition.inputs["param_linear_weight"], p.definition.resolve_axes({})) == (32, 64)
    out = p.definition.outputs["output_0"]
    assert p.definition.shape_of(out, p.definition.resolve_axes({})) == (16, 32)
    # a solution written against the converted signature passes: the reference really is the model
    src = ("import torch\n\ndef run(x, w, b, gamma, beta, mean, var, nbt):\n"
           "    y = torch.nn.functional.linear(x, w, b)\n"
           "    m, v = y.mean(0), y.var(0, unbiased=False)  # a fresh nn.Module trains: batch statistics\n"
           "    y = (y - m) / torch.sqrt(v + 1e-5) * gamma + beta\n"
           "    return torch.relu(y * 0.5)\n")
    ev = evaluate(p, inline_solution(p, "kb", src), EvalOptions(device="cpu", baselines=(), time_candidate=False))
    assert ev.verdict == "passed", ev.workloads[0].message


def test_flashinfer_dataset_becomes_problems_with_safetensors_inputs(tmp_path):
    [d] = import_flashinfer_trace(IMPORT / "flashinfer", tmp_path)
    p = load_problem(d)
    assert [w.uuid for w in p.workloads] == ["w-random", "w-file"]
    _, weight = make_inputs(p.definition, p.workload("w-file"), 0, "cpu", p.directory)
    assert torch.allclose(weight, torch.linspace(0.5, 1.5, 128))
    assert "imported:flashinfer-trace" in p.definition.tags
    assert json.loads((d / "definition.json").read_text())["name"] == "rmsnorm_h128"


def test_sol_execbench_layout_imports_too(tmp_path):
    # a SOL-ExecBench style problem directory is one of our problem directories already
    dirs = import_flashinfer_trace(FIXTURES / "problems" / "axpy", tmp_path)
    assert load_problem(dirs[0]).name == "axpy_fixture"


def test_import_errors_are_user_errors(tmp_path):
    with pytest.raises(UserError):
        import_kernelbench(tmp_path, tmp_path / "out")
    with pytest.raises(UserError):
        import_flashinfer_trace(tmp_path, tmp_path / "out")
