"""One attempt, wired up: the provider from a model file, the grader over the evaluator, the journal in the
results database (sealed with the run's secret); the built-in loop, or an external agent command in its sandbox
(``jail``) with its model proxy (``proxy``), in a directory that goes with the attempt (``solbench.tempdirs``).
What ``solbench agent run`` calls, and the transfer experiment for each of its arms."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from solbench.agents import prompts
from solbench.agents.grader import EvalGrader, RemoteGrader
from solbench.agents.loop import Attempt, AttemptResult
from solbench.agents.metrics import Trial
from solbench.agents.types import Budget, Usage
from solbench.errors import UserError
from solbench.store.journal import Journal, seal_key


class Setup(BaseModel):
    """What every attempt of a run shares."""
    model_config = {"arbitrary_types_allowed": True}
    device: str = "cpu"
    hardware: str | None = None  # hardware id; detected from the device where None
    heldout: int = 3
    mode: str = "chat"
    budget: Budget = Budget()
    template_dirs: tuple[str, ...] = ()
    baselines: tuple[str, ...] | None = None
    secret: int = 0  # the run's secret: held-out draws and input seeds derive from it, never shown to the agent
    experiment: str = "agent"
    skill_chars: int = 6000
    external: str | None = None  # an agent command instead of the built-in loop
    external_env: dict[str, str | None] = {}  # variables the external agent sees (None: the parent's value)
    external_wall_s: float = 2400.0  # an external agent's wall limit where the budget sets none (40 minutes)
    external_sandbox: bool = True  # False: run the external agent as this user (--unsandboxed-agent)
    external_read: tuple[str, ...] = ()  # directories the sandboxed agent may read (its CLI's installation)
    #: the external agent's model API: the --model entry's ("model"), or both providers' own ("default")
    external_upstream: str = "model"
    stop_on_pass: bool = False
    #: the attempt's language alone must do the work (an arm in CuTe DSL may not pass by calling Triton, a
    #: vendor library or torch.compile): ``EvalOptions.single_language``
    single_language: bool = True
    #: grade through this ``solbench serve`` instead of this process's evaluator (its token: SOLBENCH_TOKEN)
    server: str | None = None


def seed_for(secret: int, problem: str, replicate: int) -> int:
    """The grader seed of one problem and replicate: every arm on it sees the same held-out workloads."""
    return int.from_bytes(hashlib.sha256(f"{secret}:{problem}:{replicate}".encode()).digest()[:8], "big") >> 1


def hardware_id(setup: Setup) -> str:
    if setup.hardware:
        return setup.hardware
    from solbench.hardware.registry import detect

    return detect(setup.device).id


def attempt_tag(arm: str, language: str, problem: str, replicate: int) -> str:
    """An attempt's place in any run (what a replay model matches recorded replies by)."""
    return f"{arm}/{language}/{problem}/{replicate}"


def trajectory_key(setup: Setup, model: str, tag: str) -> str:
    """The attempt's key in the database: the experiment, the model and the attempt's place."""
    return f"{setup.experiment}/{model}/{tag}"


def run_attempt(problem: Any, language: str, model: Any, setup: Setup, store: Any = None, *, arm: str = "solo",
                replicate: int = 0, provider: Any = None, skill_in: str | None = None, keep_skill: bool = False,
                charge: tuple[Usage, float] | None = None) -> AttemptResult:
    """One attempt, resumed where its journal stopped; a finished one is read back, not run again. What the
    journal holds is read back only under this run's seals (``Journal``): a trajectory that does not carry them
    is set aside and the attempt runs again."""
    from solbench.agents.providers import make_provider
    from solbench.evaluate.runner import EvalOptions

    tag = attempt_tag(arm, language, problem.name, replicate)
    key = trajectory_key(setup, model.name, tag)
    hw = hardware_id(setup)
    journal = Journal(store.conn if store is not None else None, key, seal=seal_key(setup.secret),
                      experiment=setup.experiment, arm=arm, problem=problem.name, model=model.name,
                      language=language, chip=hw, replicate=replicate)
    done = journal.result() if journal.status() == "finished" else None
    if done is not None:
        return AttemptResult.model_validate(done)
    opts = EvalOptions(device=setup.device, baselines=setup.baselines, single_language=setup.single_language)
    seed = seed_for(setup.secret, problem.name, replicate)
    grader = (RemoteGrader(problem, opts, setup.server, group=f"{setup.experiment}:{seed:x}", heldout=setup.heldout)
              if setup.server else
              EvalGrader(problem, opts, store=store, heldout=setup.heldout, seed=seed, author=model.name,
                         label=f"{arm}-r{replicate}"))
    if skill_in:
        skill_in = _checked_skill(skill_in, journal)
    if setup.external:
        return _external(problem, language, model, setup, grader, journal, key, arm, replicate, hw, skill_in,
                         store)
    if provider is None and model.provider == "replay":  # the recorded replies of the same attempt, in order
        from solbench.agents.providers.replay import ReplayProvider

        provider = ReplayProvider(model.replay_file, name=model.name, problem=problem.name, attempt=tag)
    provider = provider or make_provider(model, problem=problem.name)
    attempt = Attempt(problem, language, provider, grader, setup.budget, hw, journal, mode=setup.mode,
                      skill_in=skill_in, keep_skill=keep_skill, skill_chars=setup.skill_chars, charge=charge,
                      template_dirs=tuple(Path(d) for d in setup.template_dirs), key=key, tag=tag, model=model.name,
                      arm=arm, replicate=replicate, stop_on_pass=setup.stop_on_pass)
    return attempt.run()


def _checked_skill(text: str, journal: Journal) -> str:
    """A received skill, checked again before it enters the prompt (a note records what that cut, once)."""
    from solbench.agents import skill_check

    checked = skill_check.check(text)
    if (checked.lines_cut or checked.spans_cut) and not any("skill_in_check" in e for e in journal.events("note")):
        journal.record("note", {"skill_in_check": checked.report()})
    return checked.text


def agent_view(setup: Setup, store: Any) -> dict | None:
    """What the external agent's sandbox hides and shows (``jail.view_paths``), or None to run it unsandboxed.
    Without user namespaces that is refused unless ``setup.external_sandbox`` is False."""
    if not setup.external_sandbox:
        return None
    from solbench.agents import jail
    from solbench.evaluate.isolation.sandbox import namespaces_available
    from solbench.caches import root as cache_root
    from solbench.problems.modules import cache_root as modules_root

    if not namespaces_available():
        raise UserError("this machine does not allow the user namespaces the external agent's sandbox needs (see "
                        "docs/AGENTS.md); --unsandboxed-agent runs it without one, able to read what you can")
    caches = [str(cache_root()), str(modules_root())]
    for c in caches:  # made now, so that the sandbox hides them even when they are made during the attempt
        os.makedirs(c, exist_ok=True)
    db = [str(store.path.resolve()) + x for x in ("", "-wal", "-shm", "-journal")] if store is not None else []
    try:
        hidden, readable = jail.view_paths(caches + db, list(setup.external_read))
    except ValueError as e:
        raise UserError(str(e)) from None
    return {"hidden": hidden, "readable": readable}


def agent_routes(model: Any, setup: Setup) -> list:
    """The model APIs the external agent's proxy forwards to, with their keys (which stay in this process)."""
    from solbench.agents import proxy

    if setup.external_upstream == "default":
        return proxy.routes_for(None)
    if model.provider not in proxy.DEFAULT_UPSTREAM:
        return []
    from solbench.agents.providers.keys import api_key

    return proxy.routes_for(model.provider, model.base_url, api_key(model)[0])


def _external(problem, language, model, setup, grader, journal, key, arm, replicate, hw, skill_in,
              store) -> AttemptResult:
    from solbench import tempdirs
    from solbench.agents.jail import SandboxError
    from solbench.agents.scaffold import run_external
    from solbench.evaluate.isolation.sandbox import read_tail

    brief = prompts.ProblemBrief.build(problem, language, hw)
    task = prompts.render_task(brief, setup.template_dirs)
    if skill_in:
        from solbench.agents.skill import handed_on

        task += "\n\n" + handed_on(skill_in)
    starter = {"solution.py": prompts.language_template(language, brief, template_dirs=setup.template_dirs)}
    view, routes = agent_view(setup, store), agent_routes(model, setup)
    if journal.events():  # an external agent cannot be resumed: an interrupted attempt starts again
        journal.record("note", {"restarted": True, "events_before": len(journal.events())})
    tempdirs.sweep("solbench-agent-")  # the directories of attempts whose solbench process was killed
    with tempdirs.private_dir("solbench-agent-") as root:
        try:
            out = run_external(setup.external, root.path, task, starter, grader, setup.budget, language,
                               env=dict(setup.external_env) or None,
                               feedback=lambda g: prompts.render_feedback(g, brief, setup.template_dirs),
                               price=model.price, timeout_s=setup.budget.wall_s or setup.external_wall_s,
                               view=view, routes=routes)
        except SandboxError as e:
            raise UserError(str(e)) from None
        tails = {"stdout_tail": read_tail(out.stdout_path, 8000), "stderr_tail": read_tail(out.stderr_path, 8000)}
    for g in out.graded:
        journal.record("submission", {"graded": g.model_dump()})
    result = AttemptResult(key=key, problem=problem.name, language=language, model=model.name, arm=arm,
                           replicate=replicate, chip=hw, graded=out.graded, best=out.best, usage=out.usage,
                           usd=out.usd or 0.0, wall_s=out.wall_s, submissions=len(out.graded),
                           stopped=f"external:{out.stopped}", skill_given=bool(skill_in), sandbox=out.sandbox)
    journal.record("note", {"external": setup.external, "exit_code": out.exit_code, "refused": out.refused,
                            "sandbox": out.sandbox, "proxy": out.proxy, "log_usage": out.log_usage.model_dump(),
                            "log_usd": out.log_usd, "disagreement": out.disagreement, **tails})
    journal.finish(result.model_dump())
    return result


def trial_of(result: AttemptResult, problem: Any) -> Trial:
    """An attempt as a metrics trial: its best submission's held-out scores, what it spent."""
    best = result.best
    return Trial(model=result.model or "", language=result.language, arm=result.arm or "", source=_source(problem),
                 family=getattr(problem, "family", "") or "", chip=result.chip or "", problem=result.problem,
                 sample=result.replicate, passed=bool(best and best.passed),
                 verdict=best.verdict if best else None,
                 speedup=best.score_speedup if best and best.passed else None,
                 case_speedups=list(best.heldout_speedups) if best and best.passed else [],
                 sol_score=best.score_sol if best else None,
                 tokens=result.usage.total,  # a received skill's tokens included (charged at the start)
                 usd=result.usd, wall_s=result.wall_s, submissions=result.submissions)


def _source(problem: Any) -> str:
    tags = problem.definition.tag_value("source") if hasattr(problem, "definition") else []
    return tags[0] if tags else ""
