"""``solbench compare``: the same solutions across platforms (``--by hardware``), or the same problem across
languages (``--by language``), from one results database holding runs from many chips.

``compare_rows`` reads the database and returns plain dicts (what ``--json`` prints); ``compare`` is the command
(cli.py registers it under a GuardedTyper, so a UserError is one line and exit 2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer

from solbench.errors import UserError

BY = ("hardware", "language")


def _platform(env_json: str | None) -> dict[str, Any]:
    try:
        env = json.loads(env_json or "{}")
    except (TypeError, ValueError):
        return {}
    rec = env.get("platform") if isinstance(env, dict) else None
    return rec if isinstance(rec, dict) else {}


def _columns(evs: list[dict[str, Any]]) -> None:
    """Give every evaluation its chip's column ("hw"): the hardware id, split by device name or platform id only
    where one hardware id holds several (two machines scored against the generic "cpu" entry, or two vendors'
    unknown GPUs); an evaluation that recorded neither (a static reject) stays under the bare id."""
    seen: dict[str, tuple[set, set]] = {}
    for e in evs:
        names, plats = seen.setdefault(e["hardware"], (set(), set()))
        names.update([e["device_name"]] if e["device_name"] else [])
        plats.update([e["platform"]] if e["platform"] else [])
    for e in evs:
        names, plats = seen[e["hardware"]]
        extra = [x for x, many in ((e["device_name"], len(names) > 1), (e["platform"], len(plats) > 1)) if many and x]
        if e["device"] == "cpu" and e["hardware"] != "cpu":  # scored against a chip's ceilings, run on the CPU
            extra.append("ran on the CPU")
        e["hw"] = e["hardware"] + (f" ({', '.join(extra)})" if extra else "")


def _evaluations(db: Path, problem: str | None) -> list[dict[str, Any]]:
    from solbench.store.db import Store

    if not Path(db).exists():
        raise UserError(f"no database at {db}")
    store = Store(db)
    try:
        q = ("SELECT id, problem, problem_digest, solution, solution_digest, language, hardware, device, device_name,"
             " verdict, sol_score, environment, summary, created FROM evaluations")
        rows = store.conn.execute(q + (" WHERE problem=?" if problem else "") + " ORDER BY id",
                                  (problem,) if problem else ()).fetchall()
    finally:
        store.close()
    out = []
    for (eid, prob, pdig, sol, sdig, lang, hw, dev, dname, verdict, score, env, summary, created) in rows:
        try:
            speedup = json.loads(summary or "{}").get("mean_speedup_vs_eager")
        except (TypeError, ValueError, AttributeError):
            speedup = None
        plat = _platform(env)
        out.append({"id": eid, "problem": prob, "problem_digest": pdig or "", "solution": sol,
                    "solution_digest": sdig or f"name:{sol}", "language": lang or "?", "hardware": hw or "?",
                    "device": dev, "device_name": dname, "platform": plat.get("id"), "verdict": verdict,
                    "sol_score": score, "mean_speedup": speedup, "created": created})
    _columns(out)
    return out


def _cell(e: dict[str, Any], n: int) -> dict[str, Any]:
    return {"verdict": e["verdict"], "sol_score": e["sol_score"], "mean_speedup": e["mean_speedup"],
            "hardware": e["hardware"], "device_name": e["device_name"], "platform": e["platform"],
            "evaluation_id": e["id"], "evaluations": n}


def by_hardware(evs: list[dict[str, Any]]) -> dict[str, Any]:
    """Every solution (by digest) evaluated on more than one chip: its latest evaluation on each."""
    groups: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = {}
    for e in evs:
        groups.setdefault((e["problem"], e["solution_digest"]), {}).setdefault(e["hw"], []).append(e)
    rows, columns = [], set()
    for (prob, digest), per in groups.items():
        if len(per) < 2:
            continue
        latest = {k: max(v, key=lambda e: e["id"]) for k, v in per.items()}
        first = max(latest.values(), key=lambda e: e["id"])
        columns.update(per)
        rows.append({"problem": prob, "solution": first["solution"], "solution_digest": digest,
                     "language": first["language"],
                     "hardware": {k: _cell(latest[k], len(per[k])) for k in sorted(per)}})
    rows.sort(key=lambda r: (r["problem"], r["solution"], r["solution_digest"]))
    return {"by": "hardware", "columns": sorted(columns), "rows": rows}


def by_language(evs: list[dict[str, Any]]) -> dict[str, Any]:
    """Every problem evaluated in more than one language on one chip: the best SOL score per language (a passed
    evaluation before any other: ``unsupported`` never counts as one)."""
    groups: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = {}
    for e in evs:
        groups.setdefault((e["problem"], e["hw"]), {}).setdefault(e["language"], []).append(e)
    rows, columns = [], set()
    for (prob, hw), per in groups.items():
        if len(per) < 2:
            continue
        columns.update(per)
        cells = {}
        for lang in sorted(per):
            best = max(per[lang], key=lambda e: (e["verdict"] == "passed", e["sol_score"] is not None,
                                                 e["sol_score"] or 0.0, e["id"]))
            cells[lang] = dict(_cell(best, len(per[lang])), solution=best["solution"])
        rows.append({"problem": prob, "hardware": hw, "languages": cells})
    rows.sort(key=lambda r: (r["problem"], r["hardware"]))
    return {"by": "language", "columns": sorted(columns), "rows": rows}


def compare_rows(db: Path, by: str = "hardware", problem: Optional[str] = None) -> dict[str, Any]:
    if by not in BY:
        raise UserError(f"--by must be one of {', '.join(BY)}, not {by!r}")
    evs = _evaluations(db, problem)
    return by_hardware(evs) if by == "hardware" else by_language(evs)


def _fmt(c: dict[str, Any] | None, with_solution: bool = False) -> str:
    if c is None:
        return "-"
    score = f"SOL {c['sol_score']:.3f}" if c["sol_score"] is not None else "SOL -"
    speed = f"{c['mean_speedup']:.2f}x eager" if c["mean_speedup"] is not None else "x eager -"
    head = f"{c['solution']}: " if with_solution else ""
    return f"{head}{c['verdict']} {score} {speed}" + (f" [{c['platform']}]" if c.get("platform") else "")


def render(data: dict[str, Any]):
    from rich.table import Table

    hw = data["by"] == "hardware"
    table = Table(title=("the same solutions across hardware (verdict, SOL score, mean speedup vs eager)" if hw else
                         "the same problem across languages (best SOL score per language)"))
    for name in ("problem", "solution") if hw else ("problem", "hardware"):
        table.add_column(name, overflow="fold")
    for col in data["columns"]:
        table.add_column(col, overflow="fold")
    for r in data["rows"]:
        cells = r["hardware"] if hw else r["languages"]
        lead = [r["problem"], f"{r['solution']} ({r['solution_digest'][:12]})"] if hw else [r["problem"], r["hardware"]]
        table.add_row(*lead, *(_fmt(cells.get(c), not hw) for c in data["columns"]))
    return table


def compare(
    runs: Optional[list[int]] = typer.Argument(None, metavar="[RUN_A RUN_B]", help="two runs' ids: each solution "
                                               "both ran, B against A, with a significance test on the samples"),
    db: Path = typer.Option("solbench.db", "--db", help="results database (SQLite)"),
    by: str = typer.Option("hardware", "--by", help="hardware: the same solutions across chips; language: the same "
                           "problem across languages (best SOL score per language)"),
    problem: Optional[str] = typer.Option(None, "--problem", help="only this problem"),
    json_out: bool = typer.Option(False, "--json", help="print one JSON object"),
) -> None:
    """Compare two runs (`solbench compare 3 5`), or stored results across hardware platforms or languages
    (`solbench compare --by hardware`)."""
    if runs:
        return _compare_runs(runs, Path(db), json_out)
    data = compare_rows(Path(db), by, problem)
    if json_out:
        print(json.dumps(data, indent=2, default=str))
        return
    from solbench.cli_options import out

    if not data["rows"]:
        what = "solution evaluated on more than one hardware" if by == "hardware" else \
            "problem evaluated in more than one language on one hardware"
        out.print(f"no {what} in {db}", markup=False)
        return
    out.print(render(data))


def _compare_runs(runs: list[int], db: Path, json_out: bool) -> None:
    from solbench.cli_options import out
    from solbench.report.run_compare import compare_runs
    from solbench.store.db import Store

    if len(runs) != 2:
        raise UserError(f"compare takes two runs (RUN_A RUN_B), not {len(runs)}")
    if not db.exists():
        raise UserError(f"no database at {db}")
    store = Store(db)
    a, b = ([store.evaluation(i)[0] for i in store.evaluation_ids(run_id=store.run(r)["id"])] for r in runs)
    data = compare_runs(a, b)
    if json_out:
        print(json.dumps(data, indent=1, default=str))
        return
    out.print(_runs_table(data, runs))
    g = data["geomean_ratio"]
    out.print(f"run {runs[1]} against run {runs[0]}: {len(data['rows'])} solutions in both, {data['timed']} timed; "
              + (f"geometric mean time ratio {g:.3f} ({(1 - g) * 100:+.1f}% faster)" if g else "nothing timed in both")
              + f"; a change counts at p < {data['alpha']} (Mann-Whitney on the samples) and beyond "
              f"{data['noise'] * 100:.0f}%", markup=False)


def _runs_table(data: dict[str, Any], runs: list[int]):
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, title=f"run {runs[1]} against run {runs[0]}")
    table.add_column("problem / solution", overflow="ellipsis", no_wrap=True, max_width=36)
    table.add_column("verdicts", no_wrap=True, overflow="ellipsis", max_width=16)
    table.add_column("B/A time", justify="right")
    table.add_column("change", no_wrap=True)
    for r in data["rows"]:
        verdicts = r["a_verdict"] if r["a_verdict"] == r["b_verdict"] else f"{r['a_verdict']}>{r['b_verdict']}"
        n = sum(c["call"] in ("faster", "slower") for c in r["workloads"])
        table.add_row(f"{r['problem']} / {r['solution']}", verdicts,
                      "-" if r["ratio"] is None else f"{r['ratio']:.3f}",
                      r["call"] + (f" ({n} of {len(r['workloads'])} workloads)" if n else ""))
    return table
