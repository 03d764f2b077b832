"""The Workload: one concrete instance of a definition (var axes bound, input sources named)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

from solbench.problems.definition import Tolerance


class RandomInput(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: Literal["random"]


class ScalarInput(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: Literal["scalar"]
    value: int | float | bool


class SafetensorsInput(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: Literal["safetensors"]
    path: str
    tensor_key: str


class CustomInput(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: Literal["custom"]


InputSource = Annotated[
    Union[RandomInput, ScalarInput, SafetensorsInput, CustomInput], Field(discriminator="type")
]


class Workload(BaseModel):
    model_config = ConfigDict(extra="allow")
    uuid: str
    axes: dict[str, int] = Field(default_factory=dict)
    inputs: dict[str, InputSource] = Field(default_factory=dict)
    tolerance: Tolerance | None = None
    #: solbench: where this workload runs: "cpu" (small, for the CPU mode), "gpu", or "any".
    device: Literal["cpu", "gpu", "any"] = "any"
    #: solbench: a short human label ("llama-3.1-8b decode bs=1").
    label: str | None = None

    def runs_on(self, device: str) -> bool:
        want = "cpu" if device == "cpu" else "gpu"
        return self.device in ("any", want)


def parse_workload_line(obj: Any) -> Workload:
    """A workload line is either a bare Workload or a Trace with a ``workload`` field."""
    if isinstance(obj, dict) and "workload" in obj and "uuid" not in obj:
        obj = obj["workload"]
    return Workload.model_validate(obj)
