"""Calibration: what this machine actually reaches, pattern by pattern.

``calibrate(device)`` times a fixed set of streaming, GEMM and FMA patterns on
random data (``patterns``) and keeps the best rate per roofline unit.

The calibrated DRAM figure is the best over all streaming patterns (one torch
copy is not a bound: a plain Triton kernel beats it on the H200), and it is
reported even when it exceeds the datasheet, with a warning. Clocks are only
read (NVML), never set.
"""

from __future__ import annotations

from datetime import datetime, timezone

from pydantic import BaseModel, Field

from solbench.hardware.patterns import Measurement, Run, fma, gemms, streaming
from solbench.hardware.spec import UNITS, Ceilings, HardwareSpec


class Calibration(BaseModel):
    hardware: str  # id of the detected hardware spec
    device: str  # "cpu", "cuda:0", ...
    device_name: str
    timestamp: str  # ISO 8601, UTC
    quick: bool = False
    timer: str  # "cuda-events" or "perf_counter"
    measurements: list[Measurement] = Field(default_factory=list)
    #: best DRAM rate over the streaming patterns, bytes/s
    dram_bytes_per_s: float
    dram_pattern: str | None = None
    #: best FLOP/s per roofline unit over the patterns that exercise it (only units measured)
    rates: dict[str, float] = Field(default_factory=dict)
    rate_patterns: dict[str, str] = Field(default_factory=dict)
    datasheet_dram_bytes_per_s: float | None = None
    datasheet_rates: dict[str, float] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list)
    torch_version: str | None = None
    triton_version: str | None = None
    clocks_before: dict | None = None
    clocks_after: dict | None = None

    def to_ceilings(self, datasheet: HardwareSpec) -> Ceilings:
        """Ceilings with ``kind="calibrated"``: measured rates where a pattern
        exercised the unit, the datasheet's (clock-scaled) rate elsewhere."""
        base = datasheet.ceilings(scale_to_max_clock=True)
        native: set[str] = {"vector_fp32", "sfu"}
        for unit, dtype in (("tensor_fp4", "fp4"), ("tensor_fp8", "fp8"), ("tensor_int8", "int8"),
                            ("tensor_bf16", "bf16"), ("tensor_tf32", "tf32")):
            if datasheet.tensor_rate(dtype):
                native.add(unit)
        rates = {u: r for u, r in base.rates.items() if u in native}
        rates.update(self.rates)
        # a unit the chip lacks runs on the next wider one, now at its calibrated rate
        # (widest first, so fp4 -> fp8 -> bf16 -> vector chains resolve in one pass)
        for unit, fallback in (("tensor_bf16", "vector_fp32"), ("tensor_tf32", "vector_fp32"),
                               ("tensor_fp8", "tensor_bf16"), ("tensor_int8", "tensor_bf16"),
                               ("tensor_fp4", "tensor_fp8")):
            if unit not in rates and fallback in rates:
                rates[unit] = rates[fallback]
        # a matmul can always run on the FMA units: no tensor unit below the vector rate
        vec = rates.get("vector_fp32", 0.0)
        for unit in ("tensor_fp4", "tensor_fp8", "tensor_int8", "tensor_bf16", "tensor_tf32"):
            if unit in rates and rates[unit] < vec:
                rates[unit] = vec
        return Ceilings(
            hardware=datasheet.id,
            kind="calibrated",
            rates=rates,
            dram_bytes_per_s=self.dram_bytes_per_s,
            launch_floor_s=base.launch_floor_s,
            clock_scale=1.0,
        )


# ---------------------------------------------------------------- entry point

def _versions() -> tuple[str | None, str | None]:
    try:
        import torch

        tv = str(torch.__version__)
    except Exception:  # pragma: no cover
        tv = None
    try:
        import triton

        trv = str(triton.__version__)
    except Exception:
        trv = None
    return tv, trv


def calibrate(device: str = "cpu", quick: bool = False) -> Calibration:
    """Measure this machine's best streaming and compute rates on ``device``.

    ``quick=True`` uses smaller sizes and fewer samples (a few seconds on a
    two-core CPU). GPU clocks are read before and after, never changed.
    """
    import torch

    from solbench.hardware import telemetry
    from solbench.hardware.registry import detect

    spec = detect(device)
    dev = (device or "cpu").strip().lower()
    if dev == "cuda":
        dev = "cuda:0"
    run = Run(dev, quick)
    index = int(dev.split(":")[1]) if run.cuda else None
    if run.cuda:
        torch.cuda.set_device(index)
        device_name = torch.cuda.get_device_name(index)
    else:
        device_name = spec.name
    clocks_before = telemetry.gpu_clock_snapshot(index) if run.cuda else None

    llc = int(spec.llc_bytes.value)
    sm_count = int(spec.sm_count.value) if spec.sm_count else 1
    if run.cuda:
        props = torch.cuda.get_device_properties(index)
        llc = max(llc, int(getattr(props, "L2_cache_size", 0) or 0))
        sm_count = int(getattr(props, "multi_processor_count", sm_count) or sm_count)

    with torch.no_grad():
        streaming(run, llc)
        gemms(run)
        fma(run, sm_count)
    if run.cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    clocks_after = telemetry.gpu_clock_snapshot(index) if run.cuda else None

    datasheet = spec.ceilings(scale_to_max_clock=True)
    streams = [m for m in run.measurements if m.unit == "dram"]
    best = max(streams, key=lambda m: m.rate)
    rates, rate_patterns = _best_rates(run.measurements)
    warnings = _warnings(run.measurements, datasheet, best, rates, rate_patterns, clocks_before, clocks_after)

    tv, trv = _versions()
    return Calibration(
        hardware=spec.id,
        device=dev,
        device_name=device_name,
        timestamp=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        quick=quick,
        timer="cuda-events" if run.cuda else "perf_counter",
        measurements=run.measurements,
        dram_bytes_per_s=best.rate,
        dram_pattern=best.pattern,
        rates=rates,
        rate_patterns=rate_patterns,
        datasheet_dram_bytes_per_s=datasheet.dram_bytes_per_s,
        datasheet_rates=datasheet.rates,
        warnings=warnings,
        skipped=run.skipped,
        torch_version=tv,
        triton_version=trv,
        clocks_before=clocks_before,
        clocks_after=clocks_after,
    )


def _best_rates(measurements: list[Measurement]) -> tuple[dict[str, float], dict[str, str]]:
    """The best FLOP/s per roofline unit over the patterns that exercise it, and the pattern that reached it."""
    rates: dict[str, float] = {}
    rate_patterns: dict[str, str] = {}
    for m in measurements:
        if m.unit in UNITS and m.rate > rates.get(m.unit, 0.0):
            rates[m.unit] = m.rate
            rate_patterns[m.unit] = m.pattern
    return rates, rate_patterns


def _warnings(measurements: list[Measurement], datasheet: Ceilings, best: Measurement, rates: dict[str, float],
              rate_patterns: dict[str, str], clocks_before: dict | None, clocks_after: dict | None) -> list[str]:
    """Rates above the datasheet's, throttled clocks, noisy samples."""
    warnings: list[str] = []
    if best.rate > datasheet.dram_bytes_per_s:
        warnings.append(
            f"calibrated DRAM {best.rate / 1e9:.1f} GB/s ({best.pattern}) exceeds the datasheet "
            f"{datasheet.dram_bytes_per_s / 1e9:.1f} GB/s: caching or a wrong datasheet figure; "
            "SOL times from these ceilings are not lower bounds of the datasheet kind")
    for unit, r in rates.items():
        ds = datasheet.rates.get(unit)
        if ds and r > ds * 1.02:
            warnings.append(f"calibrated {unit} {r / 1e12:.2f} TFLOP/s ({rate_patterns[unit]}) exceeds the "
                            f"datasheet's {ds / 1e12:.2f} TFLOP/s at the max clock")
    for snap, when in ((clocks_before, "before"), (clocks_after, "after")):
        if snap and snap.get("throttle_reasons"):
            active = [r for r in snap["throttle_reasons"] if r != "gpu_idle"]
            if active:
                warnings.append(f"GPU clocks throttled {when} calibration: {', '.join(active)}")
    for m in measurements:
        if m.iqr_over_median is not None and m.iqr_over_median > 0.10:
            warnings.append(f"{m.pattern}: noisy samples (IQR/median {m.iqr_over_median:.0%})")
    return warnings
