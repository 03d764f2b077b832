"""Definitions, workloads and solutions: the flashinfer-trace / SOL-ExecBench schema loads unchanged."""

import json

import pytest

from solbench.errors import UserError
from solbench.problems.definition import Definition
from solbench.problems.problem import load_problem
from solbench.problems.solution import load_solution
from solbench.problems.workload import parse_workload_line
from tests.paths import AXPY

# a definition in SOL-ExecBench's own form: expression axis, inline reference, constraints, null descriptions,
# custom_inputs_entrypoint null, unknown extra fields
SOL_EXECBENCH_STYLE = {
    "name": "gqa_hr4_dqk128",
    "op_type": "gqa",
    "tags": ["status:draft", "model:some_model"],
    "axes": {
        "B": {"type": "var", "description": None},
        "H_kv": {"type": "var"},
        "H_r": {"type": "const", "value": 4, "description": None},
        "H_qo": {"type": "expr", "expression": "H_kv * H_r", "description": "query heads"},
        "D": {"type": "const", "value": 128},
    },
    "custom_inputs_entrypoint": None,
    "constraints": ["H_qo == H_kv * H_r"],
    "inputs": {"q": {"shape": ["B", "H_qo", "D"], "dtype": "bfloat16", "description": None},
               "scale": {"shape": None, "dtype": "float32"}},
    "outputs": {"out": {"shape": ["B", "H_qo", "D"], "dtype": "bfloat16"}},
    "reference": "import torch\n\ndef run(q, scale):\n    return q * scale\n",
    "some_future_field": {"kept": True},
}


def test_sol_execbench_definition_loads_unchanged():
    d = Definition.model_validate(SOL_EXECBENCH_STYLE)
    axes = d.resolve_axes({"B": 2, "H_kv": 8})
    assert axes["H_qo"] == 32 and axes["D"] == 128
    assert d.model_extra["some_future_field"] == {"kept": True}
    assert d.shape_of(d.inputs["q"], axes) == (2, 32, 128)
    assert d.shape_of(d.inputs["scale"], axes) is None


def test_constraint_violation_is_reported():
    d = Definition.model_validate(dict(SOL_EXECBENCH_STYLE, constraints=["B <= 4"]))
    with pytest.raises(ValueError, match="constraint"):
        d.resolve_axes({"B": 8, "H_kv": 1})


@pytest.mark.parametrize("mutate,msg", [
    (lambda d: d["inputs"]["q"].update(shape=["B", "nope"]), "axis 'nope'"),
    (lambda d: d["inputs"]["q"].update(dtype="float7"), "unknown dtype"),
    (lambda d: d["inputs"]["q"].update(role="magic"), "unknown role"),
    (lambda d: d.update(inplace_inputs=["cache"]), "inplace_inputs"),
    (lambda d: d["axes"].update(X={"type": "expr", "expression": "Y * 2"}), "unknown axes"),
])
def test_invalid_definitions(mutate, msg):
    d = json.loads(json.dumps(SOL_EXECBENCH_STYLE))
    mutate(d)
    with pytest.raises(ValueError, match=msg):
        Definition.model_validate(d)


def test_workload_line_forms():
    bare = {"uuid": "u1", "axes": {"M": 4}, "inputs": {"A": {"type": "random"},
                                                       "eps": {"type": "scalar", "value": 1e-6},
                                                       "W": {"type": "safetensors", "path": "w.safetensors", "tensor_key": "w"}}}
    w = parse_workload_line(bare)
    assert w.uuid == "u1" and w.inputs["eps"].value == 1e-6 and w.device == "any"
    wrapped = parse_workload_line({"definition": "gemm", "workload": bare, "solution": None, "evaluation": None})
    assert wrapped == w


def test_problem_loads_with_reference_from_definition(tmp_path):
    (tmp_path / "definition.json").write_text(json.dumps(SOL_EXECBENCH_STYLE))
    (tmp_path / "workload.jsonl").write_text(json.dumps({"uuid": "w0", "axes": {"B": 1, "H_kv": 2},
                                                         "inputs": {"q": {"type": "random"},
                                                                    "scale": {"type": "scalar", "value": 0.5}}}) + "\n")
    p = load_problem(tmp_path)
    assert p.name == "gqa_hr4_dqk128" and "def run" in p.reference_source
    assert p.family == "gqa"


def test_workload_errors_name_the_line(tmp_path):
    (tmp_path / "definition.json").write_text((AXPY / "definition.json").read_text())
    (tmp_path / "reference.py").write_text((AXPY / "reference.py").read_text())
    (tmp_path / "workload.jsonl").write_text('{"uuid": "a", "axes": {"N": 4}, "inputs": {}}\n{"uuid": "b", "axes": {}}\n')
    with pytest.raises(UserError, match=r"workload.jsonl:2: .*'N'"):
        load_problem(tmp_path)


def test_bare_python_solution(tmp_path):
    f = tmp_path / "k.py"
    f.write_text("import triton\n\ndef run(x):\n    return x\n")
    s = load_solution(f)
    assert s.language == "triton" and not s.spec.destination_passing_style and s.spec.entry_point == "k.py::run"


@pytest.mark.parametrize("signature, body, dps", [
    ("run(x, y, alpha, out)", "    out.copy_(alpha * x + y)\n", True),       # as `solbench show` prints it
    ("run(x, y, alpha)", "    return alpha * x + y\n", False),
    ("run(x, y, alpha, out=None)", "    return alpha * x + y\n", False),  # outputs optional: called without
])
def test_a_bare_python_solution_that_takes_its_outputs_is_destination_passing(tmp_path, signature, body, dps):
    from solbench.evaluate.runner import EvalOptions, evaluate

    problem = load_problem(AXPY)
    f = tmp_path / "k.py"
    f.write_text(f"import torch\n\ndef {signature}:\n{body}")
    s = load_solution(f, problem.definition)
    assert s.spec.destination_passing_style is dps
    assert not load_solution(f).spec.destination_passing_style  # without the definition: as written, returns
    ev = evaluate(problem, s, EvalOptions(device="cpu", baselines=(), workloads=["axpy-small"], draws=1,
                                          time_candidate=False))
    assert ev.verdict == "passed", [(w.verdict, w.message) for w in ev.workloads]


def test_solution_paths_must_stay_inside(tmp_path):
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"name": "x", "definition": "d", "author": "a",
                             "spec": {"language": "pytorch", "entry_point": "../evil.py::run"},
                             "sources": [{"path": "../evil.py", "content": ""}]}))
    with pytest.raises(UserError, match="relative"):
        load_solution(f)
