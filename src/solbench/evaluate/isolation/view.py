"""What a candidate's filesystem shows: the directories its sandbox hides and what it still reads under them."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from solbench import caches
from solbench.evaluate.languages import packages
from solbench.evaluate.trusted import keeper


def sandbox_view(store=None, device: str = "cpu") -> dict[str, list[str]]:
    """What a candidate's filesystem hides, and what it still reads under a hidden directory (``namespaces``):
    the temporary directories (every evaluation's and the trusted worker's files), the solution cache and the
    results database are hidden; the Python installation and the module path stay readable. On the GPU /dev/shm
    stays as it is, since CUDA's IPC keeps its files there."""
    gpu = device != "cpu"
    hidden = {tempfile.gettempdir(), "/tmp", "/var/tmp", str(caches.root())} | (set() if gpu else {"/dev/shm"})
    if store is not None and getattr(store, "path", None):
        db = Path(store.path).resolve()
        hidden.update(str(db) + suffix for suffix in ("", "-wal", "-shm", "-journal"))
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    readable = set(prefixes) | {os.path.dirname(os.path.realpath(sys.executable))}
    # installed packages only: not the runner's script directory, its cwd or anything else on its path
    readable.update(p for p in sys.path if p and os.path.isdir(p) and (
        os.path.basename(p.rstrip("/")) in ("site-packages", "dist-packages")
        or any(os.path.realpath(p).startswith(pre + os.sep) for pre in prefixes)))
    readable.update(keeper.module_paths())
    lang_root = packages.root()  # the kernel languages' own package folders
    if lang_root is not None and lang_root.is_dir():
        readable.add(str(lang_root))
    readable.update(p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p and os.path.isdir(p))
    return {"hidden": sorted(hidden), "readable": sorted(os.path.realpath(p) for p in readable),
            "writable": ["/dev/shm"] if gpu else []}
