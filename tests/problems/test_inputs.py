"""Input generation by role: realistic, valid and reproducible."""

import pytest
import torch

from solbench.problems.definition import Definition
from solbench.problems.inputs import make_inputs
from solbench.problems.roles import infer_role
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
    assert x.dtype == torch.bfloat16 and x.shape == (32, 256) and bool(torch.isfinite(x.float()).all())
    assert float(x.float().abs().max()) >= 8  # outliers of magnitude tens in every draw
    assert float((nw.float() > 0).float().mean()) > 0.9 and float(nw.float().abs().max()) < 3.0 * 4 * 1.5
    assert 0.4 * 256 ** -0.5 < float(wt.std()) < 2.5 * 256 ** -0.5
    assert ids.min() >= 0 and ids.max() < 64 and ids.dtype == torch.int64
    assert pages.dtype == torch.int32 and all(len(set(r.tolist())) == 8 for r in pages) and pages.max() < 64
    assert lens.min() >= 1 and lens.max() <= 5
    assert mask.dtype == torch.bool and mask.tril().equal(mask) and mask.diagonal().all()
    assert q8.dtype == torch.float8_e4m3fn and q8.float().abs().max() <= 2 and q8.float().std() > 0.2
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


# ---- wide draws (issue 11, item 6): the whole meaningful range, heavy tails, per-draw scales, outliers ------------

def _draw(inputs, axes_values, seed, axes=None):
    d = _defn(inputs, axes or {"T": {"type": "var"}, "H": {"type": "var"}})
    return make_inputs(d, Workload(uuid="w", axes=axes_values, inputs={}), seed, "cpu")


LLM = {"T": 256, "H": 4096}  # a realistic hidden-state size


def test_activations_reach_the_whole_range_on_every_draw():
    """A kernel that is only right for |x| < 8 (a polynomial sigmoid) meets such inputs on every draw."""
    for seed in range(8):
        x, = _draw({"x": {"shape": ["T", "H"], "dtype": "float32"}}, LLM, seed)
        assert bool(torch.isfinite(x).all())
        assert int((x.abs() >= 8).sum()) >= 5, seed
        assert float(x.abs().max()) >= 30, seed
    # small tensors too: at least one outlier element per tensor
    for seed in range(8):
        x, = _draw({"x": {"shape": ["T"], "dtype": "float32"}}, {"T": 7, "H": 1}, seed)
        assert float(x.abs().max()) >= 8


def test_activation_scale_varies_between_draws_and_is_shared_within_one():
    meds = []
    for seed in range(16):
        a, b = _draw({"a": {"shape": ["T", "H"], "dtype": "float32"}, "b": {"shape": ["T", "H"], "dtype": "float32"}},
                     {"T": 64, "H": 512}, seed)
        ma, mb = float(a.abs().median()), float(b.abs().median())
        assert 0.8 < ma / mb < 1.25  # one scale per draw: new keys and cached keys, x and its residual agree
        meds.append(ma)
    assert max(meds) / min(meds) > 10  # log-uniform over two decades


def test_activations_are_heavy_tailed_with_outlier_channels():
    for seed in range(4):
        x, = _draw({"x": {"shape": ["T", "H"], "dtype": "float32"}}, LLM, seed)
        x = x.double()
        z = (x - x.mean()) / x.std()
        assert float((z ** 4).mean()) > 4  # a normal has kurtosis 3
        rms = x.pow(2).mean(dim=0).sqrt()  # per channel
        assert float(rms.max()) >= 8 and float(rms.max() / rms.median()) >= 3


def test_logits_are_wide_but_have_no_outlier_columns():
    from solbench.problems.roles import is_logits

    assert is_logits("logits") and is_logits("router_logits") and is_logits("gating") and not is_logits("x")
    scales = []
    for seed in range(8):
        x, = _draw({"logits": {"shape": ["T", "H"], "dtype": "float32"}}, {"T": 64, "H": 4000}, seed)
        rms = x.double().pow(2).mean(dim=0).sqrt()
        assert float(rms.max() / rms.median()) < 3  # no column wins every row
        scales.append(float(x.std()))
    assert max(scales) / min(scales) > 10


def test_fp16_and_fp8_stay_finite_and_in_range():
    inputs = {"h": {"shape": ["T", "H"], "dtype": "float16"},
              "hw": {"shape": ["H", "H"], "dtype": "float16", "role": "weight"},
              "q8": {"shape": ["T", "H"], "dtype": "float8_e4m3fn"},
              "q8r": {"shape": ["T", "H"], "dtype": "float8_e4m3fn", "range": [-1, 3]},
              "q5": {"shape": ["T", "H"], "dtype": "float8_e5m2"},
              "w8": {"shape": ["H", "H"], "dtype": "float8_e4m3fn", "role": "weight"}}
    for seed in range(4):
        h, hw, q8, q8r, q5, w8 = _draw(inputs, {"T": 512, "H": 1024}, seed)
        for t in (h, hw, q8, q8r, q5, w8):
            assert bool(torch.isfinite(t.float()).all())
        assert bool(torch.isfinite(h * h).all())  # |x| <= 255 in fp16: its square is finite
        assert float(h.float().abs().max()) >= 8
        assert float(q8.float().abs().max()) <= 2 and float(q5.float().abs().max()) <= 2
        assert float(q8r.float().min()) >= -1 and float(q8r.float().max()) <= 3
        assert float(q8r.float().min()) < 0.5 < float(q8r.float().max())  # spread around the range's centre
        assert float(w8.float().abs().max()) <= 448


def test_without_a_declared_range_every_role_stays_far_below_the_dtypes_largest_value():
    """The dtype's clamp to its largest finite value runs only where a range is declared (``inputs.random_tensor``):
    every floating role's own draw, over a million elements, stays far below fp16's largest value (the narrowest),
    and an unbounded activation in float32 too."""
    from solbench.problems.inputs import FINITE_MAX

    roles = ["activation", "weight", "norm_weight", "bias", "positive", "negative", "uniform", "scale", "probability",
             "zeros", "ones", "sign"]
    inputs = {r: {"shape": ["T", "H"], "dtype": "float16", "role": r} for r in roles}
    inputs["wide"] = {"shape": ["T", "H"], "dtype": "float32", "role": "activation"}
    for seed in range(2):
        drawn = _draw(inputs, {"T": 1024, "H": 1024}, seed)
        for name, t in zip(inputs, drawn):
            assert float(t.float().abs().max()) < FINITE_MAX["float16"] / 8, name


def test_declared_range_is_honoured():
    for seed in range(4):
        x, b = _draw({"x": {"shape": ["T", "H"], "dtype": "float32", "range": [-3, 5]},
                      "b": {"shape": ["T", "H"], "dtype": "bfloat16", "range": [0, "H"]}}, {"T": 128, "H": 512}, seed)
        assert float(x.min()) >= -3 and float(x.max()) <= 5 and float(x.std()) > 0.5
        assert float(b.float().min()) >= 0 and float(b.float().max()) <= 512


def test_other_roles_vary_within_their_meaning():
    inputs = {"w": {"shape": ["H", "H"], "dtype": "float32", "role": "weight"},
              "g": {"shape": ["H"], "dtype": "float32", "role": "norm_weight"},
              "b": {"shape": ["H"], "dtype": "float32", "role": "bias"},
              "dt": {"shape": ["H"], "dtype": "float32", "role": "positive", "range": [0.001, 0.1]},
              "A": {"shape": ["H"], "dtype": "float32", "role": "negative", "range": [1, 2]},
              "u": {"shape": ["H"], "dtype": "float32", "role": "uniform", "range": [0.2, 0.3]},
              "p": {"shape": ["T", "H"], "dtype": "float32", "role": "probability"},
              "cos": {"shape": ["T", "H"], "dtype": "float32"},
              "sin": {"shape": ["T", "H"], "dtype": "float32"}}
    gains, centres, biases, negative = [], [], [], 0
    for seed in range(12):
        w, g, b, dt, A, u, p, cos, sin = _draw(inputs, {"T": 16, "H": 1024}, seed)
        gains.append(float(w.std()) * 1024 ** 0.5)
        centres.append(float(g.median()))
        biases.append(float(b.std()))
        assert float((g < 0).float().mean()) < 0.06  # about 2% of norm-weight channels are negative
        negative += int((g < 0).sum())
        assert float(dt.min()) >= 0.001 and float(dt.max()) <= 0.1 and float(dt.median()) < 0.03  # log-uniform
        assert float(A.max()) <= -1 and float(A.min()) >= -2
        assert float(u.min()) >= 0.2 and float(u.max()) <= 0.3
        assert torch.allclose(p.sum(-1), torch.ones(16), atol=1e-5) and float(p.min()) >= 0
        assert torch.allclose(cos ** 2 + sin ** 2, torch.ones_like(cos), atol=1e-5)
    assert min(gains) > 0.4 and max(gains) < 2.6 and max(gains) / min(gains) > 2
    assert max(centres) / min(centres) > 3 and min(centres) > 0.1
    assert max(biases) / min(biases) > 5
    assert negative > 0


def test_a_draw_is_bit_identical_in_another_process():
    import hashlib
    import json
    import subprocess
    import sys

    inputs = {"x": {"shape": ["T", "H"], "dtype": "bfloat16"}, "w": {"shape": ["H", "H"], "dtype": "float16", "role": "weight"},
              "g": {"shape": ["H"], "dtype": "float32", "role": "norm_weight"},
              "p": {"shape": ["T", "H"], "dtype": "float32", "role": "probability"},
              "q": {"shape": ["T", "H"], "dtype": "float8_e4m3fn"}}
    axes = {"T": 33, "H": 300}
    code = f"""
import hashlib, json, torch
from solbench.problems.definition import Definition
from solbench.problems.inputs import make_inputs
from solbench.problems.workload import Workload
d = Definition.model_validate({{"name": "t", "axes": {{"T": {{"type": "var"}}, "H": {{"type": "var"}}}},
                               "inputs": json.loads({json.dumps(json.dumps(inputs))}),
                               "outputs": {{"o": {{"shape": None, "dtype": "float32"}}}}}})
xs = make_inputs(d, Workload(uuid="w", axes={axes!r}, inputs={{}}), 4242, "cpu")
print(hashlib.sha256(b"".join(t.contiguous().view(torch.uint8).numpy().tobytes() for t in xs)).hexdigest())
"""
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    here = hashlib.sha256(b"".join(t.contiguous().view(torch.uint8).numpy().tobytes()
                                   for t in _draw(inputs, axes, 4242))).hexdigest()
    assert child == here
    assert here != hashlib.sha256(b"".join(t.contiguous().view(torch.uint8).numpy().tobytes()
                                           for t in _draw(inputs, axes, 4243))).hexdigest()


def test_a_logit_draw_keeps_every_probability_of_a_softmax():
    """Logits are capped (``LOGIT_CAP``): this draw once held a router logit of 124 beside others under 30, every
    other expert's fp32 probability was exactly 0, and the usual router (top-k over the probabilities) picked
    among those zeros, failing an honest solution."""
    from solbench.problems.inputs import LOGIT_CAP
    from solbench.problems.problem import load_problem

    problem = load_problem("moe_topk_softmax")
    workload = problem.workload("moe_topk_softmax-cpu-tiny")
    gating, k = make_inputs(problem.definition, workload, 1723164016815917351, "cpu")
    assert float(gating.abs().max()) <= LOGIT_CAP
    assert bool((torch.softmax(gating, dim=-1) > 0).all())
    by_probability = torch.topk(torch.softmax(gating, dim=-1), k, dim=-1).indices
    by_logit = torch.sort(gating, dim=-1, descending=True, stable=True).indices[:, :k]
    # the logits at the experts picked by probability are the top-k logits (ties within the router's tolerance)
    assert torch.allclose(gating.gather(-1, by_probability), gating.gather(-1, by_logit), rtol=1e-6, atol=1e-6)


def _sets(inputs, axes, seed, count, workload_axes):
    from solbench.problems.inputs import make_input_sets

    return make_input_sets(_defn(inputs, axes), Workload(uuid="w", axes=workload_axes, inputs={}), seed, count, "cpu")


ROLES = {
    "x": {"shape": ["T", "H"], "dtype": "bfloat16"},
    "v": {"shape": ["T"], "dtype": "float32"},
    "ids": {"shape": ["T"], "dtype": "int64", "role": "index", "range": [0, "E"]},
    "pages": {"shape": ["T", "P"], "dtype": "int32", "role": "page_table", "range": [0, 64]},
    "probs": {"shape": ["T", "E"], "dtype": "float32", "role": "probability"},
    "cos": {"shape": ["T", "P"], "dtype": "float32"},
    "sin": {"shape": ["T", "P"], "dtype": "float32"},
    "eps": {"shape": None, "dtype": "float32", "range": [1e-6, 1e-5]},
}


def test_one_set_is_the_draw_and_a_batch_is_reproducible():
    one = _sets(ROLES, AXES, 5, 1, {"T": 16})[0]
    plain = make_inputs(_defn(ROLES, AXES), Workload(uuid="w", axes={"T": 16}, inputs={}), 5, "cpu")
    assert all(a.equal(b) if isinstance(a, torch.Tensor) else a == b for a, b in zip(one, plain))
    a, b = _sets(ROLES, AXES, 5, 6, {"T": 16}), _sets(ROLES, AXES, 5, 6, {"T": 16})
    assert all(x.equal(y) if isinstance(x, torch.Tensor) else x == y for s, t in zip(a, b) for x, y in zip(s, t))


def test_the_sets_of_a_batch_differ_in_every_random_element_and_keep_their_roles():
    """No set of a batch repeats another's values, elementwise or up to a scale, and each is a valid draw of its
    roles (cosines and sines of one angle, probabilities that sum to 1, distinct pages, an outlier per set)."""
    sets = _sets(ROLES, AXES, 9, 8, {"T": 16})
    assert len(sets) == 8
    for j, (x, v, ids, pages, probs, cos, sin, eps) in enumerate(sets):
        assert x.shape == (16, 256) and v.shape == (16,) and pages.shape == (16, 8)
        assert eps == sets[0][7]  # plain values are the draw's
        assert torch.allclose(probs.sum(-1), torch.ones(16), atol=1e-5)
        assert torch.allclose(cos ** 2 + sin ** 2, torch.ones_like(cos), atol=1e-5)
        assert all(len(set(r.tolist())) == 8 for r in pages) and ids.max() < 64
        assert float(x.float().abs().max()) >= 8  # every set has its outliers
        for k in range(j):
            y = sets[k][0].float()
            assert not bool((v == sets[k][1]).any()), (j, k)  # no float32 element shared with another set
            assert float((x.float() == y).float().mean()) < 0.02  # bfloat16: only chance coincidences
            assert float((x.float() / y).std()) > 0.1  # nor the values up to a scale
            assert not cos.equal(sets[k][5])  # per-set roles drawn per set


def test_every_set_of_a_batch_has_its_outlier_elements():
    """A small activation (no outlier channels) gets at least one outlier element per draw, in a batch too."""
    for seed in range(4):
        small = _sets({"x": {"shape": ["T"], "dtype": "float32"}}, {"T": {"type": "var"}}, seed, 16, {"T": 7})
        for (x,) in small:
            assert float(x.abs().max()) >= 8, seed


def test_a_large_batch_is_drawn_in_chunks_of_bounded_memory(monkeypatch):
    from solbench.problems import inputs

    monkeypatch.setattr(inputs, "BATCH_BYTES", 16 * 256 * 4 * 3)  # three sets of x per chunk
    chunked = _sets({"x": {"shape": ["T", "H"], "dtype": "float32"}}, AXES, 3, 7, {"T": 16})
    assert len(chunked) == 7 and len({float(s[0].abs().sum()) for s in chunked}) == 7
    assert chunked[6][0].shape == (16, 256)


def test_a_batchs_rope_tables_are_each_sets_own_and_computed_at_once():
    """RoPE's cosines and sines of a batch of sets: set j's positions are those of its own seed (the table of a
    one-set draw of that seed: a set is a function of its seed alone), cos and sin of a set agree, the sets
    differ, and the batch's tables are computed at once (one ``cos`` and one ``sin`` for any number of sets)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from solbench.problems.inputs import _rope, _set_seed, make_input_sets

    d = _defn({"q": {"shape": ["T", "H", "D"], "dtype": "bfloat16"},
               "cos": {"shape": ["T", "D"], "dtype": "float32"}, "sin": {"shape": ["T", "D"], "dtype": "float32"}},
              {"T": {"type": "var"}, "H": {"type": "const", "value": 4}, "D": {"type": "const", "value": 16}})
    w = Workload(uuid="w", axes={"T": 5}, inputs={})
    calls = []

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func in (torch.ops.aten.cos.default, torch.ops.aten.sin.default):
                calls.append(func)
            return func(*args, **(kwargs or {}))

    with Count():
        sets = make_input_sets(d, w, 7, 6, "cpu")
    assert len(calls) == 2  # one table of each for the six sets
    assert len({tuple(s[1][:, 0].tolist()) for s in sets}) == 6  # every set its own positions
    for s in sets:
        assert torch.allclose(s[1] ** 2 + s[2] ** 2, torch.ones(5, 16), atol=1e-6)
    # set j's tables are a one-set draw's of the seed the batch gives set j
    for j in (0, 3, 5):
        alone = make_input_sets(d, w, _set_seed(7, j), 1, "cpu")[0]
        assert torch.equal(sets[j][1], alone[1]) and torch.equal(sets[j][2], alone[2])
        assert torch.equal(alone[1], _rope("rope_cos", (5, 16), torch.device("cpu"), torch.float32, [_set_seed(7, j)]))


# ---- input shells: what a compile ahead traces on, with no device work ---------------------------------------------

def _meta(x):
    if isinstance(x, torch.Tensor):
        return ("tensor", tuple(x.shape), x.dtype, x.stride(), x.storage_offset(), x.device.type)
    return ("value", type(x))


def test_shells_have_every_draws_shapes_dtypes_and_layouts_and_the_workloads_fixed_values():
    """Every problem of the full suite, each workload's smallest in elements: a shell set (real, and fake) and a
    draw agree in what a compiler keys on (a tensor's shape, dtype, strides, offset and device; a plain value's
    type, and its value where the workload fixes it)."""
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    from solbench.problems.inputs import input_shells
    from solbench.problems.suite import select_problems
    from solbench.problems.workload import CustomInput, ScalarInput

    checked = 0
    for problem in select_problems("full"):
        d = problem.definition
        workloads = [w for w in problem.workloads
                     if not any(isinstance(s, CustomInput) for s in w.inputs.values())]
        if not workloads:
            continue
        w = min(workloads, key=lambda w: sum(torch.Size(d.shape_of(s, d.resolve_axes(w.axes))).numel()
                                             for s in d.inputs.values() if s.shape is not None))
        shells = input_shells(d, w, "cpu", problem.directory)
        drawn = make_inputs(d, w, 7, "cpu", problem.directory)
        assert [_meta(x) for x in shells] == [_meta(x) for x in drawn], problem.name
        fake = input_shells(d, w, "cpu", problem.directory, fake=FakeTensorMode())  # no memory at all
        assert [_meta(x) for x in fake] == [_meta(x) for x in drawn], problem.name
        assert all(isinstance(x, FakeTensor) for x in fake if isinstance(x, torch.Tensor))
        for (name, spec), shell, x in zip(d.inputs.items(), shells, drawn):
            if isinstance(w.inputs.get(name), ScalarInput) and spec.shape is None:
                assert shell == x, (problem.name, name)
        checked += 1
    assert checked >= 100


def test_shells_of_custom_inputs_are_refused_and_safetensors_read_on_the_host(tmp_path):
    from safetensors.torch import save_file

    from solbench.problems.inputs import input_shells

    save_file({"w": torch.arange(6.0, dtype=torch.float64).reshape(2, 3)}, str(tmp_path / "w.safetensors"))
    d = _defn({"w": {"shape": ["T", "T"], "dtype": "float32"}, "eps": {"shape": None, "dtype": "float32"}}, AXES)
    w = Workload.model_validate({"uuid": "w", "axes": {"T": 2}, "inputs": {
        "w": {"type": "safetensors", "path": "w.safetensors", "tensor_key": "w"},
        "eps": {"type": "scalar", "value": 1e-6}}})
    t, eps = input_shells(d, w, "cpu", tmp_path)
    assert (tuple(t.shape), t.dtype, eps) == ((2, 3), torch.float64, 1e-6)  # the file's shape and dtype
    custom = Workload.model_validate({"uuid": "c", "axes": {"T": 3}, "inputs": {"w": {"type": "custom"}}})
    with pytest.raises(ValueError, match="custom inputs"):
        input_shells(d, custom, "cpu")
