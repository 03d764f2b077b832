"""The Definition: what a kernel computes, in the flashinfer-trace schema.

Fields of the flashinfer-trace / SOL-ExecBench Definition load unchanged;
solbench's own optional fields (input roles, in-place inputs, tolerances,
SOL overrides, TF32 opt-in) sit beside them. Unknown fields are kept.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from solbench import expr

DTYPES = (
    "float64",
    "float32",
    "float16",
    "bfloat16",
    "float8_e4m3fn",
    "float8_e5m2",
    "float4_e2m1",
    "float4_e2m1fn_x2",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "bool",
)

#: How an input's random values are drawn; see docs/PROBLEM_FORMAT.md.
ROLES = (
    "activation",  # standard normal
    "weight",  # normal / sqrt(fan_in)
    "norm_weight",  # 1 + 0.1 * normal
    "bias",  # 0.1 * normal
    "positive",  # uniform in range, default [0.5, 1.5]
    "negative",  # -uniform in range, default [0.5, 1.5]
    "uniform",  # uniform in range
    "scale",  # positive quantization scale, uniform in range, default [0.005, 0.02]
    "index",  # integers in [low, high)
    "length",  # integers in [low, high] inclusive
    "page_table",  # distinct page ids per row drawn from [0, high)
    "block_table",  # a serving engine's page tables: distinct page ids across the whole table, from [low, high)
    "causal_mask",  # bool, True on and below the diagonal
    "probability",  # softmax of a normal along the last dim
    "rope_cos",  # cos of position * inv_freq
    "rope_sin",  # sin of the same angles
    "zeros",
    "ones",
    "sign",  # -1 or +1 with equal odds
)


class AxisConst(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: Literal["const"]
    value: int
    description: str | None = None


class AxisVar(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: Literal["var"]
    description: str | None = None
    #: solbench: inclusive range of valid values, used to draw held-out shapes.
    min: int | None = None
    max: int | None = None


class AxisExpr(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: Literal["expr"]
    expression: str
    description: str | None = None


Axis = Annotated[Union[AxisConst, AxisVar, AxisExpr], Field(discriminator="type")]


class TensorSpec(BaseModel):
    model_config = ConfigDict(extra="allow")
    shape: list[str] | None
    dtype: str
    description: str | None = None
    #: solbench: how random values are drawn (ROLES); inferred from the name when absent.
    role: str | None = None
    #: solbench: [low, high] for uniform/index/length/page_table roles; entries may be axis expressions.
    range: list[float | int | str] | None = None
    #: solbench: the axis that is the fan-in of a ``weight`` (default: the last one).
    fan_in: str | None = None
    #: solbench, outputs only: how to compare where elementwise closeness is the wrong test:
    #: {"mode": "indices_of", "input": INPUT, "dim": -1} (top-k/sort indices: any distinct indices whose input
    #: values equal those at the reference's indices pass, so ties are fine; exactly, unless the mode gives
    #: "atol"/"rtol" for near-ties a rounding step apart; "values" may name the matching values output); {"mode": "set", "dim": -1} (order along dim does not
    #: matter); {"mode": "fp8_ulp", "ulps": 1} (fp8 outputs within N steps of the reference's value)
    compare: dict[str, Any] | None = None

    @field_validator("dtype")
    @classmethod
    def _known_dtype(cls, value: str) -> str:
        if value not in DTYPES:
            raise ValueError(f"unknown dtype {value!r}; expected one of {', '.join(DTYPES)}")
        return value

    @field_validator("role")
    @classmethod
    def _known_role(cls, value: str | None) -> str | None:
        if value is not None and value not in ROLES:
            raise ValueError(f"unknown role {value!r}; expected one of {', '.join(ROLES)}")
        return value


class Tolerance(BaseModel):
    """Elementwise closeness: |out - anchor| <= atol + rtol * |anchor| (+ 2x the reference's own error)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    atol: float | None = None
    rtol: float | None = None
    #: share of elements that must match
    matched_ratio: float | None = Field(default=None, alias="required_matched_ratio")
    #: largest absolute error allowed anywhere, when set
    max_abs_error: float | None = Field(default=None, alias="max_error_cap")


class SolOverride(BaseModel):
    """Counts a definition states itself where tracing over-counts or cannot see.

    Every value is an expression over the axes. ``flops`` maps a unit
    (tensor_bf16, tensor_fp8, tensor_tf32, tensor_int8, vector_fp32) to a count;
    ``bytes`` is the minimum DRAM traffic; ``sfu`` the transcendental count.
    A missing entry keeps the traced count.
    """

    model_config = ConfigDict(extra="forbid")
    flops: dict[str, str | int] | None = None
    bytes: str | int | None = None
    sfu: str | int | None = None
    note: str | None = None


class IntegrityPolicy(BaseModel):
    """What a problem allows or forbids in solutions (static rules by name; calls by dotted name)."""

    model_config = ConfigDict(extra="forbid")
    allow: list[str] = Field(default_factory=list)
    forbid_calls: list[str] = Field(default_factory=list)
    #: the solution's own language alone does the work: another language's or a library's kernels, imports or
    #: includes are reward hacks (``EvalOptions.single_language`` asks the same for one evaluation)
    single_language: bool = False


class Definition(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str
    op_type: str | None = None
    description: str | None = None
    tags: list[str] = Field(default_factory=list)
    axes: dict[str, Axis]
    inputs: dict[str, TensorSpec]
    outputs: dict[str, TensorSpec]
    reference: str | None = None
    custom_inputs_entrypoint: str | None = None
    constraints: list[str] | None = None
    # solbench extensions
    inplace_inputs: list[str] = Field(default_factory=list)
    tolerance: Tolerance | None = None
    #: a function in reference.py, ``accept(inputs, outputs, expected) -> None | str``, consulted only when the
    #: elementwise comparison finds wrong values: None accepts the outputs as another valid answer (a routing tie
    #: broken the other way), a string says why not. It must check every output itself.
    custom_check_entrypoint: str | None = None
    allow_tf32: bool = False
    sol: SolOverride | None = None
    policy: IntegrityPolicy | None = None

    @model_validator(mode="after")
    def _consistent(self) -> "Definition":
        axis_names = set(self.axes)
        for oname, spec in self.outputs.items():
            mode = (spec.compare or {}).get("mode")
            if spec.compare is not None and mode not in ("indices_of", "set", "fp8_ulp"):
                raise ValueError(f"output {oname!r}: unknown compare mode {mode!r}")
            if mode == "indices_of" and (spec.compare.get("input") not in self.inputs
                                         or spec.compare.get("values", oname) not in self.outputs):
                raise ValueError(f"output {oname!r}: indices_of needs 'input' (an input) and, if it names "
                                 "'values', an output")
        for kind, specs in (("input", self.inputs), ("output", self.outputs)):
            for tname, spec in specs.items():
                for ax in spec.shape or []:
                    if ax not in axis_names:
                        raise ValueError(f"{kind} {tname!r} uses axis {ax!r}, which is not in axes")
        for aname, axis in self.axes.items():
            if isinstance(axis, AxisExpr):
                unknown = expr.names_in(axis.expression) - axis_names
                if unknown:
                    raise ValueError(f"axis {aname!r} refers to unknown axes {sorted(unknown)}")
        for name in self.inplace_inputs:
            if name not in self.inputs:
                raise ValueError(f"inplace_inputs names {name!r}, which is not an input")
        if self.outputs and not self.outputs.keys().isdisjoint(self.inputs.keys()):
            shared = sorted(set(self.outputs) & set(self.inputs))
            raise ValueError(f"names used as both input and output: {shared}")
        return self

    # ---- derived facts -------------------------------------------------
    @property
    def var_axes(self) -> list[str]:
        return [n for n, a in self.axes.items() if isinstance(a, AxisVar)]

    def tag_value(self, key: str) -> list[str]:
        prefix = key + ":"
        return [t[len(prefix):] for t in self.tags if t.startswith(prefix)]

    def resolve_axes(self, values: dict[str, int]) -> dict[str, int]:
        """All axis values for one workload: consts, the given vars, then exprs."""
        out: dict[str, int] = {}
        for name, axis in self.axes.items():
            if isinstance(axis, AxisConst):
                out[name] = axis.value
        for name in self.var_axes:
            if name not in values:
                raise ValueError(f"workload gives no value for variable axis {name!r}")
            out[name] = int(values[name])
        pending = {n: a for n, a in self.axes.items() if isinstance(a, AxisExpr)}
        for _ in range(len(pending) + 1):
            for name, axis in list(pending.items()):
                if expr.names_in(axis.expression) <= out.keys():
                    value = expr.evaluate(axis.expression, out)
                    out[name] = int(value)
                    del pending[name]
        if pending:
            raise ValueError(f"cannot resolve expression axes {sorted(pending)} (circular?)")
        for constraint in self.constraints or []:
            try:
                ok = expr.evaluate(constraint, out)
            except expr.ExprError:
                continue  # constraints may mention input data; shape-only ones are checked here
            if not ok:
                raise ValueError(f"constraint {constraint!r} does not hold for axes {values}")
        return out

    def shape_of(self, spec: TensorSpec, axes: dict[str, int]) -> tuple[int, ...] | None:
        if spec.shape is None:
            return None
        return tuple(axes[a] for a in spec.shape)
