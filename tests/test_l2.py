"""The persisting-L2 guard finds the CUDA runtime torch loaded, and stays inactive where there is none."""

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
