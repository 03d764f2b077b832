"""One attempt, wired up: the provider from a model file, the grader over the evaluator, the journal in the
results database; the built-in loop or an external agent command. What ``solbench agent run`` calls, and the
transfer experiment for each of its arms."""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from solbench.agents import prompts
from solbench.agents.grader import EvalGrader
from solbench.agents.loop import Attempt, AttemptResult
from solbench.agents.metrics import Trial
from solbench.agents.types import Budget, Usage
from solbench.store.journal import Journal


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
    stop_on_pass: bool = False
    #: the attempt's language alone must do the work (an arm in CuTe DSL may not pass by calling Triton, a
    #: vendor library or torch.compile): ``EvalOptions.single_language``
    single_language: bool = True


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
    """One attempt, resumed where its journal stopped; a finished one is read back, not run again."""
    from solbench.agents.providers import make_provider
    from solbench.evaluate.runner import EvalOptions

    tag = attempt_tag(arm, language, problem.name, replicate)
    key = trajectory_key(setup, model.name, tag)
    hw = hardware_id(setup)
    journal = Journal(store.conn if store is not None else None, key, experiment=setup.experiment, arm=arm,
                      problem=problem.name, model=model.name, language=language, chip=hw, replicate=replicate)
    done = journal.result() if journal.status() == "finished" else None
    if done is not None:
        return AttemptResult.model_validate(done)
    opts = EvalOptions(device=setup.device, baselines=setup.baselines, single_language=setup.single_language)
    grader = EvalGrader(problem, opts, store=store, heldout=setup.heldout,
                        seed=seed_for(setup.secret, problem.name, replicate), author=model.name,
                        label=f"{arm}-r{replicate}")
    if setup.external:
        return _external(problem, language, model, setup, grader, journal, key, arm, replicate, hw, skill_in)
    if provider is None and model.provider == "replay":  # the recorded replies of the same attempt, in order
        from solbench.agents.providers.replay import ReplayProvider

        provider = ReplayProvider(model.replay_file, name=model.name, problem=problem.name, attempt=tag)
    provider = provider or make_provider(model, problem=problem.name)
    attempt = Attempt(problem, language, provider, grader, setup.budget, hw, journal, mode=setup.mode,
                      skill_in=skill_in, keep_skill=keep_skill, skill_chars=setup.skill_chars, charge=charge,
                      template_dirs=tuple(Path(d) for d in setup.template_dirs), key=key, tag=tag, model=model.name,
                      arm=arm, replicate=replicate, stop_on_pass=setup.stop_on_pass)
    return attempt.run()


def _external(problem, language, model, setup, grader, journal, key, arm, replicate, hw, skill_in) -> AttemptResult:
    from solbench.agents.scaffold import run_external

    brief = prompts.ProblemBrief.build(problem, language, hw)
    task = prompts.render_task(brief, setup.template_dirs)
    if skill_in:
        from solbench.agents.skill import handed_on

        task += "\n\n" + handed_on(skill_in)
    starter = {"solution.py": prompts.language_template(language, brief, template_dirs=setup.template_dirs)}
    if journal.events():  # an external agent cannot be resumed: an interrupted attempt starts again
        journal.record("note", {"restarted": True, "events_before": len(journal.events())})
    root = Path(tempfile.mkdtemp(prefix="solbench-agent-"))
    out = run_external(setup.external, root / "workspace", task, starter, grader, setup.budget, language,
                       env=dict(setup.external_env) or None,
                       feedback=lambda g: prompts.render_feedback(g, brief, setup.template_dirs),
                       log_dir=root / "logs", price=model.price,
                       timeout_s=setup.budget.wall_s or setup.external_wall_s)
    for g in out.graded:
        journal.record("submission", {"graded": g.model_dump()})
    result = AttemptResult(key=key, problem=problem.name, language=language, model=model.name, arm=arm,
                           replicate=replicate, chip=hw, graded=out.graded, best=out.best, usage=out.usage,
                           usd=out.usd or 0.0, wall_s=out.wall_s, submissions=len(out.graded),
                           stopped=f"external:{out.stopped}", skill_given=bool(skill_in))
    journal.record("note", {"external": setup.external, "exit_code": out.exit_code, "log_dir": str(out.log_dir),
                            "refused": out.refused})
    journal.finish(result.model_dump())
    return result


def trial_of(result: AttemptResult, problem: Any) -> Trial:
    """An attempt as a metrics trial: its best submission's held-out scores, what it spent."""
    best = result.best
    return Trial(model=result.model or "", language=result.language, arm=result.arm or "", source=_source(problem),
                 family=getattr(problem, "family", "") or "", chip=result.chip or "", problem=result.problem,
                 sample=result.replicate, passed=bool(best and best.passed),
                 speedup=best.score_speedup if best and best.passed else None,
                 case_speedups=list(best.heldout_speedups) if best and best.passed else [],
                 sol_score=best.score_sol if best else None,
                 tokens=result.usage.total,  # a received skill's tokens included (charged at the start)
                 usd=result.usd, wall_s=result.wall_s, submissions=result.submissions)


def _source(problem: Any) -> str:
    tags = problem.definition.tag_value("source") if hasattr(problem, "definition") else []
    return tags[0] if tags else ""
