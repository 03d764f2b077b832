"""Inputs' dtypes and roles: torch's dtype of a definition's dtype name, and the role an input's name and spec
give it where the definition names none (``inputs`` draws each role from its own distribution)."""

from __future__ import annotations

import torch

from solbench.problems.definition import TensorSpec

TORCH_DTYPES: dict[str, torch.dtype] = {
    "float64": torch.float64,
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
if hasattr(torch, "float4_e2m1fn_x2"):
    TORCH_DTYPES["float4_e2m1fn_x2"] = torch.float4_e2m1fn_x2

FLOAT8 = {"float8_e4m3fn", "float8_e5m2"}
INTEGER = {"int64", "int32", "int16", "int8", "uint8"}


def torch_dtype(name: str) -> torch.dtype:
    try:
        return TORCH_DTYPES[name]
    except KeyError:
        raise ValueError(f"dtype {name} is not supported by this torch build") from None


def infer_role(name: str, spec: TensorSpec) -> str:
    """Name-based defaults, so definitions written without roles still get sensible data."""
    if spec.role:
        return spec.role
    n = name.lower()
    if spec.dtype == "bool":
        return "causal_mask" if "mask" in n else "uniform"
    if spec.dtype in INTEGER:
        if any(k in n for k in ("len", "lens", "length")):
            return "length"
        return "index"
    if "cos" == n or n.endswith("_cos") or n.startswith("cos"):
        return "rope_cos"
    if "sin" == n or n.endswith("_sin") or n.startswith("sin"):
        return "rope_sin"
    if ("norm" in n or "ln" in n.split("_") or n in ("gamma",)) and ("weight" in n or n == "gamma"):
        return "norm_weight"
    if n in ("bias", "beta") or n.endswith("_bias") or n.endswith("bias"):
        return "bias"
    if "scale" in n and spec.dtype == "float32":
        return "scale"
    if "var" in n.split("_") or n.endswith("variance"):
        return "positive"
    weight_named = n == "weight" or n.endswith("_weight") or n.startswith("w_") or n in ("w", "w1", "w2", "w3")
    if weight_named and spec.shape and len(spec.shape) >= 2:
        return "weight"
    return "activation"


def is_logits(name: str) -> bool:
    """Activations that are scores over a vocabulary, experts or keys (``logits``, ``gating``, ``scores``): drawn
    without outlier channels or elements, which would make one column win every row (a sampler's top-k/top-p would
    then never matter); their scale and heavy tails still vary."""
    n = name.lower()
    return "logit" in n or n in ("gating", "scores", "router_scores") or n.endswith("_scores")


#: name parts of attention's operands (queries, keys, values and their caches)
_ATTENTION_PARTS = frozenset({"q", "k", "v", "query", "key", "keys", "value", "values", "kv", "qkv", "cache"})


def is_attention_operand(name: str) -> bool:
    """Queries, keys and values (``q``, ``k_cache``, ``key_states``, ``v_new``, ...): drawn at a narrower scale with
    milder outliers (``ATTENTION_SCALE``, ``ATTENTION_OUTLIER``). Their product is a logit, so the draw's scale
    enters squared and an outlier channel meets every key: at the activation role's scale and outliers attention
    turns one-hot, and which keys are in range (a sequence's length, a window, a mask) stops mattering."""
    return bool(_ATTENTION_PARTS & set(name.lower().split("_")))
