"""The scheduler's slots: one per device it evaluates on, each with the memory its jobs are admitted against.

A GPU slot's process sees one GPU (CUDA_VISIBLE_DEVICES set to its entry) and evaluates on ``cuda``; a CPU slot
evaluates on ``cpu`` (several CPU slots stand in for several devices where a host has none, as the tests do).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from solbench.errors import UserError

#: the share of a device's memory that jobs are admitted against (the rest: contexts, allocator slack)
USABLE_SHARE = 0.85


@dataclass(frozen=True)
class Slot:
    name: str  # "cuda:0", "cpu:1": unique within a scheduler
    device: str  # what the evaluator is told: "cuda" or "cpu"
    visible: str | None = None  # CUDA_VISIBLE_DEVICES of its process (a GPU's index or UUID)
    memory_bytes: int | None = None  # what its jobs are admitted against (None: not known)


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES entries (NVML's count where the variable is
    unset)."""
    text = os.environ.get("CUDA_VISIBLE_DEVICES")
    if text is not None:
        return [e.strip() for e in text.split(",") if e.strip() and e.strip() != "-1"]
    try:
        import pynvml  # type: ignore[import-not-found]

        pynvml.nvmlInit()
        return [str(i) for i in range(pynvml.nvmlDeviceGetCount())]
    except Exception:
        return []


def gpu_memory(entry: str) -> int | None:
    try:
        import pynvml  # type: ignore[import-not-found]

        pynvml.nvmlInit()
        handle = (pynvml.nvmlDeviceGetHandleByIndex(int(entry)) if entry.isdigit()
                  else pynvml.nvmlDeviceGetHandleByUUID(entry))
        return int(pynvml.nvmlDeviceGetMemoryInfo(handle).total * USABLE_SHARE)
    except Exception:
        return None


def parse_gpus(text: str | None, visible: list[str]) -> list[str]:
    """``--gpus``: all (default), a count, or comma-separated indices into the visible GPUs."""
    if text in (None, "", "all"):
        return visible
    if text.isdigit():
        n = int(text)
        if not 0 < n <= len(visible):
            raise UserError(f"--gpus {n}: {len(visible)} GPU(s) visible here")
        return visible[:n]
    try:
        picks = [int(x) for x in text.split(",")]
    except ValueError:
        raise UserError(f"--gpus takes all, a count or indices such as 0,2, not {text!r}") from None
    bad = [i for i in picks if not 0 <= i < len(visible)]
    if bad:
        raise UserError(f"--gpus: no GPU {bad[0]} among the {len(visible)} visible here")
    return [visible[i] for i in picks]


def discover(device: str = "auto", gpus: str | None = None, cpu_slots: int = 1) -> list[Slot]:
    """The slots for ``device`` (auto: every visible GPU, or the CPU where there is none)."""
    entries = visible_gpus() if device in ("auto", "cuda") else []
    if device == "cuda" and not entries:
        raise UserError("--device cuda asked for, but no CUDA GPU is visible")
    if entries:
        return [Slot(f"cuda:{i}", "cuda", e, gpu_memory(e)) for i, e in enumerate(parse_gpus(gpus, entries))]
    from solbench.evaluate.trusted.footprint import available_bytes

    free = available_bytes("cpu")
    share = int(free * USABLE_SHARE / cpu_slots) if free else None
    return [Slot(f"cpu:{i}", "cpu", None, share) for i in range(cpu_slots)]
