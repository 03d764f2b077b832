"""Datasheet ceilings of one chip, and the per-unit rates the roofline uses.

One JSON file per chip under ``hardware/data/``. Compute rates are quoted at
``datasheet_clock_mhz``; ``ceilings(scale_to_max_clock=True)`` scales them to
``max_clock_mhz`` so that a SOL time built from them is a true lower bound.
Memory bandwidth does not scale with the SM clock.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

#: roofline resources, in the order they are reported
UNITS = ("tensor_fp4", "tensor_fp8", "tensor_int8", "tensor_bf16", "tensor_tf32", "vector_fp32", "sfu")


class TensorRate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    dtype: str  # fp4, fp8, int8, bf16, fp16, tf32, fp64
    accumulator: str  # fp32, fp16, int32, fp64
    tflops: float  # dense (no structured sparsity), TFLOP/s or TOP/s at datasheet_clock_mhz
    source: str


class Figure(BaseModel):
    model_config = ConfigDict(extra="forbid")
    value: float
    source: str


class HardwareSpec(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str  # short name used on the command line: h100-sxm, h200, b200, a100-80gb, l40s, rtx-4090, mi300x, cpu
    name: str
    vendor: str  # nvidia, amd, cpu
    #: substrings of torch.cuda.get_device_name() that identify this chip (checked in file order)
    match: list[str] = Field(default_factory=list)
    arch: str | None = None
    sm_count: Figure | None = None
    base_clock_mhz: Figure | None = None
    max_clock_mhz: Figure | None = None
    #: the clock at which the datasheet quotes tensor/vector rates
    datasheet_clock_mhz: Figure | None = None
    dram_bandwidth_gbs: Figure  # GB/s, 1e9 bytes
    dram_gb: Figure | None = None
    llc_bytes: Figure  # last-level cache (L2 on NVIDIA, Infinity Cache on MI300X)
    tensor: list[TensorRate] = Field(default_factory=list)
    vector_fp32_tflops: Figure
    sfu_tops: Figure  # transcendental (MUFU) ops per second, 1e12
    #: shortest event-timed duration any kernel launch takes on this chip, seconds (a latency floor)
    launch_floor_us: Figure | None = None
    notes: str | None = None

    def tensor_rate(self, dtype: str, accumulator: str = "fp32") -> float | None:
        for r in self.tensor:
            if r.dtype == dtype and r.accumulator == accumulator:
                return r.tflops * 1e12
        for r in self.tensor:
            if r.dtype == dtype:
                return r.tflops * 1e12
        return None

    def clock_scale(self) -> float:
        if self.max_clock_mhz and self.datasheet_clock_mhz and self.datasheet_clock_mhz.value > 0:
            return max(1.0, self.max_clock_mhz.value / self.datasheet_clock_mhz.value)
        return 1.0

    def ceilings(self, scale_to_max_clock: bool = True) -> "Ceilings":
        s = self.clock_scale() if scale_to_max_clock else 1.0
        rates: dict[str, float] = {}
        for unit, dtype in (("tensor_fp4", "fp4"), ("tensor_fp8", "fp8"), ("tensor_int8", "int8"),
                            ("tensor_bf16", "bf16"), ("tensor_tf32", "tf32")):
            r = self.tensor_rate(dtype)
            if r:
                rates[unit] = r * s
        rates["vector_fp32"] = self.vector_fp32_tflops.value * 1e12 * s
        rates["sfu"] = self.sfu_tops.value * 1e12 * s
        # a unit a chip lacks falls back to the next wider one (fp8 on A100 runs as bf16)
        for unit, fallback in (("tensor_bf16", "vector_fp32"), ("tensor_tf32", "vector_fp32"),
                               ("tensor_fp8", "tensor_bf16"), ("tensor_int8", "tensor_bf16"),
                               ("tensor_fp4", "tensor_fp8")):  # widest first, so each fallback exists
            if unit not in rates and fallback in rates:
                rates[unit] = rates[fallback]
        return Ceilings(
            hardware=self.id,
            kind="datasheet",
            rates=rates,
            dram_bytes_per_s=self.dram_bandwidth_gbs.value * 1e9,
            launch_floor_s=(self.launch_floor_us.value * 1e-6) if self.launch_floor_us else 0.0,
            clock_scale=s,
        )


class Ceilings(BaseModel):
    """What the roofline divides by: FLOP/s per unit, DRAM bytes/s, a latency floor."""

    hardware: str
    kind: str  # "datasheet" or "calibrated"
    rates: dict[str, float]
    dram_bytes_per_s: float
    launch_floor_s: float = 0.0
    clock_scale: float = 1.0
