"""Where solbench keeps what it derives across runs: ``$SOLBENCH_CACHE``, else ``~/.cache/solbench``.

Under it: built libraries (``build``), carried Triton caches (``triton``), counted work (``work``), the agents'
run secrets. Every candidate's and agent's sandbox hides the whole directory.
"""

from __future__ import annotations

import os
from pathlib import Path


def root() -> Path:
    """solbench's cache directory (not created here)."""
    return Path(os.environ.get("SOLBENCH_CACHE", Path.home() / ".cache" / "solbench"))
