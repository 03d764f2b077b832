"""Importers on small fixtures written here: KernelBench files (tests/fixtures/kernelbench/, one per case the
importer must handle), a FlashInfer-Trace dataset, SOL-ExecBench problem directories (tests/fixtures/peer/)."""

import inspect
import json
import shutil

import pytest
import torch

from solbench.analysis.heldout import draw_heldout
from solbench.errors import UserError
from solbench.evaluate.runner import EvalOptions, evaluate
from solbench.problems.importers import import_flashinfer_trace, import_kernelbench
from solbench.problems.inputs import make_inputs
from solbench.problems.kernelbench import import_kernelbench_report
from solbench.problems.modules import SourceError, module_from_source
from solbench.problems.problem import load_problem
from solbench.problems.solution import load_solution
from tests.conftest import inline_solution
from tests.paths import FIXTURES

IMPORT = FIXTURES / "import"
KB = FIXTURES / "kernelbench"
PEER = FIXTURES / "peer"
CPU = EvalOptions(device="cpu", baselines=(), time_candidate=False)


def _eval(problem, solution):
    ev = evaluate(problem, solution, CPU)
    return ev.verdict, [w.message for w in ev.workloads if w.message]


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    """Every KernelBench fixture imported once: {problem name: directory}, and the report."""
    out = tmp_path_factory.mktemp("kb")
    report = import_kernelbench_report(KB, out)
    return {d.name: d for d in report.written}, report


def test_kernelbench_file_becomes_a_problem_in_eval_mode(tmp_path):
    [d] = import_kernelbench(IMPORT / "kernelbench", tmp_path)
    p = load_problem(d)
    assert p.name == "19_scaled_linear_relu" and "kernelbench:level1" in p.definition.tags
    # the forward's input, then the parameters, then the norm's running statistics; num_batches_tracked is a constant
    assert list(p.definition.inputs) == ["input_0", "param_linear_weight", "param_linear_bias", "param_norm_weight",
                                         "param_norm_bias", "param_norm_running_mean", "param_norm_running_var"]
    assert p.definition.model_extra["kernelbench"]["constants"] == ["norm.num_batches_tracked"]
    axes = p.definition.resolve_axes({"batch": 16})
    assert p.definition.shape_of(p.definition.inputs["param_linear_weight"], axes) == (32, 64)
    assert p.definition.shape_of(p.definition.outputs["output_0"], axes) == (16, 32)
    # eval mode: BatchNorm normalises with its running statistics (inputs here), not with the batch's
    src = ("import torch\n\ndef run(x, w, b, gamma, beta, mean, var):\n"
           "    y = torch.nn.functional.linear(x, w, b)\n"
           "    y = (y - mean) / torch.sqrt(var + 1e-5) * gamma + beta\n"
           "    return torch.relu(y * 0.5)\n")
    assert _eval(p, inline_solution(p, "kb", src)) == ("passed", [])
    batch_stats = src.replace("(y - mean) / torch.sqrt(var + 1e-5)", "(y - y.mean(0)) / torch.sqrt(y.var(0, unbiased=False) + 1e-5)")
    assert _eval(p, inline_solution(p, "kb_train", batch_stats))[0] == "incorrect_numerical"


def test_every_file_is_tried_and_each_failure_is_one_line(kb):
    dirs, report = kb
    assert report.files == len(list(KB.rglob("*.py"))) - len(list((KB / "solutions").glob("*.py")))
    failed = {f.name: why for f, why in report.failed}
    assert set(failed) == {"missing_module.py", "random_forward.py", "nan_reference.py", "list_input.py"}
    assert failed["missing_module.py"].startswith("missing module 'solbench_fixture_not_installed'")
    assert "random" in failed["random_forward.py"] and "NaN" in failed["nan_reference.py"]
    assert all("\n" not in why for why in failed.values())
    assert {"zero_dim_scale", "kl_div", "conv_batchnorm_dropout", "causal_attention", "plain_state_rnn",
            "item_in_init", "hinge_loss", "cross_entropy", "structured_matmul"} <= set(dirs)
    assert not any(d.name.startswith(".") for d in next(iter(dirs.values())).parent.iterdir())  # no staging left


def test_reimport_is_refused_unless_forced(tmp_path):
    f = KB / "level1" / "kl_div.py"
    [d] = import_kernelbench(f, tmp_path)
    (d / "marker").write_text("mine")
    with pytest.raises(UserError, match="exists"):
        import_kernelbench(f, tmp_path)
    assert (d / "marker").exists()
    assert import_kernelbench(f, tmp_path, force=True) == [d] and not (d / "marker").exists()


def test_zero_dim_and_constant_parameters_keep_their_init(kb):
    p = load_problem(kb[0]["zero_dim_scale"])
    inputs = p.definition.inputs
    assert inputs["param_scale"].shape == [] and (inputs["param_scale"].role, inputs["param_scale"].range) == ("uniform", [2.0, 2.0])
    assert (inputs["param_shift"].role, inputs["param_shift"].range) == ("uniform", [0.5, 0.5])
    lo, hi = inputs["param_linear_weight"].range  # a random init: drawn over its spread, not kept
    assert lo < 0 < hi
    w = p.workloads_for("cpu")[0]
    _, scale, shift, *_ = make_inputs(p.definition, w, 3, "cpu", p.directory)
    assert float(scale) == 2.0 and torch.all(shift == 0.5)
    src = ("import torch\ndef run(x, scale, shift, w, b):\n"
           "    return torch.sigmoid(torch.nn.functional.linear(x, w, b)) * scale + shift\n")
    assert _eval(p, inline_solution(p, "zd", src)) == ("passed", [])


def test_batch_axis_cpu_workload_and_heldout_shapes(kb):
    p = load_problem(kb[0]["zero_dim_scale"])
    assert p.definition.var_axes == ["batch"]
    gpu, cpu = p.workloads
    assert (gpu.device, gpu.axes) == ("gpu", {"batch": 4096}) and cpu.device == "cpu" and cpu.axes["batch"] < 4096
    drawn = draw_heldout(p, 3, seed=11, device="cpu")
    assert len(drawn) == 3 and all(w.axes["batch"] != cpu.axes["batch"] for w in drawn)
    # a convolution's spatial size varies too, its output size following it
    conv = load_problem(kb[0]["conv_batchnorm_dropout"])
    assert set(conv.definition.var_axes) == {"batch", "input_0_d2"}
    assert conv.definition.outputs["output_0"].shape[2:] == ["input_0_d2", "input_0_d2"]
    # class ids stay below the number of classes, whatever size that takes
    ce = load_problem(kb[0]["cross_entropy"]).definition.inputs["input_1"]
    assert (ce.role, ce.range) == ("index", [0, "input_0_d1"])


def test_batchnorm_reference_is_not_a_reward_hack_and_modelnew_is_a_solution(kb):
    p = load_problem(kb[0]["conv_batchnorm_dropout"])
    assert p.definition.inputs["param_bn_running_var"].role == "positive"
    sol = load_solution(KB / "solutions" / "conv_batchnorm_dropout_modelnew.py", p.definition)
    assert any(s.path == "solbench_kernelbench.json" for s in sol.sources)
    assert _eval(p, sol) == ("passed", [])
    # the reference: deterministic (Dropout is off) and writing into no input (running statistics are read)
    module = module_from_source(p.reference_source, "kb_bn_test", p.directory / "reference.py")
    pristine = make_inputs(p.definition, p.workloads[0], 9, "cpu", p.directory)
    args = [x.clone() for x in pristine]
    assert torch.equal(module.run(*args), module.run(*args))
    assert all(torch.equal(a, b) for a, b in zip(args, pristine))


def test_causal_mask_buffer_is_a_constant(kb):
    p = load_problem(kb[0]["causal_attention"])
    assert "param_bias" not in p.definition.inputs and p.definition.model_extra["kernelbench"]["constants"] == ["bias"]
    assert _eval(p, load_solution(KB / "solutions" / "causal_sdpa.py", p.definition)) == ("passed", [])
    assert _eval(p, load_solution(KB / "solutions" / "causal_sdpa_no_mask.py", p.definition))[0] == "incorrect_numerical"


def test_plain_tensor_attribute_is_a_constant_restored_every_call(kb):
    p = load_problem(kb[0]["plain_state_rnn"])
    assert "hidden" in p.definition.model_extra["kernelbench"]["constants"]
    w = p.workloads[0]
    module = module_from_source(p.reference_source, "kb_rnn_test", p.directory / "reference.py")
    inputs = make_inputs(p.definition, w, 5, "cpu", p.directory)
    first, second = module.run(*inputs), module.run(*inputs)
    assert torch.equal(first, second)  # the state the forward reassigns is the file's again on the next call
    assert _eval(p, load_solution(KB / "solutions" / "plain_state_rnn_modelnew.py", p.definition)) == ("passed", [])


def test_item_in_init_falls_back_to_a_cpu_build(kb):
    dirs, report = kb
    d = dirs["item_in_init"]
    assert any("built on the CPU" in n for n in report.notes[d])
    p = load_problem(d)
    assert p.definition.inputs["param_norm_weight"].role == "norm_weight"  # LayerNorm's ones: learnable, drawn
    src = ("import torch\nimport torch.nn.functional as F\n"
           "def run(x, *p):\n"
           "    for i in range(3):\n"
           "        x = x + F.gelu(F.linear(x, p[2 * i], p[2 * i + 1]))\n"
           "    return F.layer_norm(x, x.shape[-1:], p[6], p[7])\n")
    assert _eval(p, inline_solution(p, "ln", src)) == ("passed", [])


def test_input_roles_follow_get_inputs(kb):
    dirs, _ = kb
    kl = load_problem(dirs["kl_div"])
    assert [s.role for s in kl.definition.inputs.values()] == ["probability", "probability"]
    hinge = load_problem(dirs["hinge_loss"]).definition.inputs
    assert (hinge["input_0"].role, hinge["input_0"].range) == ("uniform", [0.0, 1.0])  # torch.rand
    assert hinge["input_1"].role == "sign" or hinge["input_1"].model_extra["wanted_role"] == "sign"
    mm = load_problem(dirs["structured_matmul"]).definition.inputs
    assert mm["input_0"].model_extra["structure"] == "symmetric"
    assert mm["input_1"].model_extra["structure"] == "lower_triangular"
    ce = load_problem(dirs["cross_entropy"]).definition.inputs
    assert ce["input_0"].role is None  # torch.randn: the activation role


def test_modelnew_without_an_imported_problem_is_a_compile_error(axpy, tmp_path):
    f = tmp_path / "modelnew.py"
    f.write_text("import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x, y):\n        return x\n")
    ev = evaluate(axpy, load_solution(f, axpy.definition), CPU)
    assert ev.verdict == "compile_error" and "KernelBench" in ev.workloads[0].message


# ---- references imported from real files -------------------------------------------------------------------------
def test_module_from_source_imports_a_real_file(tmp_path):
    src = "def run(x):\n    return x + 1\n"
    (tmp_path / "reference.py").write_text(src)
    m = module_from_source(src, "sb_real_file_test", tmp_path / "reference.py")
    assert m.__file__ == str(tmp_path / "reference.py") and "return x + 1" in inspect.getsource(m.run)
    inline = module_from_source(src + "# inline\n", "sb_inline_test")  # no file: a cached copy, still a file
    assert "return x + 1" in inspect.getsource(inline.run)
    with pytest.raises(SourceError, match=r"reference\.py:2: cannot be imported: ZeroDivisionError"):
        bad = "x = 1\ny = 1 / 0\n"
        (tmp_path / "reference.py").write_text(bad)
        module_from_source(bad, "sb_bad_test", tmp_path / "reference.py")


def test_sol_execbench_problem_with_a_triton_reference_passes_on_the_cpu():
    p = load_problem(PEER / "triton_axpby_relu")
    assert not (p.directory / "reference.py").exists() and "@triton.jit" in p.definition.reference
    for name in ("torch_ok.py", "torch_dps.json"):
        assert _eval(p, load_solution(p.directory / "solutions" / name, p.definition)) == ("passed", []), name
    wrong = inline_solution(p, "wrong", "import torch\ndef run(x, y):\n    return 2 * x + y\n")
    assert _eval(p, wrong)[0] == "incorrect_numerical"


# ---- FlashInfer-Trace --------------------------------------------------------------------------------------------
def test_flashinfer_dataset_becomes_problems_with_safetensors_inputs(tmp_path):
    [d] = import_flashinfer_trace(IMPORT / "flashinfer", tmp_path)
    p = load_problem(d)
    assert [w.uuid for w in p.workloads] == ["w-random", "w-file"]
    _, weight = make_inputs(p.definition, p.workload("w-file"), 0, "cpu", p.directory)
    assert torch.allclose(weight, torch.linspace(0.5, 1.5, 128))
    assert "imported:flashinfer-trace" in p.definition.tags
    assert json.loads((d / "definition.json").read_text())["name"] == "rmsnorm_h128"
    with pytest.raises(UserError, match="exists"):
        import_flashinfer_trace(IMPORT / "flashinfer", tmp_path)
    assert import_flashinfer_trace(IMPORT / "flashinfer", tmp_path, force=True) == [d]


def test_sol_execbench_layout_imports_too(tmp_path):
    # a SOL-ExecBench style problem directory is one of our problem directories already
    dirs = import_flashinfer_trace(FIXTURES / "problems" / "axpy", tmp_path)
    assert load_problem(dirs[0]).name == "axpy_fixture"
    shutil.copytree(PEER, tmp_path / "peer")
    [d] = import_flashinfer_trace(tmp_path / "peer", tmp_path / "out")
    assert load_problem(d).name == "triton_axpby_relu" and "@triton.jit" in (d / "reference.py").read_text()


def test_import_errors_are_user_errors(tmp_path):
    with pytest.raises(UserError):
        import_kernelbench(tmp_path, tmp_path / "out")
    with pytest.raises(UserError):
        import_flashinfer_trace(tmp_path, tmp_path / "out")
    with pytest.raises(UserError, match="missing module"):
        import_kernelbench(KB / "bad" / "missing_module.py", tmp_path / "out")
