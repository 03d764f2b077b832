"""Arenas: the trusted side places tensors, the candidate's side sees the same bytes through the handle."""

import json
from pathlib import Path
import subprocess
import sys

import pytest
import torch

from solbench.evaluate.boundary.arena import Arena, attach, dtype_from_name, view


def test_slots_round_trip_through_a_second_process(tmp_path):
    arena = Arena(1 << 16, torch.device("cpu"), tmp_path)
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    y = torch.tensor([1, 2, 3], dtype=torch.int64)
    slots = [arena.put(x), arena.put(y), arena.put(0.5), arena.reserve((2, 2), torch.bfloat16)]
    assert slots[2] == {"value": 0.5}
    assert all(s["offset"] % 256 == 0 for s in (slots[0], slots[1], slots[3]))
    # another process attaches, reads the inputs and writes the output slot
    code = ("import json, sys, torch\n"
            "from solbench.evaluate.boundary.arena import attach, view\n"
            "msg = json.loads(sys.stdin.read())\n"
            "buf = attach(msg['handle'])\n"
            "x, y, out = (view(buf, s) for s in (msg['slots'][0], msg['slots'][1], msg['slots'][3]))\n"
            "out.copy_((x[:2, :2] * y[0]).to(torch.bfloat16))\n")
    subprocess.run([sys.executable, "-c", code], input=json.dumps({"handle": arena.handle, "slots": slots}),
                   text=True, check=True, timeout=120)
    assert torch.equal(arena.view(slots[3]), x[:2, :2].to(torch.bfloat16))
    arena.close()
    assert not (tmp_path / arena.handle["path"]).exists()


def test_a_link_renamed_over_the_arena_file_is_never_followed(tmp_path, monkeypatch):
    """The arena's file lies in the candidate's own directory: a link renamed over it between its creation and its
    mapping (a race the candidate can run) must lead the trusted side nowhere: nothing outside is created or
    written, and the arena keeps working through the file it created."""
    from solbench.evaluate.boundary import arena as arena_mod

    outside = tmp_path / "outside"
    outside.mkdir()
    victim, created = outside / "victim.txt", outside / "created_by_the_trusted_side"
    victim.write_text("keep me")
    private = tmp_path / "private"
    private.mkdir()
    real = arena_mod.tempfile.mkstemp

    def raced(*args, **kwargs):  # the race won at once: links over the new file's path, both kinds
        fd, path = real(*args, **kwargs)
        link = Path(path + ".link")
        link.symlink_to(victim if not raced.calls else created)
        link.rename(path)
        raced.calls += 1
        return fd, path

    raced.calls = 0
    monkeypatch.setattr(arena_mod.tempfile, "mkstemp", raced)
    for _ in range(2):
        arena = Arena(1 << 12, torch.device("cpu"), private)
        slot = arena.put(torch.arange(8, dtype=torch.float32))
        assert torch.equal(arena.view(slot), torch.arange(8, dtype=torch.float32))
        arena.close()
    assert victim.read_text() == "keep me" and not created.exists()


def test_an_arena_refuses_what_does_not_fit(tmp_path):
    arena = Arena(512, torch.device("cpu"), tmp_path)
    arena.reserve((64,), torch.float32)  # 256 bytes
    arena.reserve((64,), torch.float32)
    with pytest.raises(ValueError):
        arena.reserve((1,), torch.float32)
    with pytest.raises(ValueError):
        view(arena.buf, {"offset": 384, "dtype": "float32", "shape": [64]})  # runs past the end
    arena.close()


def test_dtype_names():
    assert dtype_from_name("bfloat16") is torch.bfloat16
    assert dtype_from_name("torch.float8_e4m3fn") is torch.float8_e4m3fn
    with pytest.raises(ValueError):
        dtype_from_name("Tensor")


def test_attach_rejects_unknown_kinds():
    with pytest.raises(ValueError):
        attach({"kind": "socket", "nbytes": 1})


#: a process that maps a CUDA arena, says so, and on the next line either drops it and exits or is killed holding it
_MAPPER = ("import json, os, signal, sys, torch\n"
           "from solbench.evaluate.boundary.arena import attach\n"
           "buf = attach(json.loads(sys.stdin.readline()))\n"
           "buf[:256].fill_(7)\n"
           "torch.cuda.synchronize()\n"
           "print('mapped', flush=True)\n"
           "sys.stdin.readline()\n"
           "if sys.argv[1] == 'killed':\n"
           "    os.kill(os.getpid(), signal.SIGKILL)\n"
           "del buf\n"
           "torch.cuda.synchronize()\n")


@pytest.mark.gpu
def test_a_cuda_arena_a_killed_process_mapped_stays_held_and_one_handed_back_does_not(tmp_path):
    """torch frees an arena lent by CUDA IPC only once the process that mapped it has closed its mapping: one killed
    holding it leaves the memory with the trusted side for good, and ``held_bytes`` (what the worker's retirement
    reads: ``worker._held``) sees it; one that handed it back, or one never sent, leaves nothing."""
    from solbench.evaluate.boundary.arena import held_bytes

    size = 64 << 20
    arena = Arena(size, torch.device("cuda"), tmp_path)  # never sent: never exported, nothing to hand back
    before = held_bytes() - size
    arena.close()
    assert held_bytes() - before <= 0
    for end in ("handed_back", "killed"):
        arena = Arena(size, torch.device("cuda"), tmp_path)
        before = held_bytes() - size  # this arena is open: it counts until it is closed
        proc = subprocess.Popen([sys.executable, "-c", _MAPPER, end], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True)
        try:
            proc.stdin.write(json.dumps(arena.handle) + "\n")
            proc.stdin.flush()
            assert proc.stdout.readline().strip() == "mapped"
            assert torch.equal(arena.buf[:256].cpu(), torch.full((256,), 7, dtype=torch.uint8))
            proc.stdin.write("\n")
            proc.stdin.flush()
            proc.wait(timeout=120)
        finally:
            proc.kill()
        arena.close()
        torch.cuda.synchronize()
        left = held_bytes() - before
        assert (left >= size) if end == "killed" else (left <= 0), (end, left)


def test_held_bytes_counts_the_live_blocks_of_the_arenas_own_pool(monkeypatch):
    """What the worker's retirement reads (``worker._held``): the allocator's live blocks in the arenas' pool, none
    of another pool's (the trusted side's own tensors), after torch has freed what was handed back."""
    from solbench.evaluate.boundary import arena as arena_mod

    collected = []
    snapshot = [{"segment_pool_id": (0, 3), "blocks": [{"size": 10, "state": "active_allocated"},
                                                       {"size": 5, "state": "inactive"}]},
                {"segment_pool_id": (0, 0), "blocks": [{"size": 100, "state": "active_allocated"}]},
                {"blocks": [{"size": 7, "state": "active_allocated"}]}]  # a torch that does not name the pool
    monkeypatch.setattr(arena_mod, "_pool", type("Pool", (), {"id": (0, 3)})())
    monkeypatch.setattr(torch.cuda, "ipc_collect", lambda: collected.append(True))
    monkeypatch.setattr(torch.cuda, "memory_snapshot", lambda pool: snapshot if pool == (0, 3) else [])
    assert arena_mod.held_bytes() == 17 and collected
    monkeypatch.setattr(torch.cuda, "memory_snapshot", lambda pool: 1 / 0)
    assert arena_mod.held_bytes() == 0  # an allocator that cannot say: nothing is known to be held
    monkeypatch.setattr(arena_mod, "_pool", None)
    assert arena_mod.held_bytes() == 0  # no arena was ever lent by CUDA IPC


def test_an_arena_comes_from_the_arenas_pool_on_its_own_device(monkeypatch):
    """torch enters a memory pool for the current device only: the arenas' pool is entered with the arena's device
    current, so an arena on another device than the current one (``--device cuda:1``) is not cut from the trusted
    side's own pool, whose segments its IPC mapping would cover."""
    import contextlib

    from solbench.evaluate.boundary import arena as arena_mod

    current, seen = [0], []

    @contextlib.contextmanager
    def device(dev):
        before, current[0] = current[0], torch.device(dev).index
        try:
            yield
        finally:
            current[0] = before

    @contextlib.contextmanager
    def use_mem_pool(pool):
        seen.append(("pool", current[0]))
        yield

    monkeypatch.setattr(arena_mod, "_pool", None)
    monkeypatch.setattr(torch.cuda, "device", device)
    monkeypatch.setattr(torch.cuda, "MemPool", lambda: object(), raising=False)
    monkeypatch.setattr(torch.cuda, "use_mem_pool", use_mem_pool, raising=False)
    with arena_mod._ipc_pool_context(torch.device("cuda:1")):
        seen.append(("alloc", current[0]))
    assert seen == [("pool", 1), ("alloc", 1)] and current[0] == 0
