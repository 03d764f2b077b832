"""Counted work kept across processes: a workload's ``Work`` under ``<caches.root()>/work``, keyed by everything it
is counted from.

Counting a workload traces its reference on fake tensors; the first trace in a process also imports torch's
compiler stack (about a second), and a loop-heavy reference takes seconds at a GPU shape. A count depends only on
the reference's source, the definition, the workload's axes and inputs, torch's version and solbench's counting
code (every source of ``analysis`` and ``problems``), so the key is a digest of those, and a count read back is
the count a trace would give. A file that does not read back as a count is ignored (and replaced by the next
count). Held-out shapes are never written (``count_work``'s caller says so): what lies on disk names public
workloads only, in a directory every sandbox hides. Failures are not kept: a reference that cannot be traced says
so each time.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from collections import OrderedDict
from functools import lru_cache
from pathlib import Path
from typing import Any

from solbench import caches

FORMAT = "solbench-work-1"
#: what of solbench a count can depend on: every source of these packages is part of every key (a change anywhere
#: in them counts again; a list of single modules would miss the next one a count comes to use)
COUNTING_PACKAGES = ("analysis", "problems")
COUNTING_MODULES = ("expr.py",)
MAX_ENTRIES = 20_000  # on disk; beyond this the oldest go (a count is a few hundred bytes)
MEMO_ENTRIES = 4_096  # in this process, least recently used first out (a service draws held-out shapes for ever)
_MEMO: OrderedDict[str, dict[str, Any]] = OrderedDict()  # this process's counts by key, kept on disk or not
_LOCK = threading.Lock()


def directory() -> Path:
    return caches.root() / "work"


def code_files() -> list[Path]:
    """The sources whose digest is part of every key."""
    package = Path(caches.__file__).resolve().parent
    files = [f for name in COUNTING_PACKAGES for f in (package / name).rglob("*.py")]
    return sorted(files + [package / name for name in COUNTING_MODULES])


@lru_cache(maxsize=1)
def _code() -> str:
    """A digest of torch's version and the counting code's sources."""
    import torch

    h = hashlib.sha256(f"{FORMAT}\n{torch.__version__}\n".encode())
    package = Path(caches.__file__).resolve().parent
    for path in code_files():
        h.update(f"{path.relative_to(package)}\n".encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def key(problem, workload) -> str:
    """The key of ``workload``'s count in ``problem``: every input of the count, digested."""
    parts = {"code": _code(), "reference": problem.reference_source,
             "definition": problem.definition.model_dump(mode="json"),
             "axes": workload.axes, "inputs": {k: v.model_dump(mode="json") for k, v in workload.inputs.items()}}
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _valid(data: Any) -> bool:
    return (isinstance(data, dict) and isinstance(data.get("flops"), dict)
            and all(isinstance(k, str) and isinstance(v, (int, float)) for k, v in data["flops"].items())
            and isinstance(data.get("bytes"), (int, float)) and isinstance(data.get("overridden"), list)
            and isinstance(data.get("traced"), bool) and isinstance(data.get("note"), (str, type(None))))


def load(k: str) -> dict[str, Any] | None:
    """The count kept under ``k`` (a fresh copy), or None."""
    with _LOCK:
        data = _MEMO.get(k)
    if data is None:
        try:
            data = json.loads((directory() / f"{k}.json").read_text())
        except (OSError, ValueError):
            return None
        if not _valid(data):
            return None
    _remember(k, data)
    return json.loads(json.dumps(data))


def _remember(k: str, data: dict[str, Any]) -> None:
    with _LOCK:
        _MEMO[k] = data
        _MEMO.move_to_end(k)
        while len(_MEMO) > MEMO_ENTRIES:
            _MEMO.popitem(last=False)


def keep(k: str, data: dict[str, Any], persist: bool = True) -> None:
    """Remember ``data`` in this process, and on disk where ``persist`` (never an error: a read-only cache counts
    again next time)."""
    _remember(k, json.loads(json.dumps(data)))
    if not persist:
        return
    folder = directory()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".work-", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
        os.replace(tmp, folder / f"{k}.json")
    except OSError:
        return
    if k.startswith("00"):  # about one write in 256 looks at the directory's size
        prune(folder)


def prune(folder: Path, limit: int = MAX_ENTRIES) -> int:
    """Remove the oldest counts beyond ``limit`` (and leftovers of interrupted writes); returns how many went."""
    try:
        entries = [(e.stat().st_mtime, e.path) for e in os.scandir(folder) if e.is_file(follow_symlinks=False)]
    except OSError:
        return 0
    counts = sorted((m, p) for m, p in entries if p.endswith(".json"))
    doomed = [p for _, p in counts[:max(0, len(counts) - limit)]]
    doomed += [p for _, p in entries if p.endswith(".tmp") and os.path.basename(p).startswith(".work-")]
    removed = 0
    for path in doomed:
        try:
            os.unlink(path)
            removed += 1
        except OSError:
            pass
    return removed
