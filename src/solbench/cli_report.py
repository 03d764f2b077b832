"""``solbench report``: the HTML report of stored runs, agent attempts and transfer experiments (one file that
works offline), or ``--site DIR``, a folder to publish. The data is gathered here; ``report.html`` renders it."""

from __future__ import annotations

import json
import time
from functools import lru_cache
from pathlib import Path
from typing import Any, List, Optional

import typer

from solbench.cli_options import DbOption, err
from solbench.errors import UserError

#: timed samples kept per workload in the report (its spread; the database keeps them all)
MAX_SAMPLES = 400


def report(
    run: Optional[List[int]] = typer.Option(None, "--run", help="these runs (repeatable; default: every stored "
                                            "evaluation, the latest of each solution on each chip)"),
    experiment: Optional[List[str]] = typer.Option(None, "--experiment", help="agent attempts of these "
                                                   "experiments (repeatable; default: every one stored)"),
    transfer: Optional[List[Path]] = typer.Option(None, "--transfer", help="a transfer experiment's report "
                                                  "(`experiment transfer --out FILE`; repeatable)"),
    db: Path = DbOption,
    output: Path = typer.Option(Path("report.html"), "-o", "--output", help="the HTML file to write"),
    site: Optional[Path] = typer.Option(None, "--site", help="write a folder to publish instead: the page "
                                        "(-o's name, index.html by default), plotly.min.js beside it, and the "
                                        "leaderboard and evaluations as JSON"),
    title: str = typer.Option("solbench report", help="the page's title"),
) -> None:
    """An HTML report: rooflines per chip, SOL scores by family, language, chip, source and model, a sortable
    and filterable leaderboard, a section per problem, agents' metrics and transfer experiments' lifts.

    Examples: `solbench report -o report.html`, `solbench report --run 3 --run 5`,
    `solbench report --site public/`."""
    try:
        from solbench.report import html
    except ImportError:
        raise UserError("solbench report needs plotly: pip install 'solbench[report]'") from None
    if not db.exists():
        raise UserError(f"no results database at {db}: `solbench run` makes one, or give --db")
    data = gather(db, run or [], experiment or [], transfer or [])
    data["title"] = title
    if site is not None:
        written = html.site(data, site, output.name if output != Path("report.html") else "index.html")
        err.print(f"wrote {', '.join(str(p) for p in written)}")
        return
    output.write_text(html.render(data))
    err.print(f"wrote {output} ({output.stat().st_size / 1e6:.1f} MB, {len(data['evaluations'])} evaluations)")


def gather(db: Path, runs: list[int], experiments: list[str], transfers: list[Path]) -> dict[str, Any]:
    from solbench import version
    from solbench.store.db import Store

    store = Store(db)
    ids = _latest(store, [store.run(r)["id"] for r in runs])
    evaluations = [_evaluation(store.evaluation(i)[0], store) for i in ids]
    points: dict[str, list] = {}
    for e in evaluations:
        points.setdefault(e["hardware"], []).extend(_points(e))
    hardware = sorted({e["hardware"] for e in evaluations})
    runs_said = f", runs {', '.join(map(str, runs))}" if runs else ""
    return {"subtitle": f"{len(evaluations)} evaluations from {db.name}{runs_said}; made "
                        f"{time.strftime('%Y-%m-%d %H:%M %Z')} by solbench {version()}",
            "evaluations": evaluations, "points": {h: p for h, p in points.items() if p},
            "ceilings": {h: _ceilings(h, store) for h in hardware},
            "agents": _agents(db, experiments), "transfer": [_read_json(p) for p in transfers],
            "across": _across(db)}


def _latest(store, runs: list[int]) -> list[int]:
    """The latest evaluation of each solution (by name) of each problem on each chip, in ``runs`` (or all)."""
    where = f"WHERE run_id IN ({','.join('?' * len(runs))})" if runs else ""
    rows = store.conn.execute(f"SELECT MAX(id) FROM evaluations {where} GROUP BY problem, solution, hardware "
                              "ORDER BY 1", runs).fetchall()
    return [r[0] for r in rows]


@lru_cache(maxsize=None)
def _problem_meta(problem_dir: str, name: str) -> dict[str, Any]:
    from solbench.problems.problem import load_problem

    for where in (problem_dir, name):
        try:
            p = load_problem(where)
        except Exception:
            continue
        tags = p.definition.tags or []
        return {"family": p.family, "source": next((t[7:] for t in tags if t.startswith("source:")), None),
                "models": [t[6:] for t in tags if t.startswith("model:")] or None}
    return {"family": None, "source": None, "models": None}


def _evaluation(ev, store) -> dict[str, Any]:
    from solbench.records import scoring
    from solbench.report.why import evaluation_why, workload_why

    workloads = []
    for w in ev.workloads:
        flops = sum(v for v in (w.flops or {}).values() if v)
        workloads.append({"uuid": w.uuid, "verdict": w.verdict, "why": workload_why(w), "time_ms": w.time_ms,
                          "eager_ms": w.eager_ms, "compile_ms": w.compile_ms, "baseline_ms": w.baseline_ms,
                          "baseline": w.baseline, "sol_ms": w.sol_ms, "bound": w.bound, "sol_score": w.sol_score,
                          "flops": flops or None, "bytes": w.bytes, "samples_ms": list(w.samples_ms)[:MAX_SAMPLES]})
    return {"id": ev.id, "problem": ev.problem, "solution": ev.solution, "language": ev.language,
            "hardware": ev.hardware, "device": ev.device, "verdict": ev.verdict, "why": evaluation_why(ev),
            "sol_score": ev.sol_score, "speedup": scoring.geomean([w.speedup_vs_baseline for w in ev.workloads]),
            **_problem_meta(ev.problem_dir or "", ev.problem), "workloads": workloads}


def _points(e: dict[str, Any]) -> list[dict[str, Any]]:
    """The roofline's points of an evaluation: each timed workload's solution, and its baseline."""
    out = []
    for w in e["workloads"]:
        if not w["flops"] or not w["bytes"]:
            continue
        for series, ms, who in (("solution", w["time_ms"], e["solution"]),
                                ("baseline", w["baseline_ms"], w["baseline"])):
            if not ms:
                continue
            label = f"{e['problem']} / {who} / {w['uuid']}: {ms:.4g} ms, T_SOL {w['sol_ms'] or 0:.4g} ms"
            out.append({"series": series, "intensity": w["flops"] / w["bytes"],
                        "throughput": w["flops"] / (ms / 1e3), "label": f"{label}, {e['verdict']}",
                        "verdict": e["verdict"] if series == "solution" else "passed"})
    return out


def _ceilings(hw: str, store) -> dict[str, Any]:
    from solbench.hardware.registry import get_hardware

    try:
        spec = get_hardware(hw)
    except Exception:
        return {}
    sheet = spec.ceilings(scale_to_max_clock=True)
    out: dict[str, Any] = {"datasheet": {"dram_bytes_per_s": sheet.dram_bytes_per_s, "rates": sheet.rates}}
    data = store.latest_calibration(hw)
    if data:
        from solbench.hardware.calibrate import Calibration

        try:
            cal = Calibration.model_validate(data).to_ceilings(spec)
            out["calibrated"] = {"dram_bytes_per_s": cal.dram_bytes_per_s, "rates": cal.rates}
        except Exception:
            pass
    return out


def _across(db: Path) -> list[dict[str, Any]]:
    """``compare --by hardware`` and ``--by language``, where the database holds solutions on several chips or
    problems in several languages."""
    from solbench.cli_compare import compare_rows

    return [d for d in (compare_rows(db, by) for by in ("hardware", "language")) if d["rows"]]


def _agents(db: Path, experiments: list[str]) -> dict[str, Any]:
    from solbench.cli_agents import agent_rows

    keys = ("model", "language")
    rows = []
    for name in experiments or [None]:
        rows += agent_rows(db, name, keys)
    return {"rows": rows, "keys": list(keys)}


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"--transfer {path}: not a transfer report ({exc})") from None
