"""``solbench import ...`` and ``solbench export``: other benchmarks' problems in, stored results out.

Parse, call the library, render; every command runs under solbench.guard (registered by cli.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from solbench.cli_options import err, out
from solbench.errors import UserError
from solbench.guard import GuardedTyper as _Typer



import_app = _Typer(help="Convert other benchmarks' problems (files you point at) into solbench problems.",
                    no_args_is_help=True, pretty_exceptions_enable=False)
import_app.prefix = "import"
ForceOption = typer.Option(False, "--force", help="replace problem directories that exist (default: refuse)")


@import_app.command("kernelbench")
def import_kernelbench_cmd(
    path: Path = typer.Argument(..., help="a KernelBench problem file, or a directory of them (levels included)"),
    out_dir: Path = typer.Option(..., "--out", help="where to write the problem directories"),
    force: bool = ForceOption,
) -> None:
    """KernelBench problem files (Model / get_inputs / get_init_inputs), every one tried: one line per file (the
    problem written, or why not), then a summary; exit 1 when any file failed."""
    from solbench.problems.kernelbench import import_kernelbench_report

    def progress(f, report):
        if report.failed and report.failed[-1][0] == f:
            out.print(f"FAILED {f}: {report.failed[-1][1]}", markup=False, soft_wrap=True)
            return
        target = report.written[-1]
        out.print(str(target), markup=False, soft_wrap=True)
        for note in report.notes.get(target, []):
            out.print(f"  note: {note}", markup=False, soft_wrap=True)

    report = import_kernelbench_report(path, out_dir, force=force, progress=progress)
    out.print(f"{len(report.written)} imported, {len(report.failed)} failed, of {report.files} KernelBench files",
              markup=False)
    if report.failed:
        raise typer.Exit(1)


@import_app.command("flashinfer-trace")
def import_flashinfer_cmd(
    path: Path = typer.Argument(..., help="a FlashInfer-Trace dataset or SOL-ExecBench problem directories"),
    out_dir: Path = typer.Option(..., "--out", help="where to write the problem directories"),
    force: bool = ForceOption,
) -> None:
    """FlashInfer-Trace / SOL-ExecBench definitions and workloads (safetensors inputs included)."""
    from solbench.problems.importers import import_flashinfer_trace

    for d in import_flashinfer_trace(path, out_dir, force=force):
        out.print(str(d), markup=False)


def export(
    db: Path = typer.Option("solbench.db", "--db", help="results database (SQLite)"),
    output: Optional[Path] = typer.Option(None, "--out", help="write here instead of stdout"),
    evaluation: Optional[List[int]] = typer.Option(None, help="only these evaluation ids"),
    problem: Optional[str] = typer.Option(None, help="only this problem"),
    trajectories: bool = typer.Option(False, "--trajectories", help="agent trajectories instead, one event per "
                                      "line (a `replay` model reads them back)"),
    experiment: Optional[str] = typer.Option(None, "--experiment", help="with --trajectories: only this one"),
) -> None:
    """Write stored results as flashinfer-trace Trace JSONL, or agent trajectories as JSONL."""
    from solbench.store.db import Store
    from solbench.store.export import traces, trajectory_lines

    if not db.exists():
        raise UserError(f"no database at {db}")
    store = Store(db)
    if trajectories:
        lines = [json.dumps(t, default=str) for t in trajectory_lines(store, experiment, problem)]
    else:
        ids = list(evaluation) if evaluation else store.evaluation_ids(problem=problem)
        lines = [json.dumps(t) for t in traces(store, ids)]
    text = "\n".join(lines) + ("\n" if lines else "")
    if output:
        output.write_text(text)
        err.print(f"wrote {len(lines)} {'events' if trajectories else 'traces'} to {output}")
    else:
        sys.stdout.write(text)
