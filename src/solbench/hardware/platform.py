"""The platform layer: which vendor's chip a run is on, how to query it, and where its clocks come from.

A ``Platform`` is one device as the measurement sees it: ``vendor``, ``arch``, ``id`` ("nvidia:sm_90",
"amd:gfx942", "cpu:x86_64"), ``device_name``, ``available``, ``telemetry`` (clocks, temperature, power),
``free_memory_bytes``, ``clock_source`` ("nvml", "amdsmi", "none") and ``record`` (the JSON-able dict stored with
every result). ``detect_platform(device)`` picks one by detection; ``register_platform`` adds a plug-in (a new
vendor, or a fake one in a test); ``SOLBENCH_PLATFORM=<id prefix>`` forces one. PyTorch's ROCm build names its
devices "cuda" too, so AMD needs only its plug-in here: everything above this layer is vendor-neutral.
"""

from __future__ import annotations

import math
import os
import platform as _pyplatform
import re
from functools import cached_property
from typing import Any

from solbench.errors import UserError
from solbench.hardware import telemetry as _nvml

ENV_OVERRIDE = "SOLBENCH_PLATFORM"
#: the keys telemetry() fills (those of NVML's snapshot); a value a source cannot give is None
TELEMETRY_KEYS = ("sm_clock_mhz", "mem_clock_mhz", "max_sm_clock_mhz", "max_mem_clock_mhz", "throttle_reasons",
                  "temperature_c", "power_w", "power_limit_w")


def parse_device(device: str | None) -> tuple[str, int]:
    """("cpu", 0) or ("cuda", N) from "cpu", "cuda" or "cuda:N"."""
    dev = (device or "cpu").strip().lower()
    m = re.fullmatch(r"cuda(?::(\d+))?", dev)
    if dev != "cpu" and not m:
        raise UserError(f"unknown device {device!r}; use 'cpu', 'cuda' or 'cuda:N'")
    return ("cpu", 0) if dev == "cpu" else ("cuda", int(m.group(1) or 0))


def _torch():
    import torch  # only when a GPU is asked about

    return torch


def _num(x: Any) -> float | None:
    """A number from a vendor library's answer ("N/A", None and the like become None)."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


class Platform:
    """One device of one vendor. A plug-in sets ``vendor``, ``clock_source`` (and ``priority``) and overrides
    the hooks; ``record`` then needs no change."""

    vendor: str = "none"
    clock_source: str = "none"
    priority: int = 0  # detection: the available platform of the highest priority wins (ties: latest registered)

    def __init__(self, device: str = "cpu"):
        self.device = (device or "cpu").strip().lower()
        self.kind, self.index = parse_device(self.device)
        self.selected_by = "detection"

    # ---- the hooks a plug-in overrides (these defaults: no device, no source) ----
    @property
    def arch(self) -> str:
        return "unknown"

    @property
    def id(self) -> str:
        return f"{self.vendor}:{self.arch}"

    def available(self) -> bool:  # whether this platform serves self.device on this machine (detection asks)
        return False

    def device_name(self, index: int | None = None) -> str:
        return "unknown"

    def telemetry(self, index: int | None = None) -> dict[str, Any]:  # TELEMETRY_KEYS; {} without a source
        return {}

    def free_memory_bytes(self, index: int | None = None) -> int | None:
        return None

    def runtime(self) -> dict[str, Any]:  # the software driving the device: runtime, runtime_version, driver
        return {}

    def record(self) -> dict[str, Any]:
        """Stored with every result: JSON-able, and the same for every result on this device."""
        return {"id": self.id, "vendor": self.vendor, "arch": self.arch, "device": self.device, "index": self.index,
                "device_name": self.device_name(), "clock_source": self.clock_source,
                "selected_by": self.selected_by, **self.runtime()}

    def _index(self, index: int | None) -> int:
        return self.index if index is None else index


class CpuPlatform(Platform):
    vendor, clock_source, priority = "cpu", "none", -100  # the fallback, and only for device "cpu"

    @property
    def arch(self) -> str:
        return _pyplatform.machine() or "unknown"

    def available(self) -> bool:
        return self.kind == "cpu"

    def device_name(self, index: int | None = None) -> str:
        return _pyplatform.processor() or _pyplatform.machine() or "cpu"  # the trusted worker's device_name

    def free_memory_bytes(self, index: int | None = None) -> int | None:
        try:
            return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, ValueError, OSError):
            return None

    def runtime(self) -> dict[str, Any]:
        return {"runtime": "cpu", "runtime_version": None, "cpu_count": os.cpu_count()}


class _TorchGpu(Platform):
    """What NVIDIA and AMD share: both are torch's "cuda" devices."""

    @cached_property
    def _props(self):
        try:
            return _torch().cuda.get_device_properties(self.index)
        except Exception:
            return None

    def _torch_sees_it(self, runtime: str) -> bool:
        torch = _torch()
        try:
            return (self.kind == "cuda" and getattr(torch.version, runtime, None) is not None
                    and (runtime == "hip" or getattr(torch.version, "hip", None) is None)
                    and torch.cuda.is_available() and self.index < torch.cuda.device_count())
        except Exception:
            return False

    def device_name(self, index: int | None = None) -> str:
        try:
            return str(_torch().cuda.get_device_name(self._index(index)))
        except Exception:
            return str(getattr(self._props, "name", None) or "unknown")


class NvidiaPlatform(_TorchGpu):
    vendor, clock_source = "nvidia", "nvml"

    @property
    def arch(self) -> str:
        p = self._props
        return f"sm_{p.major}{p.minor}" if getattr(p, "major", None) is not None else "unknown"

    def available(self) -> bool:
        return self._torch_sees_it("cuda")

    def telemetry(self, index: int | None = None) -> dict[str, Any]:
        return _nvml.gpu_clock_snapshot(self._index(index)) or {}

    def free_memory_bytes(self, index: int | None = None) -> int | None:
        return _nvml.gpu_free_memory_bytes(self._index(index))

    def runtime(self) -> dict[str, Any]:
        static = _nvml.gpu_static_info(self.index) or {}
        return {"runtime": "cuda", "runtime_version": getattr(_torch().version, "cuda", None),
                "driver": static.get("driver_version")}


_AMDSMI: dict[int, tuple[Any, bool]] = {}  # id(amdsmi module) -> (the module, whether amdsmi_init succeeded)


def _amdsmi():
    """The initialised amdsmi module (imported only when first asked for), or None."""
    try:
        import amdsmi  # type: ignore[import-not-found]
    except Exception:
        return None
    if id(amdsmi) not in _AMDSMI:
        try:
            amdsmi.amdsmi_init()
            _AMDSMI[id(amdsmi)] = (amdsmi, True)
        except Exception:
            _AMDSMI[id(amdsmi)] = (amdsmi, False)
    return amdsmi if _AMDSMI[id(amdsmi)][1] else None


class AmdPlatform(_TorchGpu):
    vendor, clock_source = "amd", "amdsmi"

    @property
    def target(self) -> str | None:
        """The full offload target torch reports, e.g. "gfx942:sramecc+:xnack-"."""
        name = getattr(self._props, "gcnArchName", None)
        return str(name) if name else None

    @property
    def arch(self) -> str:
        return self.target.split(":", 1)[0] if self.target else "unknown"

    def available(self) -> bool:
        return self._torch_sees_it("hip")

    def _handle(self, index: int):
        """(amdsmi, handle) for torch device ``index``: by PCI bus where torch gives it (HIP_VISIBLE_DEVICES
        renumbers devices), else by position; (None, None) without amdsmi."""
        smi = _amdsmi()
        try:
            handles = list(smi.amdsmi_get_processor_handles()) if smi is not None else []
        except Exception:
            handles = []
        bus = getattr(self._props, "pci_bus_id", None) if index == self.index else None
        for h in handles if bus is not None else ():
            try:
                if int(str(smi.amdsmi_get_gpu_device_bdf(h)).split(":")[-2], 16) == int(bus):  # "0000:0c:00.0"
                    return smi, h
            except Exception:
                continue
        return (smi, handles[index]) if 0 <= index < len(handles) else (None, None)

    def telemetry(self, index: int | None = None) -> dict[str, Any]:
        smi, h = self._handle(self._index(index))
        if h is None:
            return {}

        def get(fn: str, *args):
            try:
                return getattr(smi, fn)(h, *args)
            except Exception:
                return None

        out: dict[str, Any] = dict.fromkeys(TELEMETRY_KEYS)
        for clk, cur, top in (("GFX", "sm_clock_mhz", "max_sm_clock_mhz"),
                              ("MEM", "mem_clock_mhz", "max_mem_clock_mhz")):
            info = get("amdsmi_get_clock_info", getattr(getattr(smi, "AmdSmiClkType", None), clk, None))
            if isinstance(info, dict):
                out[cur], out[top] = _num(info.get("clk")), _num(info.get("max_clk"))
        metric = getattr(getattr(smi, "AmdSmiTemperatureMetric", None), "CURRENT", None)
        for sensor in ("HOTSPOT", "EDGE"):
            t = _num(get("amdsmi_get_temp_metric", getattr(getattr(smi, "AmdSmiTemperatureType", None), sensor, None),
                         metric))
            if t is not None:
                out["temperature_c"] = t
                break
        power = get("amdsmi_get_power_info")
        if isinstance(power, dict):
            cur = _num(power.get("current_socket_power"))
            out["power_w"] = cur if cur is not None else _num(power.get("average_socket_power"))
            out["power_limit_w"] = _num(power.get("power_limit"))
        return out

    def free_memory_bytes(self, index: int | None = None) -> int | None:
        smi, h = self._handle(self._index(index))
        try:
            vram = smi.AmdSmiMemoryType.VRAM
            return int(smi.amdsmi_get_gpu_memory_total(h, vram)) - int(smi.amdsmi_get_gpu_memory_usage(h, vram))
        except Exception:
            return None

    def runtime(self) -> dict[str, Any]:
        smi, h = self._handle(self.index)
        try:
            driver = (smi.amdsmi_get_gpu_driver_info(h) or {}).get("driver_version") if h is not None else None
        except Exception:
            driver = None
        return {"runtime": "hip", "runtime_version": getattr(_torch().version, "hip", None), "driver": driver,
                "target": self.target}


# ---------------------------------------------------------------- the registry and detection

_REGISTRY: list[type[Platform]] = [CpuPlatform, NvidiaPlatform, AmdPlatform]


def register_platform(cls: type[Platform]) -> type[Platform]:
    """Add a platform plug-in (also a class decorator); one registered for the same vendor is replaced."""
    if not (isinstance(cls, type) and issubclass(cls, Platform)):
        raise TypeError(f"register_platform needs a Platform subclass, not {cls!r}")
    _REGISTRY[:] = [c for c in _REGISTRY if c.vendor != cls.vendor] + [cls]
    return cls


def unregister_platform(cls: type[Platform]) -> None:
    _REGISTRY[:] = [c for c in _REGISTRY if c is not cls]


def registered_platforms() -> list[type[Platform]]:
    """Detection order: highest priority first, the latest registered first among equals."""
    order = sorted(enumerate(_REGISTRY), key=lambda ic: (-ic[1].priority, -ic[0]))
    return [cls for _, cls in order]


def detect_platform(device: str = "cpu") -> Platform:
    """The platform serving ``device`` ("cpu", "cuda", "cuda:N"): the one ``SOLBENCH_PLATFORM`` names by a
    prefix of its id ("amd", "nvidia:sm_90"), else the first available in ``registered_platforms()`` order."""
    parse_device(device)  # an unknown device is a UserError before anything is probed
    forced = os.environ.get(ENV_OVERRIDE, "").strip().lower()
    for cls in registered_platforms():
        if forced and cls.vendor.lower() != forced.split(":", 1)[0]:
            continue
        p = cls(device)
        try:
            if p.id.lower().startswith(forced) if forced else p.available():
                p.selected_by = ENV_OVERRIDE if forced else "detection"
                return p
        except Exception:
            continue
    if forced:
        raise UserError(f"{ENV_OVERRIDE}={forced!r} names no registered platform on device {device!r} (vendors: "
                        f"{', '.join(sorted(c.vendor for c in _REGISTRY))})")
    raise UserError(f"device {device!r} asked for, but no platform serves it (torch sees no NVIDIA or ROCm GPU there)")
