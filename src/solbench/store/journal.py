"""Trajectories in the results database: every prompt, reply, tool call, token count, cost and evaluation of
an agent's attempt, written as it happens, so that an interrupted run resumes without repeating a paid call.

A trajectory is keyed by its place in a run (``experiment/arm/problem/replicate``). Its events are numbered;
each is committed before the loop goes on, so a kill -9 loses at most the call in flight, never a finished one.
On resume the loop reads the recorded replies and graded submissions back in order (``Journal.recorded``)
instead of calling the model or the evaluator again.

Every event and the result carry a *seal*: an HMAC-SHA256, keyed by the run's secret (:func:`seal_key`), over the
trajectory's key, the event's place and kind and the stored text. What the database holds is read back only when
every seal holds: a row written by anything without the secret (an agent that reached the database, an older
solbench, a hand edit) makes the whole trajectory *rejected*: it is kept aside under ``<key>#rejected-<n>``
(status ``rejected``, for the record) and the attempt runs again from nothing, its first event a ``note`` saying
so.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import sqlite3
import time
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS trajectories (
    key TEXT PRIMARY KEY,
    experiment TEXT,
    arm TEXT,
    problem TEXT NOT NULL,
    model TEXT,
    language TEXT,
    chip TEXT,
    replicate INTEGER,
    status TEXT NOT NULL,
    created TEXT NOT NULL,
    finished TEXT,
    result TEXT,
    seal TEXT
);
CREATE TABLE IF NOT EXISTS trajectory_events (
    key TEXT NOT NULL REFERENCES trajectories(key),
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    created TEXT NOT NULL,
    body TEXT NOT NULL,
    seal TEXT,
    PRIMARY KEY (key, seq)
);
"""


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def ensure(conn: sqlite3.Connection) -> None:
    conn.executescript(SCHEMA)
    for table in ("trajectories", "trajectory_events"):  # a database from before seals
        if "seal" not in {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}:
            try:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN seal TEXT")
            except sqlite3.OperationalError as exc:
                if "duplicate column" not in str(exc):
                    raise
    conn.commit()


def seal_key(secret: int) -> bytes:
    """The key that seals a run's trajectories, derived from the run's secret."""
    return hashlib.sha256(f"solbench-journal\0{secret}".encode()).digest()


def _mac(key: bytes, *parts: Any) -> str:
    return hmac.new(key, json.dumps(parts).encode(), hashlib.sha256).hexdigest()


def _holds(key: bytes, seal: str | None, *parts: Any) -> bool:
    return isinstance(seal, str) and hmac.compare_digest(seal, _mac(key, *parts))


def sealed(conn: sqlite3.Connection, key: str, seal: bytes) -> str | None:
    """Why the stored trajectory ``key`` is not what this run's secret sealed, or None (it is, or it is empty)."""
    row = conn.execute("SELECT status, result, seal FROM trajectories WHERE key=?", (key,)).fetchone()
    if row is None:
        return None
    for seq, kind, body, mark in conn.execute("SELECT seq, kind, body, seal FROM trajectory_events WHERE key=? "
                                              "ORDER BY seq", (key,)):
        if not _holds(seal, mark, key, seq, kind, body):
            return f"event {seq} ({kind}) is not sealed by this run's secret"
    status, result, mark = row
    if status not in ("running", "finished"):
        return f"status {status!r} was not written by solbench"
    if result is not None and not _holds(seal, mark, key, "result", status, result):
        return "the result is not sealed by this run's secret"
    if status == "finished" and result is None:
        return "a finished trajectory without a result"
    return None


class Journal:
    """One trajectory's record. ``kinds``: prompt, reply, tool, submission, skill, note. With ``seal`` (the
    run's :func:`seal_key`) everything written is sealed and what is stored is read back only when it holds."""

    def __init__(self, conn: sqlite3.Connection | None, key: str, seal: bytes | None = None, **fields: Any):
        self.conn = conn
        self.key = key
        self.seal = seal
        self.memory: list[tuple[str, dict[str, Any]]] = []  # without a database: kept here only
        self._cursor: dict[str, int] = {}
        self.rejected: dict[str, Any] | None = None  # the stored trajectory set aside, and why
        self._resumed = 0
        if conn is None:
            return
        ensure(conn)
        why = sealed(conn, key, seal) if seal is not None else None
        if why is not None:
            self.rejected = {"why": why, "moved_to": self._set_aside()}
        conn.execute("INSERT OR IGNORE INTO trajectories (key, experiment, arm, problem, model, language, chip, "
                     "replicate, status, created) VALUES (?,?,?,?,?,?,?,?,?,?)",
                     (key, fields.get("experiment"), fields.get("arm"), fields.get("problem", "?"),
                      fields.get("model"), fields.get("language"), fields.get("chip"), fields.get("replicate"),
                      "running", _now()))
        conn.commit()
        self.memory = [(k, json.loads(b)) for k, b in conn.execute(
            "SELECT kind, body FROM trajectory_events WHERE key=? ORDER BY seq", (key,))]
        self._resumed = len(self.memory)
        if self.rejected is not None:
            self.record("note", {"rejected": self.rejected})

    def _set_aside(self) -> str:
        n = 1
        while self.conn.execute("SELECT 1 FROM trajectories WHERE key=?", (f"{self.key}#rejected-{n}",)).fetchone():
            n += 1
        moved = f"{self.key}#rejected-{n}"
        with self.conn:
            self.conn.execute("UPDATE trajectory_events SET key=? WHERE key=?", (moved, self.key))
            self.conn.execute("UPDATE trajectories SET key=?, status='rejected' WHERE key=?", (moved, self.key))
        return moved

    @property
    def resumed_events(self) -> int:
        return self._resumed

    def status(self) -> str | None:
        if self.conn is None:
            return None
        row = self.conn.execute("SELECT status FROM trajectories WHERE key=?", (self.key,)).fetchone()
        return row[0] if row else None

    def result(self) -> dict[str, Any] | None:
        if self.conn is None:
            return None
        row = self.conn.execute("SELECT result FROM trajectories WHERE key=?", (self.key,)).fetchone()
        return json.loads(row[0]) if row and row[0] else None

    def record(self, kind: str, body: dict[str, Any]) -> None:
        """Append an event (committed at once where there is a database)."""
        self.memory.append((kind, body))
        self._cursor[kind] = self._cursor.get(kind, 0) + 1  # a recorded event is consumed by being written
        if self.conn is not None:
            seq, text = len(self.memory) - 1, json.dumps(body, default=str)
            mark = _mac(self.seal, self.key, seq, kind, text) if self.seal is not None else None
            self.conn.execute("INSERT INTO trajectory_events (key, seq, kind, created, body, seal) "
                              "VALUES (?,?,?,?,?,?)", (self.key, seq, kind, _now(), text, mark))
            self.conn.commit()

    def recorded(self, kind: str) -> dict[str, Any] | None:
        """The next recorded event of ``kind`` not yet read back in this run, or None (then the caller makes
        the call and records it). Events are read back in the order they were written."""
        seen = self._cursor.get(kind, 0)
        matches = [b for k, b in self.memory if k == kind]
        if seen < len(matches):
            self._cursor[kind] = seen + 1
            return matches[seen]
        return None

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        return [b for k, b in self.memory if kind is None or k == kind]

    def finish(self, result: dict[str, Any], status: str = "finished") -> None:
        if self.conn is not None:
            text = json.dumps(result, default=str)
            mark = _mac(self.seal, self.key, "result", status, text) if self.seal is not None else None
            self.conn.execute("UPDATE trajectories SET status=?, finished=?, result=?, seal=? WHERE key=?",
                              (status, _now(), text, mark, self.key))
            self.conn.commit()


def trajectories(conn: sqlite3.Connection, experiment: str | None = None,
                 seals: dict[str, bytes] | None = None) -> list[dict[str, Any]]:
    """Every stored trajectory (of one experiment), with its events: what ``solbench export`` writes. With
    ``seals`` (experiment -> :func:`seal_key`), each carries ``verified``: whether its seals hold (None where its
    experiment's key is not given)."""
    ensure(conn)
    rows = conn.execute("SELECT key, experiment, arm, problem, model, language, chip, replicate, status, created, "
                        "finished, result FROM trajectories" + (" WHERE experiment=?" if experiment else "")
                        + " ORDER BY created, key", (experiment,) if experiment else ()).fetchall()
    out = []
    names = ("key", "experiment", "arm", "problem", "model", "language", "chip", "replicate", "status", "created",
             "finished", "result")
    for row in rows:
        t = dict(zip(names, row))
        t["result"] = json.loads(t["result"]) if t["result"] else None
        t["events"] = [{"seq": s, "kind": k, "created": c, **json.loads(b)} for s, k, c, b in conn.execute(
            "SELECT seq, kind, created, body FROM trajectory_events WHERE key=? ORDER BY seq", (t["key"],))]
        if seals is not None:
            key = seals.get(t["experiment"])
            t["verified"] = None if key is None else sealed(conn, t["key"], key) is None
        out.append(t)
    return out
