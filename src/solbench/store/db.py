"""The results database (SQLite): runs, evaluations, per-workload measurements, baselines, calibrations.

Writes only ever add rows (an evaluation is never overwritten), so nothing
already stored is lost. Raw samples are kept as JSON beside their summaries.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from solbench.errors import UserError
from solbench.records.verdict import Evaluation, WorkloadResult

SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    started TEXT NOT NULL,
    finished TEXT,
    command TEXT,
    device TEXT,
    hardware TEXT,
    environment TEXT,
    status TEXT
);
CREATE TABLE IF NOT EXISTS evaluations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER REFERENCES runs(id),
    created TEXT NOT NULL,
    problem TEXT NOT NULL,
    problem_dir TEXT,
    problem_digest TEXT,
    solution TEXT NOT NULL,
    solution_digest TEXT,
    solution_json TEXT,
    language TEXT,
    author TEXT,
    hardware TEXT,
    device TEXT,
    device_name TEXT,
    verdict TEXT NOT NULL,
    reasons TEXT,
    warnings TEXT,
    message TEXT,
    sol_score REAL,
    seed TEXT,
    environment TEXT,
    elapsed_s REAL,
    log TEXT,
    summary TEXT
);
CREATE TABLE IF NOT EXISTS measurements (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    evaluation_id INTEGER NOT NULL REFERENCES evaluations(id),
    workload TEXT NOT NULL,
    verdict TEXT NOT NULL,
    reasons TEXT,
    time_ms REAL,
    iqr_ms REAL,
    n_samples INTEGER,
    samples_ms TEXT,
    wall_ms TEXT,
    graph_ms REAL,
    eager_ms REAL,
    compile_ms REAL,
    baseline_file_ms REAL,
    baseline_ms REAL,
    baseline TEXT,
    sol_ms REAL,
    calibrated_sol_ms REAL,
    bound TEXT,
    sol_score REAL,
    max_abs_err REAL,
    max_rel_err REAL,
    failure TEXT,
    clocks TEXT,
    peak_memory_bytes INTEGER,
    detail TEXT
);
CREATE INDEX IF NOT EXISTS measurements_eval ON measurements(evaluation_id);
CREATE TABLE IF NOT EXISTS baselines (
    problem_digest TEXT NOT NULL,
    workload TEXT NOT NULL,
    device_name TEXT NOT NULL,
    software TEXT NOT NULL,
    kind TEXT NOT NULL,
    verdict TEXT NOT NULL,
    time_ms REAL,
    samples_ms TEXT,
    created TEXT NOT NULL,
    message TEXT,
    PRIMARY KEY (problem_digest, workload, device_name, software, kind)
);
CREATE TABLE IF NOT EXISTS calibrations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created TEXT NOT NULL,
    hardware TEXT NOT NULL,
    device_name TEXT,
    data TEXT NOT NULL
);
"""


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def _add_missing_columns(conn: sqlite3.Connection) -> None:
    """Bring a database written by an older solbench up to SCHEMA: add the columns it lacks.

    Columns are only ever added (with NULL in old rows), never dropped or retyped, so stored rows survive. A
    column that cannot be added that way (part of a key, or NOT NULL without a default) is a UserError.
    """
    model = sqlite3.connect(":memory:")
    model.executescript(SCHEMA)
    tables = [r[0] for r in model.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    for table in tables:
        have = {r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')}
        for _, name, kind, notnull, default, key in model.execute(f'PRAGMA table_info("{table}")'):
            if name in have:
                continue
            if key or (notnull and default is None):
                raise UserError(f"the database was written by an older solbench and its table {table} lacks the "
                                f"key or required column {name}: use a new --db")
            try:
                conn.execute(f'ALTER TABLE "{table}" ADD COLUMN "{name}" {kind}')
            except sqlite3.OperationalError as exc:
                if "duplicate column" not in str(exc):  # another process added it first
                    raise
    model.close()


class Store:
    """``shared``: the connection may be used from several threads (the caller serialises its use)."""

    def __init__(self, path: str | Path = "solbench.db", shared: bool = False):
        self.path = Path(path)
        if self.path.exists() and self.path.is_dir():
            raise UserError(f"--db {self.path} is a directory")
        try:
            self.conn = sqlite3.connect(str(self.path), timeout=30, check_same_thread=not shared)
            self.conn.executescript(SCHEMA)
            _add_missing_columns(self.conn)
            self.conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            self.conn.commit()
        except sqlite3.DatabaseError as exc:
            raise UserError(f"{self.path}: not a solbench database ({exc})") from None

    def close(self) -> None:
        self.conn.close()

    # ---- runs --------------------------------------------------------------
    def start_run(self, command: str, device: str, hardware: str, environment: dict[str, Any] | None = None) -> int:
        cur = self.conn.execute(
            "INSERT INTO runs (started, command, device, hardware, environment) VALUES (?,?,?,?,?)",
            (_now(), command, device, hardware, json.dumps(environment or {})),
        )
        self.conn.commit()
        return int(cur.lastrowid)

    def finish_run(self, run_id: int, status: str = "finished") -> None:
        """End a run: ``finished``, or ``interrupted`` (Ctrl-C: its evaluations so far are kept)."""
        self.conn.execute("UPDATE runs SET finished=?, status=? WHERE id=?", (_now(), status, run_id))
        self.conn.commit()

    def runs(self, limit: int = 50) -> list[dict[str, Any]]:
        """The latest runs, newest first, with their evaluations' counts."""
        return self._runs("1=1", (), limit)

    def run(self, run_id: int) -> dict[str, Any]:
        found = self._runs("r.id=?", (run_id,), 1)
        if not found:
            raise UserError(f"no run {run_id} in {self.path}: `solbench runs` lists them")
        return found[0]

    def _runs(self, where: str, args: tuple, limit: int) -> list[dict[str, Any]]:
        rows = self.conn.execute(
            "SELECT r.id, r.started, r.finished, r.status, r.command, r.device, r.hardware, COUNT(e.id), "
            "SUM(e.verdict='passed'), SUM(e.verdict='unsupported') FROM runs r LEFT JOIN evaluations e "
            f"ON e.run_id = r.id WHERE {where} GROUP BY r.id ORDER BY r.id DESC LIMIT ?", (*args, limit)).fetchall()
        keys = ("id", "started", "finished", "status", "command", "device", "hardware", "evaluations", "passed",
                "unsupported")
        out = [dict(zip(keys, r)) for r in rows]
        for r in out:  # a run without a status: finished where it has an end (older databases), else unfinished
            r["status"] = r["status"] or ("finished" if r["finished"] else "unfinished")
            r["passed"], r["unsupported"] = r["passed"] or 0, r["unsupported"] or 0
        return out

    # ---- evaluations ---------------------------------------------------------
    def add_evaluation(self, ev: Evaluation, solution_json: str, run_id: int | None = None) -> int:
        eid = insert_evaluation(self.conn, ev, solution_json, run_id)
        self.conn.commit()
        return eid

    def evaluation(self, eid: int) -> tuple[Evaluation, str]:
        row = self.conn.execute(
            "SELECT problem, problem_dir, problem_digest, solution, solution_digest, solution_json, language, author,"
            " hardware, device, device_name, verdict, reasons, warnings, message, sol_score, seed, environment,"
            " elapsed_s, created, summary, log FROM evaluations WHERE id=?", (eid,)).fetchone()
        if row is None:
            raise UserError(f"no evaluation with id {eid} in {self.path}")
        summary = json.loads(row[20] or "{}")
        workloads = []
        for (detail, samples, wall, clocks) in self.conn.execute(
                "SELECT detail, samples_ms, wall_ms, clocks FROM measurements WHERE evaluation_id=? ORDER BY id", (eid,)):
            w = WorkloadResult.model_validate_json(detail)
            w.samples_ms = json.loads(samples or "[]")
            w.wall_ms = json.loads(wall or "[]")
            w.clocks = json.loads(clocks or "[]")
            workloads.append(w)
        ev = Evaluation(
            id=eid, problem=row[0], problem_dir=row[1] or "", problem_digest=row[2] or "", solution=row[3],
            solution_digest=row[4] or "", language=row[6] or "", author=row[7], hardware=row[8] or "",
            device=row[9] or "", device_name=row[10], verdict=row[11], reasons=json.loads(row[12] or "[]"),
            warnings=json.loads(row[13] or "[]"), message=row[14], sol_score=row[15],
            seed=int(row[16]) if row[16] else None, environment=json.loads(row[17] or "{}"), elapsed_s=row[18],
            started=row[19], workloads=workloads, mean_speedup_vs_eager=summary.get("mean_speedup_vs_eager"),
            fast_p=summary.get("fast_p") or {}, findings=summary.get("findings") or [],
            phases=summary.get("phases") or {}, log=row[21] or "",
        )
        return ev, row[5]

    def evaluation_ids(self, problem: str | None = None, run_id: int | None = None) -> list[int]:
        q = "SELECT id FROM evaluations WHERE 1=1"
        args: list[Any] = []
        if problem:
            q += " AND problem=?"
            args.append(problem)
        if run_id is not None:
            q += " AND run_id=?"
            args.append(run_id)
        return [r[0] for r in self.conn.execute(q + " ORDER BY id", args)]

    # ---- baselines -------------------------------------------------------------
    def get_baseline(self, problem_digest: str, workload: str, device_name: str, software: str, kind: str):
        row = self.conn.execute(
            "SELECT verdict, time_ms, message FROM baselines WHERE problem_digest=? AND workload=? AND device_name=?"
            " AND software=? AND kind=?", (problem_digest, workload, device_name, software, kind)).fetchone()
        return None if row is None else {"verdict": row[0], "time_ms": row[1], "message": row[2]}

    def baseline_measured(self, problem_digest: str, workload: str, kind: str, harness: str) -> bool:
        """Whether a baseline of ``kind`` is stored for the workload, measured by the harness of digest ``harness``
        on any device and software (``compile_ahead``: whether the run will compile it)."""
        return self.conn.execute(
            "SELECT 1 FROM baselines WHERE problem_digest=? AND workload=? AND kind=? AND instr(software, ?) > 0"
            " LIMIT 1", (problem_digest, workload, kind, f"harness={harness}")).fetchone() is not None

    def put_baseline(self, problem_digest: str, workload: str, device_name: str, software: str, kind: str,
                     verdict: str, time_ms: float | None, samples: list[float], message: str | None = None) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO baselines VALUES (?,?,?,?,?,?,?,?,?,?)",
            (problem_digest, workload, device_name, software, kind, verdict, time_ms, json.dumps(samples), _now(),
             message))
        self.conn.commit()

    # ---- calibrations ------------------------------------------------------------
    def add_calibration(self, hardware: str, device_name: str | None, data: dict[str, Any]) -> int:
        cur = self.conn.execute("INSERT INTO calibrations (created, hardware, device_name, data) VALUES (?,?,?,?)",
                                (_now(), hardware, device_name, json.dumps(data)))
        self.conn.commit()
        return int(cur.lastrowid)

    def latest_calibration(self, hardware: str) -> dict[str, Any] | None:
        row = self.conn.execute("SELECT data FROM calibrations WHERE hardware=? ORDER BY id DESC LIMIT 1",
                                (hardware,)).fetchone()
        return json.loads(row[0]) if row else None


def insert_evaluation(conn: sqlite3.Connection, ev: Evaluation, solution_json: str, run_id: int | None = None) -> int:
    """Insert an evaluation and its workloads' measurements without committing: the caller's transaction holds
    them (a scheduler stores a result and marks its job done in one, so a result is stored exactly once)."""
    cur = conn.execute(
        """INSERT INTO evaluations (run_id, created, problem, problem_dir, problem_digest, solution, solution_digest,
           solution_json, language, author, hardware, device, device_name, verdict, reasons, warnings, message,
           sol_score, seed, environment, elapsed_s, log, summary)
           VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)""",
        (run_id, ev.started or _now(), ev.problem, ev.problem_dir, ev.problem_digest, ev.solution,
         ev.solution_digest, solution_json, ev.language, ev.author, ev.hardware, ev.device, ev.device_name,
         ev.verdict, json.dumps(ev.reasons), json.dumps(ev.warnings), ev.message, ev.sol_score,
         str(ev.seed) if ev.seed is not None else None, json.dumps(ev.environment), ev.elapsed_s, ev.log,
         json.dumps({"mean_speedup_vs_eager": ev.mean_speedup_vs_eager, "fast_p": ev.fast_p,
                     "findings": ev.findings, "phases": ev.phases})),
    )
    eid = int(cur.lastrowid)
    for w in ev.workloads:
        conn.execute(
            """INSERT INTO measurements (evaluation_id, workload, verdict, reasons, time_ms, iqr_ms, n_samples,
               samples_ms, wall_ms, graph_ms, eager_ms, compile_ms, baseline_file_ms, baseline_ms, baseline, sol_ms,
               calibrated_sol_ms, bound, sol_score, max_abs_err, max_rel_err, failure, clocks, peak_memory_bytes,
               detail) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)""",
            (eid, w.uuid, w.verdict, json.dumps(w.reasons), w.time_ms, w.iqr_ms, w.n_samples,
             json.dumps(w.samples_ms), json.dumps(w.wall_ms), w.graph_ms, w.eager_ms, w.compile_ms,
             w.baseline_file_ms, w.baseline_ms, w.baseline, w.sol_ms, w.calibrated_sol_ms, w.bound, w.sol_score,
             _finite(w.max_abs_err), _finite(w.max_rel_err), json.dumps(w.failure) if w.failure else None,
             json.dumps(w.clocks), w.peak_memory_bytes,
             w.model_dump_json(exclude={"samples_ms", "wall_ms", "clocks"})),
        )
    ev.id = eid
    return eid


def _finite(x: float | None) -> float | None:
    if x is None:
        return None
    import math

    return x if math.isfinite(x) else None
