"""``solbench runs`` (the stored runs) and ``solbench show-run ID`` (one run's evaluations again: the listing,
JSON, or CSV with a row per workload)."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import typer

from solbench.cli_options import DbOption, WideOption, out, print_evaluations
from solbench.errors import UserError

#: a workload's fields in ``show-run --csv``
CSV_FIELDS = ("run", "evaluation", "problem", "solution", "language", "hardware", "workload", "verdict", "reasons",
              "why", "time_ms", "baseline_ms", "baseline", "sol_ms", "bound", "sol_score", "max_abs_err")


def runs(db: Path = DbOption, limit: int = typer.Option(20, min=1, help="the latest N runs"),
         as_json: bool = typer.Option(False, "--json")) -> None:
    """The stored runs, newest first: when, on what, how they ended, and their evaluations' verdicts.

    Example: `solbench runs`, then `solbench show-run 3`."""
    from rich.table import Table

    from solbench.store.db import Store

    rows = Store(_existing(db)).runs(limit)
    if as_json:
        print(json.dumps(rows, indent=1))
        return
    if not rows:
        out.print(f"no runs in {db}: `solbench run` makes one")
        return
    table = Table("run", "started", "status", "on", "evaluations", "passed", title=f"runs in {db}", box=None)
    for r in rows:
        table.add_row(str(r["id"]), (r["started"] or "")[:16].replace("T", " "), r["status"],
                      f"{r['device']} ({r['hardware']})", str(r["evaluations"]),
                      f"{r['passed']}" + (f" ({r['unsupported']} unsupported)" if r["unsupported"] else ""))
    out.print(table)


def show_run(run_id: int = typer.Argument(..., help="the run's id (`solbench runs` lists them)"),
             db: Path = DbOption, as_json: bool = typer.Option(False, "--json", help="the evaluations as JSON"),
             as_csv: bool = typer.Option(False, "--csv", help="one row per workload, CSV"),
             wide: bool = WideOption) -> None:
    """One stored run's evaluations again, as `solbench run` showed them.

    Example: `solbench show-run 3 --csv > run3.csv`."""
    from solbench.report.table import run_summary
    from solbench.report.why import workload_why
    from solbench.store.db import Store

    store = Store(_existing(db))
    run = store.run(run_id)
    evaluations = [store.evaluation(i)[0] for i in store.evaluation_ids(run_id=run_id)]
    if as_json:
        print(json.dumps([e.public() for e in evaluations], indent=1, default=str))
        return
    if as_csv:
        writer = csv.DictWriter(sys.stdout, CSV_FIELDS)
        writer.writeheader()
        for e in evaluations:
            for w in e.workloads:
                writer.writerow({"run": run_id, "evaluation": e.id, "problem": e.problem, "solution": e.solution,
                                 "language": e.language, "hardware": e.hardware, "workload": w.uuid,
                                 "verdict": w.verdict, "reasons": " ".join(w.reasons), "why": workload_why(w) or "",
                                 **{k: getattr(w, k) for k in CSV_FIELDS[10:]}})
        return
    from solbench.report.results import clip

    out.print(clip(f"run {run_id}: {run['command'] or ''}", out.width), markup=False)
    out.print(f"started {run['started']}, {run['status']}, on {run['device']} ({run['hardware']})", markup=False)
    print_evaluations(evaluations, wide)
    out.print(run_summary(evaluations, run_id, db))


def _existing(db: Path) -> Path:
    if not db.exists():
        raise UserError(f"no results database at {db}: `solbench run` makes one, or give --db")
    return db
