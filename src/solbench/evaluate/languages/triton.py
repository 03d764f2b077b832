"""Triton solutions: compiled for the GPU, or run by Triton's interpreter on the CPU.

The interpreter is faithful for fp32/fp16/fp8 arithmetic but returns garbage for a
bf16 ``tl.dot`` (Triton 3.x); such a dot raises ``Unsupported`` so the CPU verdict
is ``unsupported`` rather than a false ``incorrect``.
"""

from __future__ import annotations

from solbench.evaluate.languages.base import Language, Unsupported


#: set when the guard fired; the interpreter may wrap the exception it raised
unsupported_reason: str | None = None


class Triton(Language):
    name = "triton"
    interpreted_on_cpu = True

    def environment(self, device: str) -> dict[str, str]:
        return {"TRITON_INTERPRET": "1"} if device == "cpu" else {}

    def install_hooks(self, device: str) -> None:
        if device != "cpu":
            return
        try:
            import triton.language as tl
            from triton.runtime import interpreter
        except ImportError:
            return
        builder = getattr(interpreter, "InterpreterBuilder", None)
        original = getattr(builder, "create_dot", None)
        if original is None or getattr(original, "_solbench_guard", False):
            return

        def guarded_dot(self, a, b, *args, **kwargs):
            if getattr(a, "dtype", None) == tl.bfloat16 or getattr(b, "dtype", None) == tl.bfloat16:
                global unsupported_reason
                unsupported_reason = "bf16 tl.dot is not computed faithfully by Triton's interpreter"
                raise Unsupported(unsupported_reason)
            return original(self, a, b, *args, **kwargs)

        guarded_dot._solbench_guard = True
        builder.create_dot = guarded_dot
