"""API tokens: stored hashed, each with a priority, a quota and a rate limit.

A token is ``sb_`` and 32 random bytes (URL-safe), shown once when it is made; the database keeps its SHA-256
(a random secret of that length needs no slow hash). ``quota``: jobs a token may submit in any 24 hours (0: no
limit); ``rate``: requests a minute (a token bucket of that size, refilled evenly); ``priority``: its jobs'
place in the queue; ``uploads``: it may upload problems, whose reference code the trusted side runs (give it
only to those who may write problems). A revoked token is kept, for the record, and refused.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from solbench.errors import UserError

SCHEMA = """
CREATE TABLE IF NOT EXISTS api_tokens (
    name TEXT PRIMARY KEY,
    digest TEXT NOT NULL UNIQUE,
    created TEXT NOT NULL,
    priority INTEGER NOT NULL DEFAULT 0,
    quota INTEGER NOT NULL DEFAULT 0,
    rate INTEGER NOT NULL DEFAULT 600,
    uploads INTEGER NOT NULL DEFAULT 0,
    revoked TEXT
);
"""
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


@dataclass(frozen=True)
class Token:
    name: str
    priority: int = 0
    quota: int = 0
    rate: int = 600
    uploads: bool = False


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class Tokens:
    def __init__(self, path: str | Path):
        self.conn = sqlite3.connect(str(path), timeout=30, check_same_thread=False)
        self.conn.executescript(SCHEMA)
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, float]] = {}  # name -> (tokens left, when counted)

    def add(self, name: str, priority: int = 0, quota: int = 0, rate: int = 600, uploads: bool = False) -> str:
        """Make a token; returns its secret (shown once)."""
        if not _NAME.match(name):
            raise UserError(f"token name {name!r}: letters, digits, '.', '_' and '-' only, 64 at most")
        secret = "sb_" + secrets.token_urlsafe(32)
        with self._lock:
            try:
                self.conn.execute("INSERT INTO api_tokens (name, digest, created, priority, quota, rate, uploads) "
                                  "VALUES (?,?,?,?,?,?,?)", (name, digest(secret), time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                                             priority, quota, rate, int(uploads)))
                self.conn.commit()
            except sqlite3.IntegrityError:
                raise UserError(f"a token named {name!r} exists: revoke it or choose another name") from None
        return secret

    def revoke(self, name: str) -> None:
        with self._lock:
            n = self.conn.execute("UPDATE api_tokens SET revoked=? WHERE name=? AND revoked IS NULL",
                                  (time.strftime("%Y-%m-%dT%H:%M:%S%z"), name)).rowcount
            self.conn.commit()
        if not n:
            raise UserError(f"no live token named {name!r}")

    def listing(self) -> list[dict]:
        with self._lock:
            rows = self.conn.execute("SELECT name, created, priority, quota, rate, uploads, revoked FROM api_tokens "
                                     "ORDER BY name").fetchall()
        return [dict(zip(("name", "created", "priority", "quota", "rate", "uploads", "revoked"), r)) for r in rows]

    def any(self) -> bool:
        with self._lock:
            return self.conn.execute("SELECT 1 FROM api_tokens WHERE revoked IS NULL LIMIT 1").fetchone() is not None

    def check(self, secret: str | None) -> Token | None:
        """The live token whose secret this is, or None."""
        if not secret:
            return None
        with self._lock:
            row = self.conn.execute("SELECT name, priority, quota, rate, uploads FROM api_tokens WHERE digest=? AND "
                                    "revoked IS NULL", (digest(secret),)).fetchone()
        if row is None:
            return None
        return Token(row[0], row[1], row[2], row[3], bool(row[4]))

    def secret(self) -> bytes:
        """The service's own secret (made once, kept in the database): seeds of seed groups derive from it."""
        with self._lock:
            self.conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            self.conn.execute("INSERT OR IGNORE INTO meta VALUES ('service_secret', ?)", (secrets.token_hex(32),))
            self.conn.commit()
            return bytes.fromhex(self.conn.execute("SELECT value FROM meta WHERE key='service_secret'").fetchone()[0])

    def allow(self, token: Token, now: float | None = None) -> float:
        """Take one request from the token's bucket: 0 where allowed, else the seconds until one is."""
        now = time.monotonic() if now is None else now
        per_s = token.rate / 60.0
        with self._lock:
            left, then = self._buckets.get(token.name, (float(token.rate), now))
            left = min(float(token.rate), left + (now - then) * per_s)
            if left < 1.0:
                self._buckets[token.name] = (left, now)
                return (1.0 - left) / per_s if per_s > 0 else 60.0
            self._buckets[token.name] = (left - 1.0, now)
        return 0.0
