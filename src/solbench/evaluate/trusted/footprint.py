"""How much memory judging one workload takes on the trusted side, and whether the device has it.

The trusted worker holds, per correctness draw: the inputs, a pristine copy, the copies lent to the candidate,
the reference's inputs and outputs, and the float64 anchor (inputs and outputs upcast); the timing ring is sized
against free memory separately (``ring``). A workload whose estimate exceeds what the device has free is refused
before anything runs (``unsupported``, ``too_large_for_device``), with the sizes, instead of getting the
trusted worker killed for memory halfway.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

#: copies of the inputs and of the outputs held at once while one draw is judged, besides the float64 anchor
INPUT_COPIES = 4
OUTPUT_COPIES = 3


@dataclass(frozen=True)
class Footprint:
    input_bytes: int
    output_bytes: int
    anchor_bytes: int  # the float64 anchor's inputs and outputs

    @property
    def need_bytes(self) -> int:
        return INPUT_COPIES * self.input_bytes + OUTPUT_COPIES * self.output_bytes + self.anchor_bytes

    def describe(self) -> str:
        return (f"inputs {_gb(self.input_bytes)}, outputs {_gb(self.output_bytes)}, float64 anchor "
                f"{_gb(self.anchor_bytes)}: about {_gb(self.need_bytes)} in all")


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB"


def tensor_bytes(definition, specs, axes: dict[str, int], anchor: bool = False) -> int:
    """Bytes of the dense tensors ``specs`` (a definition's inputs or outputs) at ``axes``; with ``anchor``, as
    the float64 anchor holds them (floating tensors widened to 8 bytes)."""
    from solbench.problems.roles import torch_dtype

    total = 0
    for _, spec in specs.items():
        n = 1
        for s in definition.shape_of(spec, axes) or ():
            n *= int(s)
        dt = torch_dtype(spec.dtype)
        total += n * (8 if anchor and dt.is_floating_point else dt.itemsize)
    return total


def footprint(problem, uuid: str) -> Footprint:
    d = problem.definition
    axes = d.resolve_axes(problem.workload(uuid).axes)
    return Footprint(tensor_bytes(d, d.inputs, axes), tensor_bytes(d, d.outputs, axes),
                     tensor_bytes(d, d.inputs, axes, anchor=True) + tensor_bytes(d, d.outputs, axes, anchor=True))


def available_bytes(device: str) -> int | None:
    """Free memory of the device the trusted worker judges on (CPU: MemAvailable), or None when unknown."""
    if device == "cpu":
        try:
            with open("/proc/meminfo") as f:
                for line in f:
                    if line.startswith("MemAvailable:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            return None
        return None
    from solbench.hardware.telemetry import gpu_free_memory_bytes

    return gpu_free_memory_bytes(int(device.split(":")[1]) if ":" in device else 0)


def too_large(problem, uuids: list[str], device: str) -> dict[str, str]:
    """uuid -> why, for the workloads whose footprint exceeds the device's free memory."""
    free = available_bytes(device)
    if free is None or os.environ.get("SOLBENCH_NO_FOOTPRINT_CHECK"):
        return {}
    out = {}
    for uuid in uuids:
        fp = footprint(problem, uuid)
        if fp.need_bytes > free:
            out[uuid] = f"judging this workload needs {fp.describe()}; {device} has {_gb(free)} free"
    return out
