"""GPU clocks, throttling and power through NVML (the ``nvidia-ml-py`` package).

Everything here reads; nothing changes a clock or a limit. Every function
returns ``None`` when NVML is missing or the GPU cannot be queried, so callers
on machines without an NVIDIA GPU need no special case.
"""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()
_state: dict[str, Any] = {"tried": False, "nvml": None}

#: clocks-event (throttle) reason bits, by the names NVML gives them
_REASONS = (
    (0x0000000000000001, "gpu_idle"),
    (0x0000000000000002, "applications_clocks_setting"),
    (0x0000000000000004, "sw_power_cap"),
    (0x0000000000000008, "hw_slowdown"),
    (0x0000000000000010, "sync_boost"),
    (0x0000000000000020, "sw_thermal_slowdown"),
    (0x0000000000000040, "hw_thermal_slowdown"),
    (0x0000000000000080, "hw_power_brake_slowdown"),
    (0x0000000000000100, "display_clock_setting"),
)

#: reasons that mean the chip slowed itself down (power or heat), as opposed to idling or a clock setting
SLOWDOWN_REASONS = frozenset({"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
                              "hw_power_brake_slowdown"})


def _nvml():
    """The initialised pynvml module, or None (initialised once per process)."""
    with _lock:
        if not _state["tried"]:
            _state["tried"] = True
            try:
                import pynvml  # type: ignore[import-not-found]

                pynvml.nvmlInit()
                _state["nvml"] = pynvml
            except Exception:
                _state["nvml"] = None
        return _state["nvml"]


def _cuda_uuid(index: int) -> str | None:
    """The NVML name (``GPU-<uuid>``) of CUDA device ``index`` as this process numbers it, when torch has
    initialised CUDA: CUDA_VISIBLE_DEVICES and CUDA's device order can differ from NVML's numbering."""
    import sys

    torch = sys.modules.get("torch")
    try:
        if torch is None or not torch.cuda.is_initialized():
            return None
        uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
    except Exception:
        return None
    if uuid is None:
        return None
    text = str(uuid)
    return text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}"


def visible_entry(index: int) -> str | None:
    """CUDA_VISIBLE_DEVICES' entry for CUDA device ``index`` of this process (an NVML index or a ``GPU-`` UUID),
    or None where the variable is unset: a scheduler's slot sees one GPU as device 0, which NVML, ignoring the
    variable, numbers by its place on the host."""
    import os

    text = os.environ.get("CUDA_VISIBLE_DEVICES")
    if text is None:
        return None
    entries = [e.strip() for e in text.split(",") if e.strip()]
    return entries[index] if index < len(entries) else None


def _handle(index: int):
    """NVML's handle for CUDA device ``index``: found by UUID where torch knows it, else by CUDA_VISIBLE_DEVICES'
    entry for it, else by NVML's own index."""
    nv = _nvml()
    if nv is None:
        return None, None
    uuid = _cuda_uuid(index)
    visible = visible_entry(index)
    if uuid is None and visible is not None and not visible.isdigit():
        uuid = visible
    if uuid is not None:
        try:
            return nv, nv.nvmlDeviceGetHandleByUUID(uuid)
        except Exception:
            pass
    try:
        return nv, nv.nvmlDeviceGetHandleByIndex(int(visible) if visible and visible.isdigit() else index)
    except Exception:
        return None, None


def _try(fn, *args):
    try:
        return fn(*args)
    except Exception:
        return None


def reason_names(mask: int) -> list[str]:
    """Names of the set bits of an NVML clocks-event-reason mask."""
    names = [name for bit, name in _REASONS if mask & bit]
    known = 0
    for bit, _ in _REASONS:
        known |= bit
    if mask & ~known:
        names.append(f"other(0x{mask & ~known:x})")
    return names


#: each device's maximum clocks, read once: they do not change while it runs, and NVML takes 1.5 ms to answer
#: each (an H100, 2026-12-06: a quarter of a second of one evaluation's clock readings)
_MAX_CLOCKS: dict[tuple[int, int], int | None] = {}


def _max_clock(nv, h, index: int, clock: int) -> int | None:
    key = (index, clock)
    if _MAX_CLOCKS.get(key) is None:
        _MAX_CLOCKS[key] = _try(nv.nvmlDeviceGetMaxClockInfo, h, clock)
    return _MAX_CLOCKS[key]


def gpu_clock_snapshot(index: int = 0) -> dict | None:
    """One reading of CUDA device ``index``'s clocks, throttle reasons, temperature and power.

    Keys: ``sm_clock_mhz``, ``mem_clock_mhz``, ``max_sm_clock_mhz``,
    ``max_mem_clock_mhz``, ``throttle_reasons`` (list of names; empty when the GPU
    runs unthrottled), ``temperature_c``, ``power_w``, ``power_limit_w``. A value
    NVML cannot give is None. Returns None when NVML is unavailable.
    """
    nv, h = _handle(index)
    if h is None:
        return None
    reasons_fn = (getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
                  or getattr(nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None))
    mask = _try(reasons_fn, h) if reasons_fn else None
    power_mw = _try(nv.nvmlDeviceGetPowerUsage, h)
    limit_mw = _try(nv.nvmlDeviceGetEnforcedPowerLimit, h)
    return {
        "sm_clock_mhz": _try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
        "mem_clock_mhz": _try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM),
        "max_sm_clock_mhz": _max_clock(nv, h, index, nv.NVML_CLOCK_SM),
        "max_mem_clock_mhz": _max_clock(nv, h, index, nv.NVML_CLOCK_MEM),
        "throttle_reasons": reason_names(int(mask)) if mask is not None else None,
        "temperature_c": _try(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU),
        "power_w": power_mw / 1000.0 if power_mw is not None else None,
        "power_limit_w": limit_mw / 1000.0 if limit_mw is not None else None,
    }


def gpu_static_info(index: int = 0) -> dict | None:
    """What NVML says about GPU ``index`` that does not change while it runs.

    Keys: ``name``, ``max_sm_clock_mhz``, ``max_mem_clock_mhz``,
    ``memory_bus_width_bits``, ``peak_dram_gbs`` (bus width / 8 x max memory
    clock x 2, double data rate; None when either is unknown), ``driver_version``.
    Returns None when NVML is unavailable.
    """
    nv, h = _handle(index)
    if h is None:
        return None
    name = _try(nv.nvmlDeviceGetName, h)
    if isinstance(name, bytes):
        name = name.decode(errors="replace")
    driver = _try(nv.nvmlSystemGetDriverVersion)
    if isinstance(driver, bytes):
        driver = driver.decode(errors="replace")
    max_mem = _try(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_MEM)
    bus = _try(nv.nvmlDeviceGetMemoryBusWidth, h)
    peak = bus / 8 * max_mem * 1e6 * 2 / 1e9 if bus and max_mem else None
    return {
        "name": name,
        "max_sm_clock_mhz": _try(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_SM),
        "max_mem_clock_mhz": max_mem,
        "memory_bus_width_bits": bus,
        "peak_dram_gbs": peak,
        "driver_version": driver,
    }


def gpu_free_memory_bytes(index: int = 0) -> int | None:
    """Free device memory of GPU ``index`` in bytes, as NVML reports it, or None."""
    nv, h = _handle(index)
    info = _try(nv.nvmlDeviceGetMemoryInfo, h) if h is not None else None
    return int(info.free) if info is not None else None
