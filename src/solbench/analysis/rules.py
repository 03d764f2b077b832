"""Counting rules of the aten ops that hide matrix work, looked up by op name.

The tracer (``counting._Tracer``) calls ``RULES[name](ctx, call, args, outs)`` for an op registered here, where
``call`` is the op's arguments bound to its schema's names and ``ctx`` gives the work count, the precision the
operands arrived in and the problem's TF32 setting. A rule adds the op's FLOPs and returns the elements it reads
of each input (``[(tensor, elements)]``), or ``None`` to let the tracer count every input once.

Every rule counts what any kernel must do at least:

- matmuls: 2 x M x N x K;
- convolutions (forward, transposed, backward): 2 x the multiply-adds that pair an output with a real input
  element (taps that land in the zero padding, or outside a transposed convolution's cropped output, are not
  counted), and only the input elements and kernel taps some such pair uses;
- attention: 2 x (D_qk + D_v) per visible (query, key) pair forward, 2 x (3 D_qk + 2 D_v) backward; a causal
  mask leaves at least m(m + 1)/2 pairs of an Sq x Sk block, m = min(Sq, Sk), whichever corner it is aligned to;
  a mask or bias tensor is data, so its pairs count nothing;
- recurrent layers (LSTM, GRU, RNN): 2 x tokens x the elements of every weight matrix, per layer and direction,
  plus the gate nonlinearities.

docs/BOUNDS.md states the formulas.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

aten = torch.ops.aten

Reads = list[tuple[torch.Tensor, float]]
RULES: dict[str, Callable[..., Reads | None]] = {}

_NARROW = {  # precision rank: lower is narrower
    torch.float8_e4m3fn: 0, torch.float8_e5m2: 0, torch.int8: 0, torch.uint8: 0,
    torch.float16: 1, torch.bfloat16: 1, torch.float32: 2, torch.float64: 3,
}


def matmul_unit(dtype: torch.dtype, allow_tf32: bool) -> str:
    """The work unit of a matrix product whose narrowest operand arrived in ``dtype``."""
    if dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        return "tensor_fp8"
    if dtype in (torch.int8, torch.uint8):
        return "tensor_int8"
    if dtype in (torch.float16, torch.bfloat16):
        return "tensor_bf16"
    if dtype == torch.float32:
        # fp32-accurate products: the FMA units or an emulation on tensor cores (roofline.py decides)
        return "tensor_tf32" if allow_tf32 else "matmul_fp32"
    return "vector_fp32"


def narrowest(dtypes) -> torch.dtype:
    return min(dtypes, key=lambda d: _NARROW.get(d, 9))


def rule(*names: str):
    def register(fn):
        for n in names:
            RULES[n] = fn
        return fn
    return register


def bind(func, args, kwargs) -> dict[str, Any]:
    """The op's arguments by their schema names (defaults filled in)."""
    schema = getattr(func, "_schema", None)
    call: dict[str, Any] = {}
    if schema is None:
        return call
    for i, a in enumerate(schema.arguments):
        if not a.kwarg_only and i < len(args):
            call[a.name] = args[i]
        elif a.name in kwargs:
            call[a.name] = kwargs[a.name]
        else:
            call[a.name] = a.default_value if a.has_default_value() else None
    return call


def _tensor(x) -> torch.Tensor | None:
    return x if isinstance(x, torch.Tensor) else None


# ---------------------------------------------------------------- matmuls

_ADD_MM = ("addmm", "baddbmm", "addbmm", "addmv")


@rule("mm", "bmm", "_scaled_mm", "_int_mm", "matmul", "dot", "vdot", "mv", *_ADD_MM, *(n + "_" for n in _ADD_MM))
def _matmul(ctx, name, call, args, outs) -> Reads | None:
    base = name.rstrip("_")
    a, b = (args[1], args[2]) if base in _ADD_MM else (args[0], args[1])
    macs = outs[0].numel() * a.shape[-1]
    if base == "addbmm":
        macs *= a.shape[0]
    ctx.add(ctx.unit(a, b), 2 * macs)
    if base in _ADD_MM:
        ctx.add("vector_fp32", outs[0].numel())
    return None


# ---------------------------------------------------------------- convolutions

def _axis(src: int, dst: int, k: int, s: int, p: int, d: int) -> tuple[int, int, int, int]:
    """One spatial axis: the pairs (a, j), a in [0, src), tap j in [0, k), whose position a*s - p + j*d lies in
    [0, dst); and how many a, how many positions and how many taps take part in at least one pair."""
    pairs = taps = 0
    src_used, dst_used = bytearray(src), bytearray(dst)
    for j in range(k):
        off = j * d - p
        lo = max(0, -(off // s))  # smallest a with a*s + off >= 0
        hi = min(src - 1, (dst - 1 - off) // s)  # largest a with a*s + off <= dst - 1
        n = hi - lo + 1
        if n <= 0:
            continue
        pairs += n
        taps += 1
        src_used[lo:hi + 1] = b"\x01" * n
        dst_used[lo * s + off:hi * s + off + 1:s] = b"\x01" * n
    return pairs, src_used.count(1), dst_used.count(1), taps


class ConvGeometry:
    """A convolution's real multiply-adds and the elements they use, from the shapes and parameters."""

    def __init__(self, x: torch.Tensor, w: torch.Tensor, y_shape, stride, padding, dilation, transposed: bool):
        nd = w.dim() - 2
        expand = (lambda v: list(v) * nd if len(v) == 1 else list(v))
        stride, padding, dilation = expand(stride), expand(padding), expand(dilation)
        x_sp, y_sp = list(x.shape[-nd:]) if nd else [], list(y_shape[-nd:]) if nd else []
        self.batch = math.prod(x.shape[:-nd - 1])
        pairs = used_x = used_y = taps = 1
        for i in range(nd):
            if transposed:  # every input position scatters to output positions
                pr, ux, uy, t = _axis(x_sp[i], y_sp[i], w.shape[2 + i], stride[i], padding[i], dilation[i])
            else:  # every output position gathers from input positions
                pr, uy, ux, t = _axis(y_sp[i], x_sp[i], w.shape[2 + i], stride[i], padding[i], dilation[i])
            pairs, used_x, used_y, taps = pairs * pr, used_x * ux, used_y * uy, taps * t
        # the weight is (C_out, C_in / groups, k...) forward and (C_in, C_out / groups, k...) transposed:
        # either way each real pair costs w.shape[0] x w.shape[1] multiply-adds per batch element
        self.macs = self.batch * w.shape[0] * w.shape[1] * pairs
        self.x_elems = self.batch * x.shape[-nd - 1] * used_x
        self.y_elems_used = self.batch * y_shape[-nd - 1] * used_y
        self.w_elems = w.shape[0] * w.shape[1] * taps


@rule("convolution", "_convolution", "convolution_overrideable")
def _convolution(ctx, name, call, args, outs) -> Reads | None:
    x, w, bias = call["input"], call["weight"], _tensor(call.get("bias"))
    geo = ConvGeometry(x, w, outs[0].shape, call["stride"], call["padding"], call["dilation"], bool(call["transposed"]))
    ctx.add(ctx.unit(x, w), 2 * geo.macs)
    reads: Reads = [(x, geo.x_elems), (w, geo.w_elems)]
    if bias is not None:
        reads.append((bias, bias.numel()))
    return reads


@rule("convolution_backward")
def _convolution_backward(ctx, name, call, args, outs) -> Reads | None:
    g, x, w = call["grad_output"], call["input"], call["weight"]
    mask = list(call.get("output_mask") or (True, True, True))
    geo = ConvGeometry(x, w, g.shape, call["stride"], call["padding"], call["dilation"], bool(call["transposed"]))
    reads: dict[int, tuple[torch.Tensor, float]] = {}

    def read(t, n):
        reads[id(t)] = (t, max(n, reads.get(id(t), (t, 0))[1]))

    if mask[0]:  # input gradient: the transposed pairing of the same real pairs
        ctx.add(ctx.unit(g, w), 2 * geo.macs)
        read(g, geo.y_elems_used)
        read(w, geo.w_elems)
    if mask[1]:  # weight gradient: one multiply-add per real pair as well
        ctx.add(ctx.unit(g, x), 2 * geo.macs)
        read(g, geo.y_elems_used)
        read(x, geo.x_elems)
    if len(mask) > 2 and mask[2]:  # bias gradient: a sum over every gradient element
        ctx.add("vector_fp32", g.numel())
        read(g, g.numel())
    return list(reads.values())


# ---------------------------------------------------------------- attention

#: op -> (layout of q/k/v: "bhsd" = (..., heads, seq, dim), "bshd" = (batch, seq, heads, dim); backward?)
_ATTENTION = {
    "scaled_dot_product_attention": ("bhsd", False),
    "_scaled_dot_product_flash_attention": ("bhsd", False),
    "_scaled_dot_product_flash_attention_for_cpu": ("bhsd", False),
    "_scaled_dot_product_efficient_attention": ("bhsd", False),
    "_scaled_dot_product_cudnn_attention": ("bhsd", False),
    "_scaled_dot_product_fused_attention_overrideable": ("bhsd", False),
    "_cudnn_attention_forward": ("bhsd", False),
    "_flash_attention_forward": ("bshd", False),
    "_efficient_attention_forward": ("bshd", False),
    "_scaled_dot_product_flash_attention_backward": ("bhsd", True),
    "_scaled_dot_product_flash_attention_for_cpu_backward": ("bhsd", True),
    "_scaled_dot_product_efficient_attention_backward": ("bhsd", True),
    "_scaled_dot_product_cudnn_attention_backward": ("bhsd", True),
    "_scaled_dot_product_fused_attention_overrideable_backward": ("bhsd", True),
    "_cudnn_attention_backward": ("bhsd", True),
    "_flash_attention_backward": ("bshd", True),
    "_efficient_attention_backward": ("bshd", True),
}


def visible_pairs(sq: int, sk: int, causal: bool, left: int | None = None, right: int | None = None) -> int:
    """The fewest (query, key) pairs a kernel must score in an sq x sk block.

    Causal: m(m + 1)/2 with m = min(sq, sk), the smaller of the top-left and bottom-right aligned triangles.
    A window (left/right keys around the diagonal, bottom-right aligned as flash attention's) is counted row by row.
    """
    left = None if left is None or left < 0 else left
    right = 0 if causal and (right is None or right < 0) else (None if right is None or right < 0 else right)
    if left is None and right is None:
        return sq * sk
    if left is None and right == 0:
        m = min(sq, sk)
        return m * (m + 1) // 2
    total = 0
    for i in range(sq):
        centre = i + sk - sq
        lo = 0 if left is None else max(0, centre - left)
        hi = sk - 1 if right is None else min(sk - 1, centre + right)
        total += max(0, hi - lo + 1)
    return total


@rule(*_ATTENTION)
def _attention(ctx, name, call, args, outs) -> Reads | None:
    layout, backward = _ATTENTION[name]
    q, k, v = call["query"], call["key"], call["value"]
    varlen = any(_tensor(call.get(n)) is not None for n in ("cum_seq_q", "cu_seqlens_q"))
    masked = any(_tensor(call.get(n)) is not None for n in ("attn_mask", "attn_bias", "bias"))
    if varlen or masked or call.get("window_size") is not None:
        return None  # the visible pairs are data (sequence lengths, a mask): counted as none
    if layout == "bhsd":
        bh, sq, sk = math.prod(q.shape[:-2]), q.shape[-2], k.shape[-2]
    else:
        bh, sq, sk = q.shape[0] * q.shape[2], q.shape[1], k.shape[1]
    d, dv = q.shape[-1], v.shape[-1]
    causal = bool(call.get("is_causal")) or call.get("custom_mask_type") in (1, 2)
    pairs = bh * visible_pairs(sq, sk, causal, call.get("window_size_left"), call.get("window_size_right"))
    unit = ctx.unit(q, k, v)
    if not backward:
        ctx.add(unit, 2 * pairs * (d + dv))  # Q K^T and P V
        ctx.add("sfu", pairs)  # one exp per score
        ctx.add("vector_fp32", pairs)
        return None
    gmask = list(call.get("grad_input_mask") or (True, True, True))
    dq, dk, dvv = gmask[0], gmask[1], gmask[2]
    per_pair = d  # the scores, recomputed from q, k and the saved logsumexp
    per_pair += dv if (dq or dk) else 0  # dP = dO V^T
    per_pair += dv if dvv else 0  # dV = P^T dO
    per_pair += d if dq else 0  # dQ = dS K
    per_pair += d if dk else 0  # dK = dS^T Q
    ctx.add(unit, 2 * pairs * per_pair)
    ctx.add("sfu", pairs)
    ctx.add("vector_fp32", 2 * pairs)
    return None


# ---------------------------------------------------------------- recurrent layers

#: gates per cell, and the transcendentals and vector FLOPs per hidden unit and token (beyond the matmuls)
_CELLS = {"lstm": (4, 5, 4), "gru": (3, 3, 5), "rnn_tanh": (1, 1, 0), "rnn_relu": (1, 0, 1)}
_MODES = {0: "rnn_relu", 1: "rnn_tanh", 2: "lstm", 3: "gru"}  # cuDNN / oneDNN mode numbers


def _tokens(x: torch.Tensor, batch_sizes) -> int:
    packed = isinstance(batch_sizes, torch.Tensor) or (isinstance(batch_sizes, (list, tuple)) and len(batch_sizes) > 0)
    return x.shape[0] if packed or x.dim() == 2 else x.shape[0] * x.shape[1]


def _rnn_work(ctx, cell: str, x, mats: list[torch.Tensor], tokens: int, layer_dirs: int, hidden: int,
              backward: bool = False) -> None:
    """2 x tokens x weight elements of matmuls; the gates' transcendentals (forward only: a backward reads the
    saved activations) and their vector work."""
    ctx.add(ctx.unit(x, *mats), 2 * tokens * sum(m.numel() for m in mats))
    _, sfu, vec = _CELLS[cell]
    if not backward:
        ctx.add("sfu", tokens * layer_dirs * hidden * sfu)
    ctx.add("vector_fp32", tokens * layer_dirs * hidden * vec)


@rule("lstm", "gru", "rnn_tanh", "rnn_relu")
def _rnn(ctx, name, call, args, outs) -> Reads | None:
    x = call.get("input") if call.get("input") is not None else call.get("data")
    params = [p for p in call["params"] if isinstance(p, torch.Tensor)]
    mats = [p for p in params if p.dim() == 2]
    layer_dirs = int(call["num_layers"]) * (2 if call["bidirectional"] else 1)
    hidden = mats[0].shape[0] // _CELLS[name][0]
    _rnn_work(ctx, name, x, mats, _tokens(x, call.get("batch_sizes")), layer_dirs, hidden)
    return None


@rule("mkldnn_rnn_layer", "mkldnn_rnn_layer_backward")
def _mkldnn_rnn(ctx, name, call, args, outs) -> Reads | None:
    x = call["input"]
    cell = _MODES.get(int(call["mode"]), "rnn_tanh")
    if name == "mkldnn_rnn_layer":
        mats = [call["weight0"], call["weight1"]]
    else:
        mats = [call["weight1"], call["weight2"]]
    tokens, hidden = _tokens(x, call.get("batch_sizes")), int(call["hidden_size"])
    _rnn_work(ctx, cell, x, mats, tokens, 1, hidden, backward=name.endswith("_backward"))
    if name.endswith("_backward"):  # the weight gradient pairs every token with every weight once more
        ctx.add(ctx.unit(x, *mats), 2 * tokens * sum(m.numel() for m in mats))
    return None


@rule("_cudnn_rnn", "miopen_rnn", "_cudnn_rnn_backward")
def _cudnn_rnn(ctx, name, call, args, outs) -> Reads | None:
    x = call["input"]
    cell = _MODES.get(int(call["mode"]), "rnn_tanh")
    weights = [t for t in call["weight"] if isinstance(t, torch.Tensor)]
    layer_dirs = int(call["num_layers"]) * (2 if call["bidirectional"] else 1)
    tokens = _tokens(x, call.get("batch_sizes"))
    mats = [t for t in weights if t.dim() == 2]
    hidden = int(call["hidden_size"])
    if name != "_cudnn_rnn_backward":
        _rnn_work(ctx, cell, x, mats, tokens, layer_dirs, hidden)
        return None
    mask = list(call.get("output_mask") or (True, True, True, True))
    per = len(weights) // max(layer_dirs, 1)
    recurrent = [weights[i * per + 1] for i in range(layer_dirs)] if per >= 2 else []
    data = mats if mask[0] else recurrent  # back through time needs the recurrent matrices at least
    _rnn_work(ctx, cell, x, data, tokens, layer_dirs, hidden, backward=True)
    if mask[3]:
        ctx.add(ctx.unit(x, *mats), 2 * tokens * sum(m.numel() for m in mats))
    return None
