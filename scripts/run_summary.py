"""The latest runs in a results database (the last one, or the last N), one line per evaluation (what each holds
so far, also for a run stopped at its time limit): problem, solution, language, verdict and reasons, seconds, and
where the time went; each run's wall time from its start to its last evaluation.

    python3 scripts/run_summary.py gpu.db [N]
"""

from __future__ import annotations

import json
import sqlite3
import sys

PHASES = ("build", "baselines", "timing.audit", "inputs", "compare", "timing.rounds")


def main(path: str, last: int = 1) -> int:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    runs = conn.execute("SELECT id, started, finished, command FROM runs ORDER BY id DESC LIMIT ?", (last,)).fetchall()
    if not runs:
        print(f"{path}: no run")
    for run in reversed(runs):
        summarize(conn, run)
    return 0


def summarize(conn: sqlite3.Connection, run: tuple) -> None:
    rows = conn.execute("SELECT problem, solution, language, verdict, reasons, elapsed_s, summary FROM evaluations "
                        "WHERE run_id = ? ORDER BY id", (run[0],)).fetchall()
    print(f"run {run[0]} started {run[1]}, {'finished ' + run[2] if run[2] else 'not finished'}: {len(rows)} "
          f"evaluations, {sum(r[5] or 0 for r in rows):.0f} s of them")
    for problem, solution, language, verdict, reasons, elapsed, summary in rows:
        phases = (json.loads(summary) or {}).get("phases", {}) if summary else {}
        spent = " ".join(f"{k}={phases[k]:.1f}" for k in PHASES if phases.get(k))
        why = ",".join(json.loads(reasons or "[]"))
        print(f"{problem:28.28} {solution:26.26} {language:9.9} {verdict:12} {why:24.24} {elapsed or 0:6.1f}s {spent}")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1))
