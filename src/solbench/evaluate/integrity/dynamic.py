"""Dynamic integrity checks run inside the worker around every candidate call.

Each check returns reason codes (see docs/SECURITY.md); any code makes the
workload's verdict ``reward_hack``. They catch what the static scan cannot see:
timing and harness functions replaced at run time, threads or processes left
working after the call returns, inputs changed behind the reference's back,
outputs that are not plain tensors, and DSL solutions whose kernels do not do
the work (ghost replay).
"""

from __future__ import annotations

import builtins
import contextlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import torch


# ---- harness identity snapshots ---------------------------------------------------
def _harness_objects() -> dict[str, Any]:
    import sys

    from solbench.evaluate import arena, stats, timing
    from solbench.evaluate.integrity import rotation

    # the candidate's process runs as __main__ (python -m solbench.evaluate.candidate): snapshot that module
    main = sys.modules.get("__main__")
    if getattr(getattr(main, "__spec__", None), "name", None) == "solbench.evaluate.candidate":
        candidate_module = main
    else:
        from solbench.evaluate import candidate as candidate_module

    objs: dict[str, Any] = {
        "time.perf_counter": time.perf_counter, "time.perf_counter_ns": time.perf_counter_ns,
        "time.monotonic": time.monotonic, "time.time": time.time,
        "torch.Tensor.clone": torch.Tensor.clone, "torch.Tensor.to": torch.Tensor.to,
        "torch.Tensor.view": torch.Tensor.view, "torch.Tensor.equal": torch.Tensor.equal,
        "torch.equal": torch.equal, "torch.isfinite": torch.isfinite, "torch.where": torch.where,
        "torch.abs": torch.abs, "torch.sum": torch.sum, "torch.randn": torch.randn, "torch.rand": torch.rand,
        "torch.randint": torch.randint, "torch.empty": torch.empty, "torch.full": torch.full,
        "torch.Generator": torch.Generator, "torch.compile": torch.compile,
        "builtins.type": builtins.type, "builtins.isinstance": builtins.isinstance, "builtins.len": builtins.len,
        "builtins.min": builtins.min, "builtins.max": builtins.max, "builtins.sorted": builtins.sorted,
        "builtins.float": builtins.float, "json.dumps": json.dumps, "os.write": os.write, "os.fdopen": os.fdopen,
    }
    if hasattr(torch, "cuda"):  # the classes exist in CPU builds too, and patching them is the same intent
        objs.update({
            "torch.cuda.Event": torch.cuda.Event, "torch.cuda.Event.record": torch.cuda.Event.record,
            "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
            "torch.cuda.Event.synchronize": torch.cuda.Event.synchronize,
            "torch.cuda.synchronize": torch.cuda.synchronize, "torch.cuda.current_stream": torch.cuda.current_stream,
            "torch.cuda.graph": torch.cuda.graph, "torch.cuda.CUDAGraph.replay": torch.cuda.CUDAGraph.replay,
            "torch.cuda.Stream.__new__": vars(torch.cuda.Stream).get("__new__"),
            "torch.cuda.Stream.wait_stream": torch.cuda.Stream.wait_stream,
        })
    from solbench.evaluate.integrity import l2

    for module in (arena, stats, timing, rotation, l2):
        for name, value in vars(module).items():
            if callable(value) and getattr(value, "__module__", None) == module.__name__:
                objs[f"{module.__name__}.{name}"] = value
    objs["solbench.evaluate.timing.Flusher.__call__"] = timing.Flusher.__call__
    for cls in (rotation.TimedInputs, candidate_module.Channel, candidate_module.Candidate, l2.L2Guard):
        for name, value in vars(cls).items():
            if callable(value):
                objs[f"{cls.__module__}.{cls.__name__}.{name}"] = value
    from solbench.evaluate import calls

    objs["calls.as_list"] = calls.as_list
    return objs


def _fingerprint(value: Any) -> tuple:
    """Identity of an object and of the code it runs (a function's __code__ can be swapped in place)."""
    code = getattr(value, "__code__", None) or getattr(getattr(value, "__func__", None), "__code__", None)
    return (id(value), id(code) if code is not None else None,
            id(getattr(value, "__defaults__", None)) if code is not None else None)


_extra: dict[str, Any] = {}


def watch(**objects: Any) -> None:
    """Add objects of the trusted side (the reference's run, say) to every later snapshot."""
    _extra.update(objects)


def snapshot() -> dict[str, tuple]:
    objs = _harness_objects()
    for name, value in _extra.items():
        objs[f"watched.{name}"] = value
        module = getattr(value, "__module__", None)
        mod = __import__("sys").modules.get(module) if module else None
        if mod is not None:
            objs[f"watched.{name}@module"] = getattr(mod, getattr(value, "__name__", ""), None)
    return {k: _fingerprint(v) for k, v in objs.items()}


def tampered(before: dict[str, tuple]) -> list[str]:
    """Names of harness objects whose identity or code changed since ``before``."""
    now = snapshot()
    return sorted(k for k, v in before.items() if now.get(k) != v)


# ---- threads and processes ------------------------------------------------------------
def _defined_in(obj: Any, staged: str) -> bool:
    code = getattr(obj, "__code__", None)
    if code is not None and code.co_filename.startswith(staged):
        return True
    func = getattr(obj, "__func__", None)
    if func is not None:
        return _defined_in(func, staged)
    cls = obj if isinstance(obj, type) else None
    if cls is not None:
        module = __import__("sys").modules.get(cls.__module__)
        return bool(module and getattr(module, "__file__", "") and module.__file__.startswith(staged))
    return False


def candidate_threads(before: set[int], staged: str) -> list[str]:
    """Live Python threads started since ``before`` whose code is the candidate's own."""
    found = []
    for t in threading.enumerate():
        if t.ident in before or not t.is_alive():
            continue
        targets = [getattr(t, "_target", None), getattr(t, "function", None), type(t)]
        run = type(t).run
        if run is not threading.Thread.run:
            targets.append(run)
        if any(x is not None and _defined_in(x, staged) for x in targets):
            found.append(t.name)
    return found


def thread_idents() -> set[int]:
    return {t.ident for t in threading.enumerate() if t.ident is not None}


def child_processes() -> list[int]:
    """Live children of this process (any thread's)."""
    kids: list[int] = []
    task_dir = Path(f"/proc/{os.getpid()}/task")
    try:
        for task in task_dir.iterdir():
            try:
                text = (task / "children").read_text().split()
            except OSError:
                continue
            kids.extend(int(x) for x in text)
    except OSError:
        return []
    alive = []
    for pid in kids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.append(pid)
    return alive


# ---- inputs and outputs -----------------------------------------------------------------------
def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return torch.equal(a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8))


def mutated_inputs(pristine: list[Any], used: list[Any], names: list[str], allowed: set[str]) -> list[str]:
    """Inputs (other than declared in-place ones) whose contents differ from their pristine copies."""
    changed = []
    for name, p, u in zip(names, pristine, used):
        if name in allowed or not isinstance(p, torch.Tensor):
            continue
        if not isinstance(u, torch.Tensor) or not _same_bits(p, u):
            changed.append(name)
    return changed


def not_plain_tensor(x: Any) -> str | None:
    """Why ``x`` is not an honest output tensor (a subclass, a lazy wrapper, no real storage), or None."""
    if not isinstance(x, torch.Tensor):
        return None  # a wrong type is judged by the correctness check
    if type(x) is not torch.Tensor:
        return f"output is a {type(x).__name__}, a torch.Tensor subclass"
    if x.is_meta or x.device.type == "meta":
        return "output has no real storage"
    try:
        if x.numel() and x.untyped_storage().nbytes() == 0:
            return "output has no real storage"
    except (RuntimeError, NotImplementedError):
        return "output has no real storage"
    return None


# ---- ghost replay (language proof for DSL solutions) -------------------------------------------
@contextlib.contextmanager
def ghost_mode() -> Iterator[None]:
    """Triton kernels launch as no-ops and fresh allocations are filled with NaN (so stale memory cannot pass)."""
    patches: list[tuple[Any, str, Any]] = []

    def patch(owner: Any, name: str, value: Any) -> None:
        patches.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)

    try:
        from triton.runtime.jit import JITFunction

        patch(JITFunction, "run", lambda self, *a, **k: None)
    except ImportError:
        pass
    try:
        from triton.runtime.interpreter import InterpretedFunction

        patch(InterpretedFunction, "run", lambda self, *a, **k: None)
    except ImportError:
        pass

    def poisoned(fn: Callable) -> Callable:
        def alloc(*args, **kwargs):
            t = fn(*args, **kwargs)
            if t.is_floating_point():
                t.fill_(float("nan"))
            elif t.dtype != torch.bool:
                t.fill_(-1)
            return t
        return alloc

    for name in ("empty", "empty_like", "empty_strided"):
        patch(torch, name, poisoned(getattr(torch, name)))
    patch(torch.Tensor, "new_empty", poisoned(torch.Tensor.new_empty))
    try:
        yield
    finally:
        for owner, name, value in reversed(patches):
            setattr(owner, name, value)


def ghost_unchanged(real: list[Any], ghost: list[Any]) -> bool:
    """True when the no-op-kernel run produced the same outputs: the DSL kernels did not do the work."""
    tensors = [(r, g) for r, g in zip(real, ghost) if isinstance(r, torch.Tensor)]
    if not tensors or len(real) != len(ghost):
        return False
    for r, g in tensors:
        if not isinstance(g, torch.Tensor) or r.shape != g.shape or r.dtype != g.dtype:
            return False
        if r.is_floating_point() and not bool(torch.isfinite(g).all()):
            return False
        if not _same_bits(r, g):
            return False
    return True
