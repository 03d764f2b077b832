"""Counting the copies torch runs (``Copies``): what a harness's fill or read launches, asserted by tests."""

import torch


class Copies:
    """Counts the copies torch runs inside it (each ``copy_`` one), at the dispatcher: what launches kernels."""

    def __enter__(self):
        from torch.utils._python_dispatch import TorchDispatchMode

        counter = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                if func is torch.ops.aten.copy_.default:
                    counter.n += 1
                return func(*args, **(kwargs or {}))

        self.n, self.mode = 0, Mode()
        self.mode.__enter__()
        return self

    def __exit__(self, *exc):
        self.mode.__exit__(*exc)
