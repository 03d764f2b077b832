"""What distorts timing or the measurement itself: streams, profilers, persisting L2 and precision flags."""

from __future__ import annotations

import ast
import re

from .names import falsy
from .rules import (
    REJECT,
    WARN,
    cpp_pattern,
    names,
    on_call,
    on_ident,
    on_string,
    on_target,
    rule,
    src,
)

rule("stream_creation", WARN,
     "Work on a side stream can escape events recorded on the default stream; the harness tracks, fences and "
     "times streams made through torch.cuda.Stream and ExternalStream.")
rule("untracked_stream", REJECT,
     "A stream made outside torch.cuda.Stream/ExternalStream is invisible to the harness: work on it can run "
     "while the timed stream is held and escape every sample.")
rule("profiler_use", REJECT,
     "The language proof profiles one secret call: a solution that starts, stops or queries a profiler can "
     "make that call fail or behave differently from the others.")
rule("persisting_l2", REJECT,
     "A persisting-L2 set-aside keeps data resident through the cache flush and inflates bandwidth.")
rule("precision_flags", WARN,
     "Enabling TF32 or reduced-precision reductions trades accuracy for speed; the tolerance checks decide.")

names(
    "stream_creation",
    "torch.cuda.Stream torch.cuda.stream torch.cuda.streams.Stream torch.cuda.ExternalStream torch.cuda.set_stream "
    "torch.cuda.StreamContext",
)
names(
    "untracked_stream",
    "torch.Stream torch._C.Stream torch._C._CudaStreamBase torch._utils._CudaStreamBase cupy.cuda.Stream "
    "cupy.cuda.ExternalStream",
)

#: profiler modules whose import alone starts nothing, and annotations that only label a range in a trace
PROFILER_QUIET_IMPORTS = frozenset({"torch.profiler", "torch.autograd.profiler", "torch.cuda.profiler"})
PROFILER_ANNOTATIONS = ("record_function",)


def _profiler_quiet(name: str, what: str) -> bool:
    """``from torch.profiler import record_function`` and its ranges start no profiler."""
    return (what == "imports" and name in PROFILER_QUIET_IMPORTS) or name.rsplit(".", 1)[-1] in PROFILER_ANNOTATIONS


names(
    "profiler_use",
    "torch.profiler torch.autograd.profiler torch.autograd.profiler_legacy torch.autograd.profiler_util "
    "torch._C._autograd torch._C._profiler torch.cuda.profiler torch._C._kineto torch.autograd._profiler_enabled "
    "torch.autograd._enable_profiler torch.autograd._disable_profiler torch.autograd._prepare_profiler "
    "torch.autograd._supported_activities torch.autograd._kineto_step torch.autograd.ProfilerState "
    "torch.autograd.ProfilerConfig torch.autograd.ProfilerActivity triton.profiler cupti",
    unless=_profiler_quiet,
)

PERSIST = re.compile(
    r"accessPolicyWindow|access_policy_window|hitRatio|hitProp|missProp|hit_ratio|hit_prop|"
    r"(?<!Reset)Persisting|PERSISTING|persisting_l2|StreamAttrValue|KernelNodeAttrValue|"
    r"AccessProperty|ACCESS_PROPERTY|StreamAttributeAccessPolicy|LaunchAttributeAccessPolicy"
)
#: a fast pre-filter for PERSIST: one of these occurs wherever PERSIST matches
PERSIST_WORDS = ("ccessPolicy", "access_policy", "hitRatio", "hitProp", "missProp", "hit_ratio", "hit_prop", "ersisting",
                 "PERSISTING", "persisting_l2", "AttrValue", "AccessProperty", "ACCESS_PROPERTY")
STREAM_NAME = re.compile(r"cudaStreamCreate|cuStreamCreate|hipStreamCreate|getStreamFromPool")
_STREAM_WORDS = ("StreamCreate", "getStreamFromPool")
_PROFILER_NAME = re.compile(r"^cupti(?:$|[A-Z])|cudaProfiler(?:Start|Stop)|cuProfiler(?:Start|Stop)")  # identifiers
_PROFILER_WORDS = re.compile(r"\bcupti\b|\bcupti[A-Z]|cudaProfiler|cuProfiler")  # a file that may hold one
_PROFILER_SUBS = ("cupti", "Profiler")
_CPP_HINTS = ("#include", "__global__", "__device__", "TORCH_LIBRARY", "PYBIND11_MODULE", "extern \"C\"")
PRECISION_ATTRS = frozenset({"allow_tf32", "allow_fp16_reduced_precision_reduction",
                             "allow_bf16_reduced_precision_reduction", "allow_fp16_accumulation"})

cpp_pattern("persisting_l2", PERSIST, "persisting-L2 control", subs=" ".join(PERSIST_WORDS))
cpp_pattern("untracked_stream",
            r"\b(?:cudaStreamCreate\w*|cuStreamCreate\w*|hipStreamCreate\w*|getStreamFromPool)\b",
            "creates a stream the harness cannot track", subs="StreamCreate getStreamFromPool")
cpp_pattern("profiler_use", r"\bcupti[A-Z]\w*|\bcudaProfiler(?:Start|Stop)\b|\bcuProfiler(?:Start|Stop)\b",
            "starts, stops or queries a profiler", subs="cupti Profiler")


def is_embedded_cpp(text: str) -> bool:
    """A string that holds C++/CUDA source (for load_inline, cupy.RawKernel); it is token-scanned as C++."""
    return "\n" in text and any(h in text for h in _CPP_HINTS)


@on_ident("persisting_l2", when=lambda s: s.hint(PERSIST, PERSIST_WORDS))
def persisting_identifier(s, ident: str, node: ast.AST) -> None:
    if PERSIST.search(ident):
        s.add("persisting_l2", node, f"persisting-L2 control {ident}")


@on_ident("untracked_stream", when=lambda s: s.hint(STREAM_NAME, _STREAM_WORDS))
def raw_stream_identifier(s, ident: str, node: ast.AST) -> None:
    if STREAM_NAME.search(ident):
        s.add("untracked_stream", node, f"creates a stream the harness cannot track via {ident}")


@on_ident("profiler_use", when=lambda s: s.hint(_PROFILER_WORDS, _PROFILER_SUBS))
def profiler_identifier(s, ident: str, node: ast.AST) -> None:
    if _PROFILER_NAME.search(ident):
        s.add("profiler_use", node, f"profiler control {ident}")


@on_string("persisting_l2")
def persisting_string(s, node: ast.Constant, v: str) -> None:
    if not is_embedded_cpp(v) and PERSIST.search(v):
        s.add("persisting_l2", node, f"persisting-L2 control named in a string: {v[:60]!r}")


def sets_reduced_precision(s, tgt: ast.Attribute, value: ast.AST | None) -> bool:
    if tgt.attr in PRECISION_ATTRS and not falsy(value):
        return True
    return tgt.attr == "fp32_precision" and value is not None and s.fold(value) not in (None, "ieee", "highest")


@on_target("precision_flags", ast.Attribute)
def precision_flag(s, tgt: ast.Attribute, value: ast.AST | None, anchor: ast.AST) -> None:
    if sets_reduced_precision(s, tgt, value):
        s.add("precision_flags", anchor, f"enables reduced precision: {src(tgt)}")


@on_call("precision_flags", "torch.set_float32_matmul_precision")
def matmul_precision(s, node: ast.Call, r: str) -> None:
    if node.args and s.fold(node.args[0]) != "highest":
        s.add("precision_flags", node, f"torch.set_float32_matmul_precision({src(node.args[0])})")
