"""Input generation: realistic random tensors by role, scalars, safetensors files, custom entry points.

Every draw is a pure function of (definition, workload, seed, device): the same
seed reproduces the same inputs, which is what ``eval --replay`` relies on. Floating
roles are drawn wide (per-draw scales, heavy tails, outlier channels and elements of
magnitude tens for activations) so that a kernel right only on the range a standard
normal reaches fails; the distributions are tabled in docs/PROBLEM_FORMAT.md. Which distribution an input gets
follows from its role (``roles``).
"""

from __future__ import annotations

import contextlib
import hashlib
import math
from pathlib import Path
from typing import Any, Callable

import torch

from solbench import expr
from solbench.problems.definition import Definition, TensorSpec
from solbench.problems.roles import FLOAT8, INTEGER, infer_role, is_attention_operand, is_logits, torch_dtype
from solbench.problems.workload import CustomInput, SafetensorsInput, ScalarInput, Workload

def _range(spec: TensorSpec, axes: dict[str, int], default: tuple[float, float]) -> tuple[float, float]:
    if not spec.range:
        return default
    lo, hi = (expr.evaluate(v, axes) for v in spec.range[:2])
    return float(lo), float(hi)


# ---- the distributions (docs/PROBLEM_FORMAT.md, "Input roles") ----------------------------------------------------
#: the activation role's bulk scale: log-uniform over two decades, one quantile per draw shared by its activations
ACTIVATION_SCALE = (0.1, 10.0)
#: the scale of attention's operands and the magnitude of their outlier channels and elements
#: (``is_attention_operand``): a logit's spread changes by 16x across the scale
ATTENTION_SCALE = (0.5, 2.0)
ATTENTION_OUTLIER = (2.0, 8.0)
#: the typical magnitude of an activation's outlier channels and the magnitude of its outlier elements
ACTIVATION_OUTLIER = (8.0, 64.0)
#: outlier channels along the last axis: 1 + D // 1024 of them (5 of 4096 hidden channels, 1 of a 128 head dim)
OUTLIER_CHANNELS_PER = 1024
#: isolated outlier elements: 1 + numel // 16384 of them
OUTLIER_ELEMENTS_PER = 16384
#: |logit| cap: two logits then differ by at most 60, so no probability of a row's softmax underflows in fp32 (a
#: heavy tail once drew a router logit of 124 beside others under 30: every other expert's probability was exactly 0,
#: and a top-k over the probabilities, the usual router, picked among them at random)
LOGIT_CAP = 30.0
#: |activation| cap per dtype, so that x * x stays finite in fp16 (255.9 ** 2 = 65504); no other dtype is capped
#: below what a draw can reach (its largest values are several hundred)
ACTIVATION_CAP = {"float16": 255.0}
#: with a declared range [lo, hi] (fp8 activations: [-2, 2] unless declared) the scale and the outliers are
#: fractions of the half-width, around the centre, and the draw is clamped to the range
RANGED_SCALE = (1 / 4, 1 / 2)
RANGED_OUTLIER = (1 / 2, 1.0)
#: per-draw spread of weights (times 1/sqrt(fan_in)), norm weights and biases
WEIGHT_GAIN = (0.5, 2.0)
NORM_WEIGHT_CENTRE = (0.2, 3.0)
BIAS_SCALE = (0.02, 1.0)
#: probability role: softmax of a normal times a sharpness (an inverse temperature) drawn per draw; moderate, since
#: a probability's meaning is fixed and very sharp draws make every ratio of two probabilities 0 or infinite
PROBABILITY_SHARPNESS = (0.5, 2.0)
#: finite ranges: a draw never holds Inf (a draw's largest magnitudes without a declared range are some thousands:
#: a heavy tail of 10 * exp(0.5 * 7) * 7, outliers of 64 times a channel's gain; a declared range is clamped to these)
FINITE_MAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38, "float32": 3.4028234663852886e38}


def _params(seed: int, name: str) -> torch.Generator:
    """A CPU generator for one input's per-draw parameters (its scale, its outlier channels and elements), or, with a
    ``<...>`` name, for a parameter every input of the draw shares.

    Seeded from (seed, name) by a stable hash, never by Python's salted ``hash``: the parameters are the same
    in every process and on every device, and drawing them costs no device synchronisation.
    """
    return torch.Generator(device="cpu").manual_seed(_hashed(f"solbench-inputs:{seed}:{name}"))


def _hashed(text: str) -> int:
    """A non-negative 63-bit seed from ``text`` by a stable hash (the same in every process)."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1


def _loguniform(pg: torch.Generator, lo: float, hi: float, n: int | None = None):
    u = torch.rand(n if n is not None else 1, generator=pg, dtype=torch.float64)
    v = torch.exp(math.log(lo) + u * (math.log(hi) - math.log(lo)))
    return v if n is not None else float(v)


def _normal(shape, gen, device) -> torch.Tensor:
    return torch.randn(shape, generator=gen, device=device, dtype=torch.float32)


def _uniform(shape, lo, hi, gen, device) -> torch.Tensor:
    return torch.rand(shape, generator=gen, device=device, dtype=torch.float32) * (hi - lo) + lo


def _spread(shape, lo, hi, gen, device) -> torch.Tensor:
    """Uniform in [lo, hi], or log-uniform when the range spans a decade or more of positive values (time steps,
    decay rates, quantization scales), so that every decade is exercised."""
    if lo > 0 and hi >= 10 * lo:
        u = torch.rand(shape, generator=gen, device=device, dtype=torch.float32)
        return torch.exp(u * (math.log(hi) - math.log(lo)) + math.log(lo))
    return _uniform(shape, lo, hi, gen, device)


def _heavy(shape, gen, device, sigma: float) -> torch.Tensor:
    """A heavy-tailed draw of unit variance: a normal times a log-normal scale, n * exp(sigma * m - sigma^2)
    (a Gaussian scale mixture; kurtosis 3 * exp(4 sigma^2), about 8 for sigma = 0.5 against 3 for a normal)."""
    n = _normal(shape, gen, device)
    m = _normal(shape, gen, device)
    return m.mul_(sigma).sub_(sigma * sigma).exp_().mul_(n)


def _onto(t: torch.Tensor, device: torch.device, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A small tensor of the host's generator on ``device`` (in ``dtype``), the same values either way: on a GPU
    through pinned memory without waiting, since a copy from pageable memory first waits for the stream's queued
    work (the draw's own kernels: three such waits per activation held its draws to the device's pace)."""
    t = t if dtype is None else t.to(dtype)
    if device.type != "cuda":
        return t.to(device)
    return t.pin_memory().to(device, non_blocking=True)


def _activation(shape, gen, device, pg, u: float, scale: tuple[float, float], outlier: tuple[float, float] | None,
                lo: float, hi: float, sets: int = 1) -> torch.Tensor:
    """centre + s * heavy-tailed draw, with outlier channels and elements, clamped to [lo, hi].

    s = scale[0] * (scale[1] / scale[0]) ** u: log-uniform in ``scale``, at the quantile ``u`` that every
    activation of the draw shares (new keys and cached keys, x and its residual come at one scale, as in a real
    model). A few channels along the last axis are amplified so that their typical magnitude is log-uniform in
    ``outlier`` (never below the bulk's), as in the outlier features of LLM hidden states; a few isolated
    elements are set to +-log-uniform(``outlier``). The channels and elements are drawn per input (``pg``);
    ``outlier=None`` draws neither (logits). ``sets`` > 1: ``shape`` leads with the sets of a batch
    (``make_input_sets``), which share the channels, and the elements are as dense in each set as in one draw.
    """
    centre = (lo + hi) / 2 if math.isfinite(lo) and math.isfinite(hi) else 0.0
    s = scale[0] * (scale[1] / scale[0]) ** u
    x = _heavy(shape, gen, device, 0.5).mul_(s)
    numel = x.numel()
    if outlier is not None and len(shape) - (sets > 1) >= 2 and shape[-1] >= 8 and numel:
        dim = shape[-1]
        idx = torch.unique(torch.randint(dim, (1 + dim // OUTLIER_CHANNELS_PER,), generator=pg))
        gain = torch.ones(dim, dtype=torch.float64)
        gain[idx] = (_loguniform(pg, *outlier, len(idx)) / s).clamp_min(1.0)
        x.mul_(_onto(gain, device, torch.float32))
    if outlier is not None and numel:
        per = numel // sets  # each set gets its own outlier elements, as many as one draw of it would
        at = torch.randint(per, (sets, 1 + per // OUTLIER_ELEMENTS_PER), generator=pg)
        idx = torch.unique((at + torch.arange(sets).mul_(per)[:, None]).flatten())
        sign = torch.randint(0, 2, (len(idx),), generator=pg, dtype=torch.float64) * 2 - 1
        vals = sign * _loguniform(pg, *outlier, len(idx))
        x.view(-1)[_onto(idx, device)] = _onto(vals, device, torch.float32)
    if centre:
        x.add_(centre)
    return x.clamp_(lo, hi) if math.isfinite(lo) or math.isfinite(hi) else x


def _block_table(spec: TensorSpec, shape: tuple[int, ...], axes: dict[str, int], gen: torch.Generator) -> torch.Tensor:
    """Page tables as a serving engine allocates them: one permutation of the page pool [lo, hi), split into the
    rows, so no page appears twice in the table (no two sequences share a page, no sequence reads a page twice)."""
    lo, hi = (int(v) for v in _range(spec, axes, (0, math.prod(shape))))
    need = math.prod(shape)
    if hi - lo < need:
        raise ValueError(f"block_table: a pool of {hi - lo} pages cannot give {need} distinct pages {tuple(shape)}; "
                         "the definition must constrain the pool to at least the table's size")
    return torch.randperm(hi - lo, generator=gen, device=gen.device)[:need].reshape(shape) + lo


#: roles whose draw is not elementwise over a batch of sets: each set of a batch is drawn on its own (RoPE's tables
#: too, from positions of their own, but computed for the batch at once: ``_rope``)
PER_SET_ROLES = frozenset({"block_table", "page_table"})


def random_tensor(name: str, spec: TensorSpec, shape: tuple[int, ...], axes: dict[str, int],
                  gen: torch.Generator, device: torch.device, angle_seed: int, sets: int = 1) -> torch.Tensor:
    """One input's draw. ``gen`` (on ``device``) gives the bulk values; the per-draw parameters come from a CPU
    generator seeded from (``angle_seed``, ``name``): the whole draw is a function of (definition, workload, seed,
    device), a few elementwise torch ops per tensor, with no Python loop over elements. ``sets`` > 1: the
    tensor of a batch, shape (sets, *shape), whose sets share the per-draw parameters."""
    role = infer_role(name, spec)
    if sets > 1 and role in PER_SET_ROLES:
        return torch.stack([random_tensor(name, spec, shape, axes, gen, device, _set_seed(angle_seed, j))
                            for j in range(sets)])
    shape = (sets, *shape) if sets > 1 else shape
    dtype = torch_dtype(spec.dtype)
    if spec.dtype in INTEGER or role in ("index", "length", "page_table", "block_table"):
        return _integer(role, spec, shape, axes, gen, device, dtype)
    if spec.dtype == "bool" or role == "causal_mask":
        if role == "causal_mask":
            rows, cols = shape[-2], shape[-1]
            mask = torch.ones(rows, cols, dtype=torch.bool, device=device).tril(diagonal=cols - rows)
            return mask.expand(shape).contiguous().to(dtype)
        return (torch.rand(shape, generator=gen, device=device) < 0.5).to(dtype)
    if role in ("rope_cos", "rope_sin"):
        seeds = [angle_seed] if sets == 1 else [_set_seed(angle_seed, j) for j in range(sets)]
        return _rope(role, shape, device, dtype, seeds)
    x = _floating(name, role, spec, shape, axes, gen, device, angle_seed, sets)
    # in place: the draw is a fresh tensor of its own (a copy of a large one costs the CPU its pages' first touch)
    if spec.dtype in FLOAT8 and role not in ("scale",):
        lo, hi = _range(spec, axes, (-2.0, 2.0)) if role == "activation" else (-448.0, 448.0)
        x.clamp_(lo, hi)
    elif spec.dtype in FINITE_MAX and spec.range:
        # only a declared range can reach the dtype's largest value: every role's own distribution stays within
        # thousands (``FINITE_MAX``), so the clamp would be a pass over the draw that changes nothing
        x.clamp_(-FINITE_MAX[spec.dtype], FINITE_MAX[spec.dtype])
    return x.to(dtype)


def _integer(role: str, spec: TensorSpec, shape: tuple[int, ...], axes: dict[str, int], gen: torch.Generator,
             device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """An integer role's draw: block and page tables, lengths, indices."""
    if role == "block_table":
        return _block_table(spec, shape, axes, gen).to(device=device, dtype=dtype)
    if role == "page_table":
        lo, hi = _range(spec, axes, (0, max(shape[-1], 1)))
        rows = math.prod(shape[:-1]) if len(shape) > 1 else 1
        pages = [torch.randperm(int(hi - lo), generator=gen, device=gen.device).cpu()[: shape[-1]] + int(lo)
                 for _ in range(rows)]
        return torch.stack(pages).reshape(shape).to(device=device, dtype=dtype)
    if role == "length":
        lo, hi = _range(spec, axes, (1, 16))
        return torch.randint(int(lo), int(hi) + 1, shape, generator=gen, device=device).to(dtype)
    lo, hi = _range(spec, axes, (0, 16))
    return torch.randint(int(lo), int(hi), shape, generator=gen, device=device).to(dtype)


def _rope(role: str, shape: tuple[int, ...], device: torch.device, dtype: torch.dtype,
          angle_seeds: list[int]) -> torch.Tensor:
    """RoPE's cosines or sines at random positions: per set (one seed each) its positions from a CPU generator of
    that seed, the tables of every set computed on ``device`` at once (in float64). One seed: a tensor of
    ``shape``; several: ``shape`` is the batch's, (sets, *one set's shape)."""
    # angles depend only on a set's seed, so cos and sin of one draw agree
    one = shape if len(angle_seeds) == 1 else shape[1:]
    rows = one[0] if len(one) > 1 else 1
    dim = one[-1]
    pos = torch.cat([torch.randint(0, 8192, (rows, 1), generator=torch.Generator(device="cpu").manual_seed(s))
                     for s in angle_seeds])
    pos = _onto(pos, device, torch.float64)
    half = (dim + 1) // 2
    inv = 10000.0 ** (-torch.arange(half, dtype=torch.float64, device=device) * 2 / max(dim, 2))
    ang = pos * inv
    # in float64 at half the width, cast before the halves are joined: a batch's float64 transient stays small
    val = (torch.cos(ang) if role == "rope_cos" else torch.sin(ang)).to(dtype)
    if dim != half:
        val = torch.cat([val, val], dim=-1)[:, :dim]
    sets = len(angle_seeds)
    if len(one) == 1:
        val = val.reshape(sets, dim)
    else:  # each row's angles over the axes between a token and its channels (heads)
        val = val.reshape((sets, rows) + (1,) * (len(one) - 2) + (dim,)).expand((sets,) + tuple(one))
    return val.reshape(shape).to(device=device, dtype=dtype).contiguous()


def _floating(name: str, role: str, spec: TensorSpec, shape: tuple[int, ...], axes: dict[str, int],
              gen: torch.Generator, device: torch.device, angle_seed: int, sets: int = 1) -> torch.Tensor:
    """A floating role's draw in float32, before the dtype's clamp."""
    pg = _params(angle_seed, name)
    if role == "weight":
        fan_axis = spec.fan_in or (spec.shape[-1] if spec.shape else None)
        fan_in = axes.get(fan_axis, shape[-1]) if fan_axis else 1
        gain = _loguniform(pg, *WEIGHT_GAIN)
        x = _heavy(shape, gen, device, 0.3).mul_(gain / math.sqrt(max(fan_in, 1)))
    elif role == "norm_weight":
        # a centre per draw, a log-normal spread per channel, and about 2% of channels negative
        centre = _loguniform(pg, *NORM_WEIGHT_CENTRE)
        x = _normal(shape, gen, device).mul_(0.3).exp_().mul_(centre)
        x = torch.where(torch.rand(shape, generator=gen, device=device) < 0.02, -x, x)
    elif role == "bias":
        x = _normal(shape, gen, device).mul_(_loguniform(pg, *BIAS_SCALE))
    elif role == "positive":
        x = _spread(shape, *_range(spec, axes, (0.5, 1.5)), gen, device)
    elif role == "negative":
        x = -_spread(shape, *_range(spec, axes, (0.5, 1.5)), gen, device)
    elif role == "uniform":
        x = _uniform(shape, *_range(spec, axes, (-1.0, 1.0)), gen, device)
    elif role == "scale":
        x = _spread(shape, *_range(spec, axes, (0.005, 0.02)), gen, device)
    elif role == "probability":
        # one sharpness per draw, shared by the draw's probability inputs (a draft and a target distribution)
        sharp = _loguniform(_params(angle_seed, "<probability sharpness>"), *PROBABILITY_SHARPNESS)
        x = torch.softmax(_normal(shape, gen, device).mul_(sharp), dim=-1)
    elif role == "zeros":
        x = torch.zeros(shape, device=device)
    elif role == "ones":
        x = torch.ones(shape, device=device)
    elif role == "sign":  # -1 or +1 with equal odds (hinge-loss targets)
        x = torch.randint(0, 2, shape, generator=gen, device=device).mul_(2).sub_(1).to(torch.float32)
    else:  # activation: the draw's scale quantile is shared by every activation input of the draw
        u = float(torch.rand(1, generator=_params(angle_seed, "<activation scale>"), dtype=torch.float64))
        if spec.range or spec.dtype in FLOAT8:  # within a range
            lo, hi = _range(spec, axes, (-2.0, 2.0))
            half = (hi - lo) / 2
            outlier = (half * RANGED_OUTLIER[0], half * RANGED_OUTLIER[1])
            x = _activation(shape, gen, device, pg, u, (half * RANGED_SCALE[0], half * RANGED_SCALE[1]),
                            None if is_logits(name) else outlier, lo, hi, sets)
        else:
            cap = min(ACTIVATION_CAP.get(spec.dtype, math.inf), LOGIT_CAP if is_logits(name) else math.inf)
            attention = is_attention_operand(name)
            x = _activation(shape, gen, device, pg, u, ATTENTION_SCALE if attention else ACTIVATION_SCALE,
                            None if is_logits(name) else ATTENTION_OUTLIER if attention else ACTIVATION_OUTLIER,
                            -cap, cap, sets)
    return x


def _load_safetensors(src: SafetensorsInput, problem_dir: Path | None, device) -> torch.Tensor:
    from safetensors.torch import load_file

    path = Path(src.path)
    if not path.is_absolute() and problem_dir is not None:
        path = problem_dir / path
    if not path.is_file():
        raise FileNotFoundError(f"safetensors file not found: {path}")
    tensors = load_file(str(path))
    if src.tensor_key not in tensors:
        raise KeyError(f"{path} holds no tensor {src.tensor_key!r}")
    return tensors[src.tensor_key].to(device)


def make_inputs(definition: Definition, workload: Workload, seed: int, device: str | torch.device,
                problem_dir: Path | None = None,
                custom_entry: Callable[..., dict[str, Any]] | None = None) -> list[Any]:
    """Inputs in the definition's order for one draw."""
    return make_input_sets(definition, workload, seed, 1, device, problem_dir, custom_entry)[0]


#: a batch of input sets is drawn in chunks of at most this many bytes of float32 per input tensor
BATCH_BYTES = 256 << 20


def make_input_sets(definition: Definition, workload: Workload, seed: int, count: int, device: str | torch.device,
                    problem_dir: Path | None = None,
                    custom_entry: Callable[..., dict[str, Any]] | None = None) -> list[list[Any]]:
    """``count`` input sets of one draw of ``seed``: each tensor of the sets drawn as one batch (shape (count,
    *shape), in chunks of at most ``BATCH_BYTES``), its sets sharing the draw's per-draw parameters (scales,
    outlier channels, plain values) and differing in every random element. One set is ``make_inputs``'s draw;
    set ``j`` of a batch is a function of (definition, workload, seed, count, j, device) alone. The timing's
    rounds and the audit draw their calls' inputs so: a draw's host work and launches are paid once per batch,
    not once per call."""
    device = torch.device(device)
    axes = definition.resolve_axes(workload.axes)
    sources = workload.inputs
    if sources and all(isinstance(s, CustomInput) for s in sources.values()):
        if custom_entry is None:
            raise ValueError("workload uses custom inputs but the definition names no custom_inputs_entrypoint")
        scalars = {n: s.value for n, s in sources.items() if isinstance(s, ScalarInput)}
        out = []
        for j in range(count):
            torch.manual_seed(seed if j == 0 else _set_seed(seed, j))
            produced = custom_entry({**axes, **scalars}, device)
            out.append([produced[name] for name in definition.inputs])
        return out
    per = max(1, BATCH_BYTES // max(4, 4 * _largest(definition, axes)))
    sets: list[list[Any]] = []
    for c, start in enumerate(range(0, count, per)):
        sets += _draw(definition, sources, axes, seed if c == 0 else _set_seed(seed, -c), min(per, count - start),
                      device, problem_dir)
    return sets


def input_shells(definition: Definition, workload: Workload, device: str | torch.device,
                 problem_dir: Path | None = None, fake: Any = None) -> list[Any]:
    """The inputs of one draw as a compiler sees them, with no device work: each tensor allocated (``torch.empty``,
    no kernel runs) with the shape, dtype and layout a draw gives it, plain values as the workload fixes them, a
    safetensors input's shape and dtype read on the host. What a ``torch.compile`` of the reference traces and keys
    its cache on is the same as for a draw, but for a plain value the workload leaves random (here the low end of
    its range; every draw has its own, so such a compile is keyed per draw anyway); the tensors' values are
    whatever the memory held. ``fake``: a ``FakeTensorMode`` the tensors are made in (no memory at all). Raises
    ``ValueError`` for custom inputs (only their entry point knows them)."""
    device = torch.device(device)
    axes = definition.resolve_axes(workload.axes)
    sources = workload.inputs
    if any(isinstance(s, CustomInput) for s in sources.values()):
        raise ValueError("custom inputs are known only by drawing them")
    out: list[Any] = []
    for name, spec in definition.inputs.items():
        src = sources.get(name)
        if isinstance(src, SafetensorsInput):
            t = _load_safetensors(src, problem_dir, "cpu")
            shape, dtype = tuple(t.shape), t.dtype
        elif spec.shape is not None:
            shape, dtype = definition.shape_of(spec, axes), torch_dtype(spec.dtype)
        elif isinstance(src, ScalarInput):
            out.append(src.value)
            continue
        else:
            lo = _range(spec, axes, (0.5, 1.5))[0]
            out.append(int(lo) if spec.dtype in INTEGER else float(lo))
            continue
        with fake if fake is not None else contextlib.nullcontext():
            out.append(torch.empty(shape, dtype=dtype, device=device))
    return out


def _largest(definition: Definition, axes: dict[str, int]) -> int:
    """The most elements of any tensor input of one set."""
    return max((math.prod(definition.shape_of(spec, axes)) for spec in definition.inputs.values()
                if spec.shape is not None), default=1)


def _draw(definition: Definition, sources, axes: dict[str, int], seed: int, sets: int, device: torch.device,
          problem_dir: Path | None) -> list[list[Any]]:
    """``sets`` input sets of one batch drawn from ``seed`` (``make_input_sets``)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    out: list[list[Any]] = [[] for _ in range(sets)]
    for name, spec in definition.inputs.items():
        src = sources.get(name)
        if isinstance(src, ScalarInput):
            x = src.value if spec.shape is None else torch.full(definition.shape_of(spec, axes), src.value,
                                                                dtype=torch_dtype(spec.dtype), device=device)
        elif isinstance(src, SafetensorsInput):
            x = _load_safetensors(src, problem_dir, device)
        elif spec.shape is None:
            lo, hi = _range(spec, axes, (0.5, 1.5))
            if spec.dtype in INTEGER:
                x = int(torch.randint(int(lo), int(hi) + 1, (1,), generator=gen, device=device).item())
            else:
                x = float(_uniform((1,), lo, hi, gen, device).item())
        else:
            batch = random_tensor(name, spec, definition.shape_of(spec, axes), axes, gen, device, angle_seed=seed,
                                  sets=sets)
            for j in range(sets):
                out[j].append(batch if sets == 1 else batch[j])
            continue
        for j in range(sets):  # plain values, fixed tensors and files: the same in every set
            out[j].append(x)
    return out


def _set_seed(seed: int, j: int) -> int:
    """The seed of set (or chunk) ``j`` of a batch drawn from ``seed``, where a part of it is drawn on its own."""
    return _hashed(f"solbench-set:{seed}:{j}")
