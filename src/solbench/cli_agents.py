"""``solbench agent ...`` and ``solbench experiment ...``: agents and transfer experiments from the command line.

Parse, call ``solbench.agents`` / ``solbench.experiments``, render; every command runs under solbench.guard
(one line and exit 2 for a user's error)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

from solbench.errors import UserError
from solbench.cli_options import err, out
from solbench.guard import GuardedTyper



class _Agent(GuardedTyper):
    prefix = "agent"


class _Experiment(GuardedTyper):
    prefix = "experiment"


agent_app = _Agent(no_args_is_help=True, help="Agents that write kernels: run one, report on many.")
experiment_app = _Experiment(no_args_is_help=True, help="Experiments on agents (skill transfer).")

ModelsOption = typer.Option(Path("models.toml"), "--models", help="model file (TOML; docs/AGENTS.md)")


def _budget(attempts, submissions, tokens, usd, wall_s):
    from solbench.agents.types import Budget

    return Budget(attempts=attempts, submissions=submissions, tokens=tokens, usd=usd, wall_s=wall_s)


ServerOption = typer.Option(None, "--server", help="grade through this `solbench serve` (URL; its token in "
                            "SOLBENCH_TOKEN) instead of evaluating here")


def _setup(device: str, heldout: int, mode: str, budget, templates, experiment: str, secret: Optional[int],
           external: Optional[str], baselines: Optional[str], store, server: Optional[str] = None) -> "object":
    from solbench.agents.session import Setup

    if mode not in ("chat", "tools"):
        raise UserError(f"--mode must be chat or tools, not {mode!r}")
    kinds = None if baselines is None else tuple(b for b in baselines.split(",") if b)
    # the run's secret (held-out draws, input seeds, the journal's seals): a file of its own under solbench's
    # cache, which every sandbox hides; never in the database
    if secret is None:
        from solbench.agents import run_secret

        secret = run_secret.load_or_create(store.path, experiment, store.conn)
    hardware = None
    if server:  # the chip the service evaluates on labels the trajectories
        import os

        from solbench.client import Client

        hardware = Client(server, os.environ.get("SOLBENCH_TOKEN"), retries=2).health()["hardware"]
    return Setup(device=device, heldout=heldout, mode=mode, budget=budget, template_dirs=tuple(templates or ()),
                 experiment=experiment, secret=secret, external=external, baselines=kinds, server=server,
                 hardware=hardware)


@agent_app.command("run")
def agent_run(
    problem: str = typer.Option(..., "--problem", help="bundled problem name or directory"),
    model: str = typer.Option(..., "--model", help="a model named in --models"),
    models: Path = ModelsOption,
    language: str = typer.Option("triton", "--language"),
    device: str = typer.Option("auto", "--device"),
    mode: str = typer.Option("chat", "--mode", help="chat (code in replies) or tools (evaluate as a function)"),
    agent_cmd: Optional[str] = typer.Option(None, "--agent-cmd", help="run this agent CLI instead of the "
                                            "built-in loop, in a workspace with TASK.md and ./submit"),
    agent_env: Optional[List[str]] = typer.Option(None, "--agent-env", help="NAME or NAME=VALUE: a variable the "
                                                  "external agent sees (none of this shell's are passed otherwise; "
                                                  "a key named here is not stored)"),
    agent_read: Optional[List[Path]] = typer.Option(None, "--agent-read", help="a directory the sandboxed agent "
                                                    "may read, such as its CLI's installation in a home directory"),
    unsandboxed_agent: bool = typer.Option(False, "--unsandboxed-agent", help="run the external agent as you, "
                                           "without its sandbox (where user namespaces are not allowed)"),
    attempts: Optional[int] = typer.Option(10, "--turns", help="model turns"),
    submissions: Optional[int] = typer.Option(10, "--submissions", help="graded submissions"),
    tokens: Optional[int] = typer.Option(None, "--tokens"),
    usd: Optional[float] = typer.Option(None, "--usd"),
    wall_s: Optional[float] = typer.Option(None, "--wall-s", help="the attempt's wall-clock budget (an external "
                                           "agent is stopped after 2400 s where none is given)"),
    heldout: int = typer.Option(3, "--heldout", help="held-out workloads that score (no feedback shows them)"),
    replicate: int = typer.Option(0, "--replicate"),
    experiment: str = typer.Option("agent", "--experiment", help="name under which trajectories are stored"),
    templates: Optional[List[Path]] = typer.Option(None, "--templates", help="prompt template directory"),
    baselines: Optional[str] = typer.Option(None, "--baselines", help="comma-separated baseline kinds"),
    seed: Optional[int] = typer.Option(None, "--secret", help="the run's secret seed (default: random, stored)"),
    db: Path = typer.Option("solbench.db", "--db"),
    server: Optional[str] = ServerOption,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """One attempt at one problem: the built-in loop, or an external agent command."""
    from solbench.agents.models import ModelConfig, load_model
    from solbench.agents.session import run_attempt
    from solbench.cli_options import resolve_device
    from solbench.problems.problem import load_problem
    from solbench.store.db import Store

    # an external agent brings its own model: --model only labels its results (prices from --models if given)
    cfg = load_model(models, model) if agent_cmd is None or models.exists() else ModelConfig.model_construct(
        name=model, provider="openai", model=model)
    prob = load_problem(problem)
    store = Store(db)
    setup = _setup("cpu" if server else resolve_device(device), heldout, mode,
                   _budget(attempts, submissions, tokens, usd, wall_s), templates, experiment, seed, agent_cmd,
                   baselines, store, server)
    if agent_env:
        setup = setup.model_copy(update={"external_env": {k: (v if sep else None) for k, sep, v in
                                                          (e.partition("=") for e in agent_env)}})
    setup = setup.model_copy(update={
        "external_sandbox": not unsandboxed_agent, "external_read": tuple(str(p) for p in agent_read or ()),
        "external_upstream": "model" if agent_cmd is None or models.exists() else "default"})
    r = run_attempt(prob, language, cfg, setup, store, arm="solo", replicate=replicate)
    if as_json:
        sys.stdout.write(r.model_dump_json(indent=1) + "\n")
        return
    best = r.best
    out.print(f"{r.key}: {len(r.graded)} submission(s), {r.turns} turn(s), {r.usage.total} tokens, "
              f"${r.usd:.4f}, {r.wall_s:.1f} s; stopped: {r.stopped}", markup=False)
    if best is not None:
        out.print(f"best: submission {best.submission} {best.verdict}; held-out SOL score "
                  f"{best.score_sol if best.score_sol is not None else 'n/a'}, speedup "
                  f"{best.score_speedup if best.score_speedup is not None else 'n/a'}", markup=False)


@agent_app.command("report")
def agent_report(
    db: Path = typer.Option("solbench.db", "--db"),
    experiment: Optional[str] = typer.Option(None, "--experiment"),
    by: str = typer.Option("model", "--by", help="comma-separated: model, language, source, family, chip"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Metrics over stored attempts: correctness, pass@k, fast_p, the R@t ladder and S, SOL score, the
    two-level geometric-mean speedup, tokens and money per success, wall time; and what the skill check cut.
    A trajectory whose seals do not hold under its run's secret is left out."""
    if not db.exists():
        raise UserError(f"no database at {db}")
    keys = tuple(k for k in by.split(",") if k)
    rows = agent_rows(db, experiment, keys)
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=1, default=str) + "\n")
        return
    cols = [k for k in ("n", "solved", "correct", "pass@1", "fast_1", "S", "sol", "speedup", "tokens_per_success",
                        "usd_per_success", "wall_s", "skill_code_cut", "skills_withheld") if rows and k in rows[0]]
    table = Table(*[*keys, *cols])
    for row in rows:
        table.add_row(*[str(row.get(k, "")) for k in keys],
                      *[f"{row[k]:.3g}" if isinstance(row.get(k), float) else str(row.get(k)) for k in cols])
    out.print(table)


def agent_rows(db: Path, experiment: Optional[str], keys: tuple[str, ...]) -> list[dict]:
    """``agent report``'s rows: the metrics of the stored, sealed attempts grouped by ``keys``."""
    from solbench.agents.loop import AttemptResult
    from solbench.agents.metrics import summarize
    from solbench.agents.session import trial_of
    from solbench.problems.problem import load_problem
    from solbench.store.db import Store

    trials, problems, cut = [], {}, {}
    for t in _sealed_trajectories(Store(db), experiment):
        r = AttemptResult.model_validate(t["result"])
        if r.problem not in problems:
            try:
                problems[r.problem] = load_problem(r.problem)
            except UserError:
                problems[r.problem] = None
        trials.append(trial_of(r, problems[r.problem]))
        group = cut.setdefault(tuple(getattr(trials[-1], k) for k in keys), [0, 0])
        group[0] += (r.skill_check or {}).get("lines_cut", 0) + (r.skill_check or {}).get("spans_cut", 0)
        group[1] += (r.skill_check or {}).get("withheld", 0)
    rows = summarize(trials, by=keys)
    for row in rows:
        row["skill_code_cut"], row["skills_withheld"] = cut.get(tuple(row[k] for k in keys), (0, 0))
    return rows


def _sealed_trajectories(store, experiment: Optional[str]) -> list[dict]:
    """The finished trajectories whose seals hold under their run's stored secret (those of an experiment whose
    secret is not stored here, such as one run with --secret, cannot be checked: they are kept, and counted on
    stderr); the others are left out, and counted on stderr."""
    from solbench.agents import run_secret
    from solbench.store.journal import seal_key, trajectories

    names = {r[0] for r in store.conn.execute("SELECT DISTINCT experiment FROM trajectories")} \
        if store.conn.execute("SELECT 1 FROM sqlite_master WHERE name='trajectories'").fetchone() else set()
    seals = {n: seal_key(s) for n in names if (s := run_secret.load(store.path, n)) is not None}
    kept, forged, unchecked = [], 0, 0
    for t in trajectories(store.conn, experiment, seals=seals):
        if t["status"] != "finished" or not t["result"]:
            continue
        if t["verified"] is False:
            forged += 1
            continue
        unchecked += t["verified"] is None
        kept.append(t)
    if forged:
        err.print(f"left out {forged} finished trajectories whose seals do not hold (not written by solbench "
                  "under this run's secret)", markup=False)
    if unchecked:
        err.print(f"{unchecked} trajectories could not be checked: their run's secret is not stored here",
                  markup=False)
    return kept


@experiment_app.command("transfer")
def experiment_transfer(
    problems: str = typer.Option(..., "--problems", help="comma-separated problem names or directories"),
    pair: str = typer.Option("triton,pytorch", "--pair", help="the two variants A,B: languages (--axis language), "
                             "devices such as cuda:0,cuda:1 (chip) or two source names (source)"),
    axis: str = typer.Option("language", "--axis", help="what differs between the variants: language, chip or "
                             "source"),
    language: str = typer.Option("triton", "--language", help="the language of both variants (--axis chip/source)"),
    counterparts: Optional[Path] = typer.Option(None, "--counterparts", help="--axis source: a JSON map from each "
                                                "of --problems (source A) to its counterpart in source B"),
    model: str = typer.Option(..., "--model"),
    models: Path = ModelsOption,
    replicates: int = typer.Option(1, "--replicates"),
    gate: str = typer.Option("none", "--gate", help="none, source_passed or source_beat_solo"),
    device: str = typer.Option("auto", "--device"),
    mode: str = typer.Option("chat", "--mode"),
    attempts: Optional[int] = typer.Option(10, "--turns"),
    submissions: Optional[int] = typer.Option(10, "--submissions"),
    tokens: Optional[int] = typer.Option(None, "--tokens"),
    usd: Optional[float] = typer.Option(None, "--usd"),
    wall_s: Optional[float] = typer.Option(None, "--wall-s"),
    heldout: int = typer.Option(3, "--heldout"),
    skill_chars: int = typer.Option(6000, "--skill-chars", help="the skill's length limit in characters"),
    concurrency: int = typer.Option(1, "--concurrency", help="problems attempted at once (evaluations on one "
                                    "device still run one at a time)"),
    experiment: str = typer.Option("transfer", "--experiment", help="its name: a rerun with the same name resumes"),
    baselines: Optional[str] = typer.Option(None, "--baselines"),
    seed: Optional[int] = typer.Option(None, "--secret"),
    db: Path = typer.Option("solbench.db", "--db"),
    server: Optional[str] = ServerOption,
    output: Optional[Path] = typer.Option(None, "--out", help="write the report JSON here"),
) -> None:
    """Four arms per problem and replicate (solo A, solo B, A->B and B->A with the other's SKILL.md), equal
    budgets, paired statistics with problem-bootstrap intervals. Interrupted, it resumes where it stopped."""
    from solbench.agents.models import load_model
    from solbench.cli_options import resolve_device
    from solbench.experiments.transfer import report, run_transfer
    from solbench.problems.problem import load_problem
    from solbench.store.db import Store

    sides = [x.strip() for x in pair.split(",") if x.strip()]
    if len(sides) != 2 or sides[0] == sides[1]:
        raise UserError(f"--pair needs two different {'languages' if axis == 'language' else 'variants'}, as A,B "
                        f"(got {pair!r})")
    cfg = load_model(models, model)
    names = [p for p in problems.split(",") if p]
    a, b = _variants(sides, axis, language, counterparts, names)
    loaded = {n: load_problem(n) for v in (a, b) for n in (v.problems.get(x, x) for x in names)}
    titles = [loaded[n].name for n in names]
    if len(set(titles)) != len(titles):
        twice = sorted({t for t in titles if titles.count(t) > 1})
        raise UserError(f"--problems names one problem twice ({', '.join(twice)})")
    store = Store(db)
    setup = _setup("cpu" if server else resolve_device(device), heldout, mode,
                   _budget(attempts, submissions, tokens, usd, wall_s), (), experiment, seed, None, baselines, store,
                   server).model_copy(update={"skill_chars": skill_chars})
    units = run_transfer(lambda v, n: loaded[v.problems.get(n, n)], names, a, b, cfg, setup, store,
                         replicates=replicates, gate=gate, concurrency=concurrency,
                         progress=lambda m: err.print(m, markup=False))
    rep = report(units, a, b)
    if output:
        output.write_text(json.dumps(rep, indent=1, default=str))
    _print_directions(rep)


def _variants(sides: list[str], axis: str, language: str, counterparts: Optional[Path], names: list[str]):
    """The two variants A and B of ``--pair``'s two sides along ``--axis``."""
    from solbench.cli_options import resolve_device
    from solbench.experiments.transfer import Variant

    if axis == "language":
        return tuple(Variant(name=x, language=x) for x in sides)
    if axis == "chip":
        return tuple(Variant(name=x, language=language, device=resolve_device(x)) for x in sides)
    if axis == "source":
        if counterparts is None or not counterparts.exists():
            raise UserError("--axis source needs --counterparts FILE (a JSON map from each problem to its counterpart)")
        try:
            mapping = json.loads(counterparts.read_text())
        except ValueError as exc:
            raise UserError(f"{counterparts}: not JSON ({exc})") from None
        missing = [n for n in names if n not in mapping]
        if missing:
            raise UserError(f"{counterparts} names no counterpart for {', '.join(missing)}")
        return Variant(name=sides[0], language=language), Variant(name=sides[1], language=language,
                                                                  problems={n: mapping[n] for n in names})
    raise UserError(f"--axis must be language, chip or source, not {axis!r}")


def _print_directions(rep: dict) -> None:
    """One line per direction of the transfer report: its lifts, p-value and help/harm."""
    for direction, d in rep["directions"].items():
        s, hh = d["lift_S"], d["help_harm"]
        out.print(f"{direction}: {d['pairs']} pairs; S lift {_f(s['mean'], '+.1f')} (95% {_f(s['lo'], '+.1f')} to "
                  f"{_f(s['hi'], '+.1f')}), correct lift {_f(d['lift_correct']['mean'], '+.2f')}, speed lift "
                  f"{_f(d['lift_speed']['mean'], '+.2f')} (log, both passed), p {_f(d['p_value_S'], '.3f')}; help "
                  f"{_f(hh.get('help'), '.0%')}, harm {_f(hh.get('harm'), '.0%')} (W/T/L {hh['wins']}/{hh['ties']}/"
                  f"{hh['losses']})", markup=False)


def _f(x, fmt: str) -> str:
    return "n/a" if x is None else format(x, fmt)
