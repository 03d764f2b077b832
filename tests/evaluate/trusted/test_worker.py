"""The trusted worker's end of a job (evaluate/trusted/worker.py): whether the memory its candidates left it
holding makes it retire."""

from __future__ import annotations

from solbench.evaluate.boundary import arena
from solbench.evaluate.trusted import worker


class _Cuda:
    initialized = True

    class Props:
        total_memory = 80 << 30

    def is_initialized(self) -> bool:
        return self.initialized

    def get_device_properties(self, device):
        assert device == "cuda:1"
        return self.Props


class _Torch:
    cuda = _Cuda()

    @staticmethod
    def device(name):
        return name


def test_a_worker_retires_once_the_memory_held_for_dead_candidates_passes_its_share(monkeypatch):
    held, collected = [0], []
    monkeypatch.setattr(arena, "held_bytes", lambda: held[0])
    monkeypatch.setattr(worker.gc, "collect", lambda: collected.append(True))
    job = {"device": "cuda:1"}
    assert worker._held(_Torch, job, 0) == {} and not collected  # nothing held: nothing said, nothing collected
    held[0] = 4 << 30  # 5% of 80 GiB: not more than the share
    assert worker._held(_Torch, job, 1 << 30) == {"held_bytes": 4 << 30, "added_bytes": 3 << 30, "retire": False}
    assert collected  # a reference cycle of its own is collected before what is held counts
    held[0] = (4 << 30) + 1
    assert worker._held(_Torch, job, held[0]) == {"held_bytes": (4 << 30) + 1, "added_bytes": 0, "retire": True}
    held[0] = 1 << 20
    assert worker._held(_Torch, dict(job, retire_held_bytes=0), 0)["retire"]  # a job's own limit
    _Torch.cuda.initialized = False
    try:
        assert worker._held(_Torch, job, 0) == {}  # no CUDA context: no arena was ever lent by CUDA IPC
    finally:
        _Torch.cuda.initialized = True


def test_held_memory_that_a_collection_frees_is_not_held(monkeypatch):
    """An arena kept alive only by a reference cycle of the worker's own (a traceback's frames) goes back once
    collected: it neither counts nor retires the worker."""
    held = [64 << 20]
    monkeypatch.setattr(arena, "held_bytes", lambda: held[0])
    monkeypatch.setattr(worker.gc, "collect", lambda: held.__setitem__(0, 0))
    assert worker._held(_Torch, {"device": "cuda:1", "retire_held_bytes": 0}, 0) == {}
