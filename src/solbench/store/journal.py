"""Trajectories in the results database: every prompt, reply, tool call, token count, cost and evaluation of
an agent's attempt, written as it happens, so that an interrupted run resumes without repeating a paid call.

A trajectory is keyed by its place in a run (``experiment/arm/problem/replicate``). Its events are numbered;
each is committed before the loop goes on, so a kill -9 loses at most the call in flight, never a finished one.
On resume the loop reads the recorded replies and graded submissions back in order (``Journal.recorded``)
instead of calling the model or the evaluator again.
"""

from __future__ import annotations

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
    result TEXT
);
CREATE TABLE IF NOT EXISTS trajectory_events (
    key TEXT NOT NULL REFERENCES trajectories(key),
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    created TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (key, seq)
);
"""


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def ensure(conn: sqlite3.Connection) -> None:
    conn.executescript(SCHEMA)
    conn.commit()


class Journal:
    """One trajectory's record. ``kinds``: prompt, reply, tool, submission, skill, note."""

    def __init__(self, conn: sqlite3.Connection | None, key: str, **fields: Any):
        self.conn = conn
        self.key = key
        self.memory: list[tuple[str, dict[str, Any]]] = []  # without a database: kept here only
        self._cursor: dict[str, int] = {}
        if conn is None:
            return
        ensure(conn)
        conn.execute("INSERT OR IGNORE INTO trajectories (key, experiment, arm, problem, model, language, chip, "
                     "replicate, status, created) VALUES (?,?,?,?,?,?,?,?,?,?)",
                     (key, fields.get("experiment"), fields.get("arm"), fields.get("problem", "?"),
                      fields.get("model"), fields.get("language"), fields.get("chip"), fields.get("replicate"),
                      "running", _now()))
        conn.commit()
        self.memory = [(k, json.loads(b)) for k, b in conn.execute(
            "SELECT kind, body FROM trajectory_events WHERE key=? ORDER BY seq", (key,))]
        self._resumed = len(self.memory)

    @property
    def resumed_events(self) -> int:
        return getattr(self, "_resumed", 0)

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
            self.conn.execute("INSERT INTO trajectory_events (key, seq, kind, created, body) VALUES (?,?,?,?,?)",
                              (self.key, len(self.memory) - 1, kind, _now(), json.dumps(body, default=str)))
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
            self.conn.execute("UPDATE trajectories SET status=?, finished=?, result=? WHERE key=?",
                              (status, _now(), json.dumps(result, default=str), self.key))
            self.conn.commit()


def trajectories(conn: sqlite3.Connection, experiment: str | None = None) -> list[dict[str, Any]]:
    """Every stored trajectory (of one experiment), with its events: what ``solbench export`` writes."""
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
        out.append(t)
    return out
