"""The run's secret: where it is kept, so that no agent can read it.

The held-out workloads, the input draws and the journal's seals derive from it. It lives in a file of its own,
mode 600, in a directory of mode 700 under solbench's cache (``$SOLBENCH_CACHE``, else ``~/.cache/solbench``),
which every candidate's and agent's sandbox hides: ``agent-secrets/<digest>``, the digest naming the results
database (its real path) and the experiment. It is never written to the results database. A database of an older
solbench holds it in its ``meta`` table (``agent_secret:<experiment>``); it is moved to its file on first use and
removed from the database. ``--secret`` gives it on the command line instead (nothing is stored then).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from pathlib import Path


def secret_path(db: str | os.PathLike, experiment: str) -> Path:
    from solbench import caches

    digest = hashlib.sha256(f"{os.path.realpath(db)}\0{experiment}".encode()).hexdigest()[:32]
    return caches.root() / "agent-secrets" / digest


def load(db: str | os.PathLike, experiment: str) -> int | None:
    """The stored secret of ``experiment`` in database ``db``, or None."""
    try:
        return int(secret_path(db, experiment).read_text().strip())
    except (OSError, ValueError):
        return None


def load_or_create(db: str | os.PathLike, experiment: str, conn) -> int:
    """The secret of ``experiment`` in database ``db``: its file, else the one an older solbench kept in the
    database (moved to its file), else a new random one (written to its file)."""
    found = load(db, experiment)
    if found is not None:
        return found
    name = f"agent_secret:{experiment}"
    row = conn.execute("SELECT value FROM meta WHERE key=?", (name,)).fetchone()
    value = int(row[0]) if row else secrets.randbits(62)
    value = _write(secret_path(db, experiment), value)
    conn.execute("DELETE FROM meta WHERE key=?", (name,))
    conn.commit()
    return value


def _write(path: Path, value: int) -> int:
    """Write ``value`` unless another process wrote the file first; the value the file holds."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        path.parent.chmod(0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f"{value}\n")
    try:
        os.link(tmp, path)  # fails when another process got there first: its value wins
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    return int(path.read_text().strip())
