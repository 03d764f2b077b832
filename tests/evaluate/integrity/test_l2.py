"""The persisting-L2 guard finds the CUDA runtime torch loaded, and stays inactive where there is none."""

import pytest

from solbench.evaluate.integrity.l2 import L2Guard, loaded_cudart


def test_finds_the_loaded_runtime_in_the_memory_map(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text(
        "7f00-7f01 r-xp 00000000 08:01 1 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
        "7f02-7f03 r-xp 00000000 08:01 2 /opt/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcudart.so.13\n"
        "7f04-7f05 rw-p 00000000 00:00 0 \n")
    assert loaded_cudart(str(maps)).endswith("nvidia/cu13/lib/libcudart.so.13")
    maps.write_text("7f00-7f01 r-xp 00000000 08:01 1 /usr/lib/libc.so.6\n")
    assert loaded_cudart(str(maps)) is None
    assert loaded_cudart(str(tmp_path / "missing")) is None


def test_inactive_without_a_runtime(monkeypatch):
    import solbench.evaluate.integrity.l2 as l2

    monkeypatch.setattr(l2, "loaded_cudart", lambda maps="/proc/self/maps": None)
    guard = L2Guard()
    assert not guard.active and guard.reset() is False and guard.set_aside_bytes() is None


@pytest.mark.gpu
def test_guard_sees_and_drops_a_set_aside_on_the_gpu():
    """On a GPU the guard finds torch's runtime, sees a persisting set-aside someone made, and removes it."""
    import ctypes

    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from solbench.evaluate.integrity.l2 import LIMIT_PERSISTING_L2

    torch.zeros(1, device="cuda")
    guard = L2Guard()
    assert guard.active, "the CUDA runtime torch loaded was not found in /proc/self/maps"
    assert guard.reset() and guard.set_aside_bytes() == 0
    rc = guard.lib.cudaDeviceSetLimit(ctypes.c_int(LIMIT_PERSISTING_L2), ctypes.c_size_t(4 << 20))
    if rc != 0:
        pytest.skip(f"this GPU refuses a persisting-L2 set-aside (cudaError {rc})")
    assert guard.set_aside_bytes() > 0
    assert guard.reset() and guard.set_aside_bytes() == 0
