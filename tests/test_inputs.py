"""Input generation by role: realistic, valid and reproducible."""

import torch

from solbench.problems.definition import Definition
from solbench.problems.inputs import infer_role, make_inputs
from solbench.problems.workload import Workload


def _defn(inputs, axes):
    return Definition.model_validate({"name": "t", "axes": axes, "inputs": inputs,
                                      "outputs": {"o": {"shape": None, "dtype": "float32"}}})


AXES = {"T": {"type": "var"}, "H": {"type": "const", "value": 256}, "P": {"type": "const", "value": 8},
        "E": {"type": "const", "value": 64}}


def test_roles():
    d = _defn({
        "x": {"shape": ["T", "H"], "dtype": "bfloat16"},
        "norm_weight": {"shape": ["H"], "dtype": "bfloat16"},
        "w": {"shape": ["E", "H"], "dtype": "float32", "role": "weight"},
        "ids": {"shape": ["T"], "dtype": "int64", "role": "index", "range": [0, "E"]},
        "pages": {"shape": ["T", "P"], "dtype": "int32", "role": "page_table", "range": [0, 64]},
        "lens": {"shape": ["T"], "dtype": "int32", "role": "length", "range": [1, 5]},
        "mask": {"shape": ["T", "T"], "dtype": "bool", "role": "causal_mask"},
        "q8": {"shape": ["T", "H"], "dtype": "float8_e4m3fn"},
        "var": {"shape": ["T"], "dtype": "float32", "role": "positive"},
        "probs": {"shape": ["T", "E"], "dtype": "float32", "role": "probability"},
        "cos": {"shape": ["T", "P"], "dtype": "float32"},
        "sin": {"shape": ["T", "P"], "dtype": "float32"},
    }, AXES)
    w = Workload(uuid="w", axes={"T": 32}, inputs={})
    x, nw, wt, ids, pages, lens, mask, q8, var, probs, cos, sin = make_inputs(d, w, seed=1, device="cpu")
    assert x.dtype == torch.bfloat16 and x.shape == (32, 256) and 0.8 < float(x.float().std()) < 1.2
    assert abs(float(nw.float().mean()) - 1) < 0.05 and float(nw.float().std()) < 0.2
    assert abs(float(wt.std()) - 256 ** -0.5) < 0.01
    assert ids.min() >= 0 and ids.max() < 64 and ids.dtype == torch.int64
    assert pages.dtype == torch.int32 and all(len(set(r.tolist())) == 8 for r in pages) and pages.max() < 64
    assert lens.min() >= 1 and lens.max() <= 5
    assert mask.dtype == torch.bool and mask.tril().equal(mask) and mask.diagonal().all()
    assert q8.dtype == torch.float8_e4m3fn and q8.float().abs().max() <= 2
    assert var.min() > 0
    assert torch.allclose(probs.sum(-1), torch.ones(32), atol=1e-5)
    assert torch.allclose(cos ** 2 + sin ** 2, torch.ones_like(cos), atol=1e-5)


def test_same_seed_same_inputs_other_seed_other_inputs():
    d = _defn({"x": {"shape": ["T", "H"], "dtype": "float32"}}, AXES)
    w = Workload(uuid="w", axes={"T": 4}, inputs={})
    a, = make_inputs(d, w, 7, "cpu")
    b, = make_inputs(d, w, 7, "cpu")
    c, = make_inputs(d, w, 8, "cpu")
    assert a.equal(b) and not a.equal(c)


def test_name_based_roles():
    d = _defn({"input_layernorm_weight": {"shape": ["H"], "dtype": "float32"},
               "bias": {"shape": ["H"], "dtype": "float32"},
               "seq_lens": {"shape": ["T"], "dtype": "int32"},
               "weight": {"shape": ["E", "H"], "dtype": "bfloat16"}}, AXES)
    roles = [infer_role(n, s) for n, s in d.inputs.items()]
    assert roles == ["norm_weight", "bias", "length", "weight"]


def test_scalars_and_safetensors(tmp_path):
    from safetensors.torch import save_file

    save_file({"w": torch.arange(4.0)}, str(tmp_path / "w.safetensors"))
    d = _defn({"w": {"shape": ["T"], "dtype": "float32"}, "eps": {"shape": None, "dtype": "float32"}}, AXES)
    w = Workload.model_validate({"uuid": "w", "axes": {"T": 4}, "inputs": {
        "w": {"type": "safetensors", "path": "w.safetensors", "tensor_key": "w"},
        "eps": {"type": "scalar", "value": 1e-6}}})
    t, eps = make_inputs(d, w, 0, "cpu", problem_dir=tmp_path)
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0] and eps == 1e-6


def test_custom_inputs_entrypoint():
    d = _defn({"x": {"shape": ["T"], "dtype": "float32"}}, AXES)
    w = Workload.model_validate({"uuid": "w", "axes": {"T": 3}, "inputs": {"x": {"type": "custom"}}})

    def gen(axes, device):
        return {"x": torch.full((axes["T"],), 5.0, device=device)}

    x, = make_inputs(d, w, 0, "cpu", custom_entry=gen)
    assert x.tolist() == [5.0, 5.0, 5.0]
