"""Triton solutions: compiled for the GPU, or run by Triton's interpreter on the CPU, made faithful there
(``problems.interpreter``)."""

from __future__ import annotations

from solbench.evaluate.languages.base import Language, decorated_functions
from solbench.problems.interpreter import patch_interpreter_dot


class Triton(Language):
    name = "triton"
    interpreted_on_cpu = True
    proof = True  # the profiled call's kernels are the solution's own @triton.jit functions (integrity.language)

    def kernel_names(self, sources: dict[str, str]) -> set[str]:
        return decorated_functions(sources, ("jit", "autotune", "heuristics", "JITFunction"))

    def owns(self, kernel: str, names: set[str]) -> bool:
        # Triton names a compiled kernel after its function (older releases added a specialisation suffix)
        return any(kernel == n or kernel.startswith(n + "_") for n in names)

    def environment(self, device: str) -> dict[str, str]:
        return {"TRITON_INTERPRET": "1"} if device == "cpu" else {}

    def install_hooks(self, device: str) -> None:
        if device != "cpu":
            return
        patch_interpreter_dot()
