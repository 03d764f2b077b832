"""Tests for the hardware registry, calibration and telemetry (solbench.hardware)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from solbench.errors import UserError
from solbench.hardware import registry, telemetry
from solbench.hardware.calibrate import Calibration, calibrate
from solbench.hardware.registry import DATA_DIR, detect, get_hardware, list_hardware, match_device_name
from solbench.hardware.spec import UNITS, Figure, HardwareSpec

try:
    import torch

    HAS_CUDA = torch.cuda.is_available()
except Exception:  # pragma: no cover
    HAS_CUDA = False


#: units every ceilings() result must carry (tensor_fp4: see test_every_unit_has_a_datasheet_rate)
CORE_UNITS = tuple(u for u in UNITS if u != "tensor_fp4")

EXPECTED_IDS = {"h100-sxm", "h200", "b200", "a100-80gb", "l40s", "rtx-4090", "mi300x", "cpu"}


def _figures(spec: HardwareSpec):
    for name, value in spec:
        if isinstance(value, Figure):
            yield name, value


# ---------------------------------------------------------------- data files

def test_every_data_file_loads():
    files = sorted(DATA_DIR.glob("*.json"))
    assert {f.stem for f in files} == EXPECTED_IDS
    for f in files:
        spec = HardwareSpec.model_validate(json.loads(f.read_text()))
        assert spec.id == f.stem, f"{f.name}: id {spec.id!r} differs from the file name"


def test_ids_unique_and_sorted():
    ids = [s.id for s in list_hardware()]
    assert len(ids) == len(set(ids))
    assert ids == sorted(ids)
    assert set(ids) == EXPECTED_IDS


@pytest.mark.parametrize("spec", list_hardware(), ids=lambda s: s.id)
def test_every_figure_has_a_source_and_is_positive(spec):
    assert spec.vendor in ("nvidia", "amd", "cpu")
    for name, fig in _figures(spec):
        assert fig.source.strip(), f"{spec.id}.{name} has no source"
        assert fig.value > 0, f"{spec.id}.{name} is not positive"
    for t in spec.tensor:
        assert t.source.strip(), f"{spec.id} tensor {t.dtype}/{t.accumulator} has no source"
        assert t.tflops > 0
        assert t.dtype in ("fp4", "fp8", "int8", "bf16", "fp16", "tf32", "fp64")
        assert t.accumulator in ("fp32", "fp16", "int32", "fp64")
    c = spec.ceilings()
    assert c.dram_bytes_per_s > 0
    for unit in CORE_UNITS:
        assert c.rates.get(unit, 0) > 0, f"{spec.id}: no rate for {unit}"


@pytest.mark.parametrize("hw", ["a100-80gb", "cpu"])
def test_every_unit_has_a_datasheet_rate(hw):
    c = get_hardware(hw).ceilings()
    assert all(c.rates.get(u, 0) > 0 for u in UNITS)


@pytest.mark.parametrize("spec", [s for s in list_hardware() if s.vendor != "cpu"], ids=lambda s: s.id)
def test_gpu_entries_are_complete(spec):
    for field in ("sm_count", "max_clock_mhz", "datasheet_clock_mhz", "dram_gb"):
        assert getattr(spec, field) is not None, f"{spec.id}.{field} missing"
    assert spec.match, f"{spec.id} matches no device name"
    assert spec.max_clock_mhz.value >= spec.datasheet_clock_mhz.value
    # only measured floors belong here
    assert spec.launch_floor_us is None or spec.launch_floor_us.source.startswith("measured")
    assert spec.tensor_rate("bf16") and spec.tensor_rate("tf32")
    # the bf16 rate must follow from the datasheet clock within a few percent of a power-of-two per-SM rate
    per_sm = spec.tensor_rate("bf16") / (spec.sm_count.value * spec.datasheet_clock_mhz.value * 1e6)
    assert any(abs(per_sm / p - 1) < 0.03 for p in (512, 1024, 2048, 4096, 8192)), (spec.id, per_sm)


def test_h100_and_h200_share_compute_but_not_bandwidth():
    h100, h200 = get_hardware("h100-sxm"), get_hardware("h200")
    key = lambda s: sorted((t.dtype, t.accumulator, t.tflops) for t in s.tensor)  # noqa: E731
    assert key(h100) == key(h200)
    assert h100.vector_fp32_tflops.value == h200.vector_fp32_tflops.value
    assert h100.ceilings().rates == h200.ceilings().rates
    assert h200.dram_bandwidth_gbs.value > h100.dram_bandwidth_gbs.value
    assert h200.dram_bandwidth_gbs.value == 4800 and h100.dram_bandwidth_gbs.value == 3350
    assert h200.llc_bytes.value == 62914560


@pytest.mark.parametrize("hw", ["h100-sxm", "h200", "b200", "rtx-4090"])
def test_ceilings_are_scaled_to_the_max_clock(hw):
    spec = get_hardware(hw)
    scaled, raw = spec.ceilings(), spec.ceilings(scale_to_max_clock=False)
    assert scaled.clock_scale > 1.0
    assert scaled.rates["tensor_bf16"] >= spec.tensor_rate("bf16")
    assert scaled.rates["tensor_bf16"] == pytest.approx(raw.rates["tensor_bf16"] * scaled.clock_scale)
    assert scaled.dram_bytes_per_s == raw.dram_bytes_per_s  # memory does not scale with the SM clock


def test_known_datasheet_figures():
    h100 = get_hardware("h100-sxm")
    assert h100.tensor_rate("bf16") == pytest.approx(989.4e12)
    assert h100.tensor_rate("fp8") == pytest.approx(1978.9e12)
    assert h100.datasheet_clock_mhz.value == 1830 and h100.max_clock_mhz.value == 1980
    # FP32 67 TFLOP/s is reached at the max clock
    assert h100.ceilings().rates["vector_fp32"] == pytest.approx(66.9e12, rel=0.01)
    b200 = get_hardware("b200")
    assert b200.tensor_rate("bf16") == pytest.approx(2.25e15)
    assert b200.tensor_rate("fp4") == pytest.approx(9e15)
    assert b200.dram_bandwidth_gbs.value == 8000
    mi = get_hardware("mi300x")
    assert mi.dram_bandwidth_gbs.value == 5300 and mi.llc_bytes.value == 256 * 2**20
    assert mi.tensor_rate("fp8") == pytest.approx(2614.9e12)
    # GeForce: fp32 accumulate is the default, fp16 accumulate is twice as fast
    g = get_hardware("rtx-4090")
    assert g.tensor_rate("fp16", "fp16") == pytest.approx(2 * g.tensor_rate("fp16", "fp32"), rel=0.01)
    assert g.tensor_rate("bf16") == pytest.approx(165.2e12)
    # A100 has no fp8: the roofline falls back to bf16
    a100 = get_hardware("a100-80gb")
    assert a100.tensor_rate("fp8") is None
    assert a100.ceilings().rates["tensor_fp8"] == a100.ceilings().rates["tensor_bf16"]


# ---------------------------------------------------------------- lookup

def test_get_hardware_case_insensitive():
    assert get_hardware("H200").id == "h200"
    assert get_hardware("  Rtx-4090 ").id == "rtx-4090"


def test_get_hardware_by_device_name():
    assert get_hardware("NVIDIA H100 80GB HBM3").id == "h100-sxm"


def test_get_hardware_unknown_raises_user_error():
    with pytest.raises(UserError) as e:
        get_hardware("tpu-v9")
    msg = str(e.value)
    assert "\n" not in msg and "tpu-v9" in msg
    for hw in EXPECTED_IDS:
        assert hw in msg


def test_get_hardware_from_path(tmp_path: Path):
    data = json.loads((DATA_DIR / "h200.json").read_text())
    data["id"] = "my-h200"
    p = tmp_path / "mine.json"
    p.write_text(json.dumps(data))
    assert get_hardware(str(p)).id == "my-h200"
    with pytest.raises(UserError):
        get_hardware(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(UserError, match="not valid JSON"):
        get_hardware(str(bad))
    del data["dram_bandwidth_gbs"]
    p.write_text(json.dumps(data))
    with pytest.raises(UserError, match="invalid"):
        get_hardware(str(p))


@pytest.mark.parametrize("name,expected", [
    ("NVIDIA H100 80GB HBM3", "h100-sxm"),
    ("NVIDIA H100 PCIe", None),
    ("NVIDIA H100 NVL", None),
    ("NVIDIA H200", "h200"),
    ("NVIDIA H200 NVL", None),
    ("NVIDIA B200", "b200"),
    ("NVIDIA GB200", None),
    ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
    ("NVIDIA A100-SXM4-40GB", None),
    ("NVIDIA L40S", "l40s"),
    ("NVIDIA L40", None),
    ("NVIDIA GeForce RTX 4090", "rtx-4090"),
    ("NVIDIA GeForce RTX 4090 Laptop GPU", None),
    ("AMD Instinct MI300X", "mi300x"),
    ("AMD Instinct MI300A", None),
])
def test_device_name_matching(name, expected):
    m = match_device_name(name)
    assert (m.id if m else None) == expected


# ---------------------------------------------------------------- detection

def test_detect_cpu():
    spec = detect("cpu")
    assert spec.id == "cpu" and spec.vendor == "cpu"
    generic = get_hardware("cpu")
    assert spec.sm_count.value >= 1
    assert 0 < spec.vector_fp32_tflops.value <= generic.vector_fp32_tflops.value
    assert 0 < spec.dram_bandwidth_gbs.value <= 400
    assert spec.llc_bytes.value > 0
    c = spec.ceilings()
    assert all(c.rates[u] > 0 for u in CORE_UNITS)
    assert c.rates["tensor_bf16"] >= c.rates["vector_fp32"]


def test_detect_bad_device():
    with pytest.raises(UserError):
        detect("tpu:0")


@pytest.mark.skipif(HAS_CUDA, reason="checks the no-GPU path")
def test_detect_cuda_without_gpu_is_a_user_error():
    with pytest.raises(UserError):
        detect("cuda")


def test_refine_cpu_flags(monkeypatch):
    monkeypatch.setattr(registry, "_cpuinfo", lambda: ({"avx2", "fma"}, [3000.0]))
    monkeypatch.setattr(registry, "_read", lambda path: None)
    monkeypatch.setattr(registry, "_llc_bytes", lambda: None)
    monkeypatch.setattr(registry.os, "cpu_count", lambda: 4)
    spec = registry.refine_cpu()
    assert spec.vector_fp32_tflops.value == pytest.approx(4 * 32 * 3e9 / 1e12)
    assert spec.dram_bandwidth_gbs.value == 200
    assert spec.max_clock_mhz.value == 3000
    assert spec.tensor == []  # no bf16/int8 flags: the roofline falls back to the vector rate
    monkeypatch.setattr(registry, "_cpuinfo", lambda: ({"avx512f", "amx_bf16"}, []))
    monkeypatch.setattr(registry.os, "cpu_count", lambda: 64)
    spec = registry.refine_cpu()
    assert spec.max_clock_mhz.value == 4000  # the default when no clock is readable
    assert spec.dram_bandwidth_gbs.value == 400  # the cap
    assert spec.tensor_rate("bf16") == pytest.approx(64 * 1024 * 4e9)


# ---------------------------------------------------------------- calibration

@pytest.fixture(scope="module")
def quick_cal():
    """One quick CPU calibration for the module's tests, against a datasheet whose DRAM figure is tiny: what it
    measures does not depend on the datasheet, only its warnings do."""
    small = detect("cpu").model_copy(update={"dram_bandwidth_gbs": Figure(value=1e-6, source="test")})
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(registry, "detect", lambda device: small)
        return calibrate("cpu", quick=True)


def test_calibrate_cpu_quick(quick_cal):
    cal = quick_cal
    assert isinstance(cal, Calibration)
    assert cal.hardware == "cpu" and cal.timer == "perf_counter"
    patterns = {m.pattern for m in cal.measurements}
    assert {"read_sum", "copy", "triad_2r1w", "gemm_fp32", "gemm_bf16"} <= patterns
    assert all(m.rate > 0 and m.seconds > 0 for m in cal.measurements)
    streams = [m.rate for m in cal.measurements if m.unit == "dram"]
    assert cal.dram_bytes_per_s == max(streams) > 0
    assert cal.rates["vector_fp32"] > 0 and cal.rates["tensor_bf16"] > 0
    assert cal.torch_version
    ceil = cal.to_ceilings(detect("cpu"))
    assert ceil.kind == "calibrated" and ceil.hardware == "cpu"
    assert ceil.dram_bytes_per_s == cal.dram_bytes_per_s
    assert all(ceil.rates[u] > 0 for u in UNITS)
    assert ceil.rates["tensor_bf16"] >= ceil.rates["vector_fp32"]
    Calibration.model_validate_json(cal.model_dump_json())  # round-trips


def test_calibration_above_datasheet_is_flagged(quick_cal):
    cal = quick_cal
    assert any("exceeds the datasheet" in w for w in cal.warnings)
    # the figure itself is reported, not clipped
    assert cal.dram_bytes_per_s > 1e3


# ---------------------------------------------------------------- telemetry

@pytest.mark.skipif(HAS_CUDA, reason="checks the no-GPU path")
def test_telemetry_without_gpu_returns_none():
    assert telemetry.gpu_clock_snapshot() is None
    assert telemetry.gpu_static_info() is None


def test_reason_names():
    assert telemetry.reason_names(0) == []
    assert telemetry.reason_names(0x1 | 0x4) == ["gpu_idle", "sw_power_cap"]
    assert telemetry.reason_names(0x10000)[-1].startswith("other(")


def test_a_clock_reading_asks_the_maximum_clocks_once_and_the_current_ones_each_time(monkeypatch):
    asked = []

    class FakeNvml:
        NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 0, 1, 0

        def nvmlDeviceGetClockInfo(self, h, clock):
            asked.append(("now", clock))
            return 1500 + clock

        def nvmlDeviceGetMaxClockInfo(self, h, clock):
            asked.append(("max", clock))
            return 1980 + clock

        def nvmlDeviceGetCurrentClocksEventReasons(self, h):
            return 0x4

        nvmlDeviceGetPowerUsage = nvmlDeviceGetEnforcedPowerLimit = nvmlDeviceGetTemperature = \
            lambda self, *a: 1000

    monkeypatch.setattr(telemetry, "_handle", lambda index: (FakeNvml(), object()))
    monkeypatch.setattr(telemetry, "_MAX_CLOCKS", {})
    snaps = [telemetry.gpu_clock_snapshot(7) for _ in range(3)]
    assert all(s["sm_clock_mhz"] == 1500 and s["max_sm_clock_mhz"] == 1980 and s["max_mem_clock_mhz"] == 1981
               and s["throttle_reasons"] == ["sw_power_cap"] for s in snaps)
    assert asked.count(("max", 0)) == asked.count(("max", 1)) == 1 and asked.count(("now", 0)) == 3


# ---------------------------------------------------------------- GPU

@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_detect_cuda_never_crashes():
    spec = detect("cuda")
    assert spec.dram_bandwidth_gbs.value > 0
    assert spec.ceilings().rates["tensor_bf16"] > 0
    name = torch.cuda.get_device_name(0)
    assert match_device_name(name) is None or spec.id == match_device_name(name).id


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_unknown_gpu_spec_from_properties():
    spec = registry._spec_from_properties(0, "Some Future GPU")
    assert spec.id.startswith("unknown-")
    assert spec.notes and "No data file" in spec.notes
    assert spec.ceilings().rates["tensor_bf16"] > 0


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_telemetry_with_gpu():
    snap = telemetry.gpu_clock_snapshot(0)
    if snap is None:
        pytest.skip("NVML unavailable (not an NVIDIA driver)")
    assert snap["max_sm_clock_mhz"] and snap["max_sm_clock_mhz"] > 0
    assert isinstance(snap["throttle_reasons"], list)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_calibrate_cuda_quick():
    cal = calibrate("cuda", quick=True)
    assert cal.timer == "cuda-events"
    assert cal.dram_bytes_per_s > 0
    assert cal.rates.get("tensor_bf16", 0) > 0 and cal.rates.get("vector_fp32", 0) > 0
    spec = detect("cuda")
    ceil = cal.to_ceilings(spec)
    assert ceil.kind == "calibrated"
    if cal.dram_bytes_per_s > spec.dram_bandwidth_gbs.value * 1e9:
        assert cal.warnings


def test_nvml_handle_follows_the_cuda_device_by_uuid(monkeypatch):
    """CUDA's device 1 (after CUDA_VISIBLE_DEVICES or its own ordering) is found in NVML by its UUID, not by
    NVML's index 1; without a UUID the index is used."""
    import sys
    from types import SimpleNamespace

    asked = []
    nv = SimpleNamespace(nvmlDeviceGetHandleByUUID=lambda u: asked.append(("uuid", u)) or "by-uuid",
                         nvmlDeviceGetHandleByIndex=lambda i: asked.append(("index", i)) or "by-index")
    monkeypatch.setattr(telemetry, "_nvml", lambda: nv)
    uuids = {1: "58d1b5c1-aaaa-bbbb-cccc-0123456789ab"}
    fake = SimpleNamespace(cuda=SimpleNamespace(
        is_initialized=lambda: True,
        get_device_properties=lambda i: SimpleNamespace(uuid=uuids.get(i))))
    monkeypatch.setitem(sys.modules, "torch", fake)
    assert telemetry._handle(1) == (nv, "by-uuid")
    assert asked[-1] == ("uuid", "GPU-58d1b5c1-aaaa-bbbb-cccc-0123456789ab")
    assert telemetry._handle(0) == (nv, "by-index") and asked[-1] == ("index", 0)
