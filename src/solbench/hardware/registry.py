"""The hardware registry: the bundled chip files, lookup by name, and detection.

``list_hardware()`` and ``get_hardware(name)`` read the JSON files under
``hardware/data/``. ``detect(device)`` names the hardware a run happens on:
the local CPU (the generic ``cpu`` entry refined for this machine), a GPU
matched by name against each file's ``match`` substrings, or, for a GPU no file
describes, a spec estimated from the device's own properties.
"""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from pathlib import Path

from pydantic import ValidationError

from solbench.errors import UserError
from solbench.hardware.spec import Figure, HardwareSpec, TensorRate

DATA_DIR = Path(__file__).parent / "data"


# ---------------------------------------------------------------- loading

def load_spec_file(path: str | os.PathLike) -> HardwareSpec:
    """Read one hardware JSON file; any problem becomes a one-line UserError."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise UserError(f"cannot read hardware file {p}: {e.strerror or e}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(f"hardware file {p} is not valid JSON: {e.msg} at line {e.lineno}") from None
    try:
        return HardwareSpec.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first.get("loc", ())) or "<root>"
        raise UserError(f"hardware file {p} is invalid: {where}: {first.get('msg')}"
                        f" ({e.error_count()} error(s))") from None


@lru_cache(maxsize=1)
def _bundled() -> tuple[HardwareSpec, ...]:
    specs = [load_spec_file(f) for f in sorted(DATA_DIR.glob("*.json"))]
    seen: dict[str, str] = {}
    for s in specs:
        key = s.id.lower()
        if key in seen:
            raise RuntimeError(f"duplicate hardware id {s.id!r} in {DATA_DIR}")
        seen[key] = s.id
    return tuple(sorted(specs, key=lambda s: s.id))


def list_hardware() -> list[HardwareSpec]:
    """Every bundled chip, sorted by id (copies: callers may modify them)."""
    return [s.model_copy(deep=True) for s in _bundled()]


def known_ids() -> list[str]:
    return [s.id for s in _bundled()]


def _match_exclude(spec: HardwareSpec) -> list[str]:
    extra = spec.model_extra or {}
    return [str(x) for x in extra.get("match_exclude", []) or []]


def match_device_name(device_name: str) -> HardwareSpec | None:
    """The bundled spec whose ``match`` substrings identify ``device_name``.

    Matching is case-insensitive. A spec is skipped when the name also contains
    one of its ``match_exclude`` substrings (e.g. "GB200" for the B200 file).
    When several specs match, the longest matching substring wins (the most
    specific), then file order.
    """
    name = device_name.lower()
    best: tuple[int, HardwareSpec] | None = None
    for spec in _bundled():
        if any(x.lower() in name for x in _match_exclude(spec)):
            continue
        for m in spec.match:
            if m and m.lower() in name and (best is None or len(m) > best[0]):
                best = (len(m), spec)
    return best[1].model_copy(deep=True) if best else None


def _looks_like_path(name: str) -> bool:
    return name.endswith(".json") or os.sep in name or "/" in name or Path(name).is_file()


def get_hardware(name: str) -> HardwareSpec:
    """A chip by id (case-insensitive), by a device name its ``match`` list
    recognises, or from a path to a JSON file of the same format."""
    if not isinstance(name, str) or not name.strip():
        raise UserError(f"no hardware name given; known: {', '.join(known_ids())}")
    name = name.strip()
    for s in _bundled():
        if s.id.lower() == name.lower():
            return s.model_copy(deep=True)
    if _looks_like_path(name):
        return load_spec_file(name)
    by_name = match_device_name(name)
    if by_name is not None:
        return by_name
    raise UserError(f"unknown hardware {name!r}; known: {', '.join(known_ids())} (or a path to a .json file)")


# ---------------------------------------------------------------- the local CPU

def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _cpuinfo() -> tuple[set[str], list[float]]:
    """(flags, every 'cpu MHz' value) from /proc/cpuinfo; empty where unreadable."""
    text = _read("/proc/cpuinfo") or ""
    flags: set[str] = set()
    mhz: list[float] = []
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("flags", "features") and not flags:
            flags = set(value.split())
        elif key == "cpu mhz":
            try:
                mhz.append(float(value))
            except ValueError:
                pass
    return flags, mhz


def _size_bytes(text: str) -> int | None:
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)B?\s*", text or "", re.IGNORECASE)
    if not m:
        return None
    return int(m.group(1)) * {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[m.group(2).upper()]


def _llc_bytes(root: str = "/sys/devices/system/cpu") -> int | None:
    """Total last-level cache: the highest-level data/unified cache, summed over its distinct instances."""
    try:
        cpus = [d for d in os.listdir(root) if re.fullmatch(r"cpu\d+", d)]
    except OSError:
        return None
    found: dict[str, tuple[int, int]] = {}  # shared_cpu_list -> (level, size)
    top = 0
    for cpu in cpus:
        base = os.path.join(root, cpu, "cache")
        try:
            idx = [d for d in os.listdir(base) if d.startswith("index")]
        except OSError:
            continue
        for d in idx:
            level = (_read(os.path.join(base, d, "level")) or "").strip()
            kind = (_read(os.path.join(base, d, "type")) or "").strip()
            size = _size_bytes(_read(os.path.join(base, d, "size")) or "")
            if not level.isdigit() or kind == "Instruction" or not size:
                continue
            shared = (_read(os.path.join(base, d, "shared_cpu_list")) or cpu).strip()
            lvl = int(level)
            top = max(top, lvl)
            found[f"{lvl}:{shared}"] = (lvl, size)
    total = sum(size for lvl, size in found.values() if lvl == top)
    return total or None


def _max_clock_mhz(cpuinfo_mhz: list[float]) -> tuple[float, str]:
    khz = _read("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    if khz and khz.strip().isdigit() and int(khz) > 0:
        return int(khz) / 1000.0, "measured: /sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"
    if cpuinfo_mhz and max(cpuinfo_mhz) > 0:
        return max(cpuinfo_mhz), "measured: highest 'cpu MHz' in /proc/cpuinfo (may be the nominal clock in a VM)"
    return 4000.0, "assumed: 4000 MHz (no cpufreq or /proc/cpuinfo clock readable)"


def _fp32_flop_per_clk(flags: set[str]) -> tuple[int, str]:
    if "avx512f" in flags:
        return 64, "avx512f: 2 FMA units x 16 fp32 lanes x 2 FLOP"
    if "avx2" in flags and "fma" in flags:
        return 32, "avx2+fma: 2 FMA units x 8 fp32 lanes x 2 FLOP"
    if "asimd" in flags or "sve" in flags:
        return 32, "aarch64 asimd/sve: assumed 4 units x 4 fp32 lanes x 2 FLOP"
    return 16, "no AVX2/AVX-512 flag: assumed 2 units x 4 fp32 lanes x 2 FLOP"


def refine_cpu(generic: HardwareSpec | None = None) -> HardwareSpec:
    """The generic ``cpu`` entry with its figures recomputed for this machine.

    See the ``notes`` of cpu.json for the method. Every figure stays an upper
    bound of what the machine can do, so a SOL time from it is a lower bound.
    """
    spec = (generic or get_hardware("cpu")).model_copy(deep=True)
    flags, cpuinfo_mhz = _cpuinfo()
    cores = os.cpu_count() or 1
    mhz, mhz_src = _max_clock_mhz(cpuinfo_mhz)
    hz = mhz * 1e6
    per_clk, per_clk_src = _fp32_flop_per_clk(flags)
    vec = cores * per_clk * hz
    here = "this machine"

    spec.id = "cpu"
    spec.name = f"local CPU ({cores} logical CPUs, {mhz:.0f} MHz)"
    spec.sm_count = Figure(value=cores, source=f"measured: os.cpu_count() on {here} (logical CPUs)")
    spec.max_clock_mhz = Figure(value=mhz, source=mhz_src)
    spec.datasheet_clock_mhz = Figure(value=mhz, source="rates below are computed at max_clock_mhz")
    spec.vector_fp32_tflops = Figure(
        value=vec / 1e12, source=f"derived: {cores} CPUs x {per_clk} fp32 FLOP/clk ({per_clk_src}) x {mhz:.0f} MHz")
    spec.sfu_tops = Figure(value=vec / 2 / 1e12,
                           source="derived: half the vector FLOP rate (one transcendental per lane per unit per clock; generous)")
    dram = min(50.0 * cores, 400.0)
    spec.dram_bandwidth_gbs = Figure(
        value=dram, source=f"assumed upper bound: 50 GB/s per CPU x {cores}, capped at 400 GB/s")
    llc = _llc_bytes()
    if llc:
        spec.llc_bytes = Figure(value=llc, source="measured: highest cache level in /sys/devices/system/cpu/cpu*/cache, summed over distinct instances")
    total = (os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")) if hasattr(os, "sysconf") else 0
    if total and total > 0:
        spec.dram_gb = Figure(value=round(total / 1e9, 1), source="measured: sysconf physical pages x page size")

    tensor: list[TensorRate] = []

    def add(dtype: str, acc: str, per: int, why: str) -> None:
        tensor.append(TensorRate(dtype=dtype, accumulator=acc, tflops=cores * per * hz / 1e12,
                                 source=f"derived: {cores} CPUs x {per} FLOP/clk ({why}) x {mhz:.0f} MHz"))

    if "amx_bf16" in flags:
        add("bf16", "fp32", 1024, "amx_bf16 tile unit")
    elif "avx512_bf16" in flags:
        add("bf16", "fp32", 128, "avx512_bf16 vdpbf16ps on 2 units")
    if "amx_fp16" in flags:
        add("fp16", "fp32", 1024, "amx_fp16 tile unit")
    elif "avx512_fp16" in flags:
        add("fp16", "fp32", 128, "avx512_fp16 on 2 units")
    if "amx_int8" in flags:
        add("int8", "int32", 2048, "amx_int8 tile unit")
    elif "avx512_vnni" in flags or "avx512vnni" in flags:
        add("int8", "int32", 256, "avx512_vnni vpdpbusd on 2 units")
    elif "avx_vnni" in flags:
        add("int8", "int32", 128, "avx_vnni on 2 units")
    # keep every unit at least at the vector rate (a matmul can always run on the FMA units)
    for t in tensor:
        t.tflops = max(t.tflops, vec / 1e12)
    spec.tensor = tensor
    spec.notes = (spec.notes or "") + (
        f" Refined for this machine: {cores} logical CPUs, {mhz:.0f} MHz, flags considered: "
        + ", ".join(sorted(f for f in flags if f.startswith(("avx", "amx", "fma", "asimd", "sve")))) + "."
    )
    return spec


# ---------------------------------------------------------------- GPUs

#: dense bf16/fp16 tensor FLOP per clock per SM by compute-capability major
#: (the fastest accumulate mode), used only for GPUs no data file describes
_TENSOR_PER_SM = {7: 1024, 8: 2048, 9: 4096, 10: 8192, 11: 8192, 12: 2048}
_FP32_PER_SM = {7: 128, 8: 256, 9: 256, 10: 256, 11: 256, 12: 256}


def _spec_from_properties(index: int, name: str) -> HardwareSpec:
    """Generous ceilings for a GPU with no data file, from its own properties and NVML."""
    import torch

    from solbench.hardware import telemetry

    props = torch.cuda.get_device_properties(index)
    sms = int(getattr(props, "multi_processor_count", 0) or 0) or 1
    major = int(getattr(props, "major", 0) or 0)
    hip = getattr(torch.version, "hip", None) is not None
    nvml = telemetry.gpu_static_info(index) or {}
    src_props = f"measured: torch.cuda.get_device_properties({index})"

    clock = nvml.get("max_sm_clock_mhz")
    clock_src = "measured: NVML max SM clock"
    if not clock:
        rate_khz = getattr(props, "clock_rate", None)
        if rate_khz:
            clock, clock_src = rate_khz / 1000.0, f"{src_props}.clock_rate"
        else:
            clock, clock_src = 3000.0, "assumed: 3000 MHz (no clock readable; generous)"
    hz = float(clock) * 1e6

    if hip:
        tensor_per, fp32_per, why = 4096, 256, "assumed AMD CDNA-class: 4096 bf16 FLOP/clk/CU, 256 fp32 FLOP/clk/CU (generous)"
    else:
        tensor_per = _TENSOR_PER_SM.get(major, 16384)
        fp32_per = _FP32_PER_SM.get(major, 256)
        why = f"assumed for compute capability {major}.x: {tensor_per} dense bf16 FLOP/clk/SM, {fp32_per} fp32 FLOP/clk/SM"
    bf16 = sms * tensor_per * hz / 1e12

    def tr(dtype: str, acc: str, factor: float) -> TensorRate:
        return TensorRate(dtype=dtype, accumulator=acc, tflops=bf16 * factor,
                          source=f"derived: {sms} SMs x {tensor_per * factor:g} FLOP/clk x {clock:.0f} MHz ({why})")

    tensor = [tr("tf32", "fp32", 0.5), tr("bf16", "fp32", 1.0), tr("fp16", "fp32", 1.0),
              tr("int8", "int32", 2.0)]
    if hip or (major, int(getattr(props, "minor", 0) or 0)) >= (8, 9) or major >= 9:
        tensor.append(tr("fp8", "fp32", 2.0))
    if not hip and major >= 10:
        tensor.append(tr("fp4", "fp32", 4.0))

    peak = nvml.get("peak_dram_gbs")
    if peak:
        dram = Figure(value=float(peak), source="measured: NVML memory bus width / 8 x max memory clock x 2 (double data rate)")
    else:
        dram = Figure(value=10000.0, source="assumed: 10 TB/s (memory clock and bus width not readable; generous)")
    l2 = int(getattr(props, "L2_cache_size", 0) or 0)
    llc = Figure(value=l2, source=f"{src_props}.L2_cache_size") if l2 > 0 else \
        Figure(value=268435456, source="assumed: 256 MiB (L2 size not readable)")
    total = int(getattr(props, "total_memory", 0) or 0)
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "gpu"
    return HardwareSpec(
        id=f"unknown-{slug}",
        name=name,
        vendor="amd" if hip else "nvidia",
        match=[name],
        arch=(getattr(props, "gcnArchName", None) if hip else f"sm_{major}{getattr(props, 'minor', 0)}"),
        sm_count=Figure(value=sms, source=f"{src_props}.multi_processor_count"),
        max_clock_mhz=Figure(value=float(clock), source=clock_src),
        datasheet_clock_mhz=Figure(value=float(clock), source="rates below are computed at max_clock_mhz"),
        dram_bandwidth_gbs=dram,
        dram_gb=Figure(value=round(total / 1e9, 1), source=f"{src_props}.total_memory") if total else None,
        llc_bytes=llc,
        tensor=tensor,
        vector_fp32_tflops=Figure(value=sms * fp32_per * hz / 1e12,
                                  source=f"derived: {sms} SMs x {fp32_per} FLOP/clk x {clock:.0f} MHz ({why})"),
        sfu_tops=Figure(value=sms * 16 * hz / 1e12, source=f"derived: {sms} SMs x 16 MUFU ops/clk x {clock:.0f} MHz (assumed)"),
        notes=(f"No data file describes {name!r}: these ceilings are estimated from the device's properties with "
               "generous per-SM rates, so SOL times from them are loose lower bounds. Add a JSON file under "
               "hardware/data/ (or pass one with a path) for datasheet figures."),
    )


def _cuda_index(device: str) -> int:
    m = re.fullmatch(r"cuda(?::(\d+))?", device.strip().lower())
    if not m:
        raise UserError(f"unknown device {device!r}; use 'cpu', 'cuda' or 'cuda:N'")
    return int(m.group(1) or 0)


def detect(device: str = "cpu") -> HardwareSpec:
    """The hardware spec for ``device``: "cpu", "cuda" or "cuda:N"."""
    dev = (device or "cpu").strip().lower()
    if dev == "cpu":
        return refine_cpu(get_hardware("cpu"))
    index = _cuda_index(dev)
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        raise UserError("torch is not installed; cannot detect a GPU") from None
    if not torch.cuda.is_available():
        raise UserError(f"device {device!r} asked for, but torch sees no GPU (torch.cuda.is_available() is False)")
    count = torch.cuda.device_count()
    if index >= count:
        raise UserError(f"device {device!r} asked for, but torch sees {count} GPU(s)")
    name = torch.cuda.get_device_name(index)
    spec = match_device_name(name)
    if spec is not None:
        return spec
    try:
        return _spec_from_properties(index, name)
    except Exception as e:  # never crash on an unknown GPU
        return HardwareSpec(
            id="unknown-gpu", name=name, vendor="nvidia", match=[name],
            dram_bandwidth_gbs=Figure(value=10000.0, source="assumed: 10 TB/s (properties unreadable)"),
            llc_bytes=Figure(value=268435456, source="assumed: 256 MiB (properties unreadable)"),
            vector_fp32_tflops=Figure(value=200.0, source="assumed: 200 TFLOP/s (properties unreadable)"),
            sfu_tops=Figure(value=20.0, source="assumed: 20 TOP/s (properties unreadable)"),
            tensor=[TensorRate(dtype="bf16", accumulator="fp32", tflops=5000.0,
                               source="assumed: 5 PFLOP/s (properties unreadable)")],
            notes=f"Could not read the properties of {name!r} ({type(e).__name__}: {e}); placeholder generous ceilings.",
        )
