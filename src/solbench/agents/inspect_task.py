"""solbench problems as an inspect_ai task: any model inspect supports, trajectories in inspect's log viewer.

    inspect eval src/solbench/agents/inspect_task.py -T problems=rmsnorm,silu_and_mul -T language=triton \\
        -T device=cuda --model openai/gpt-4o

One ``Sample`` per problem: the input is the rendered task (``render_task``), the system prompt ``render_system``.
With ``tools=True`` (the default) the model gets ``evaluate(code)`` (grades the source through ``EvalGrader`` and
answers with ``render_feedback``: visible workloads only), ``show_problem()`` and ``read_feedback()``, in a
tool-use loop that ends when the model replies without a tool call, when its ``submissions`` are spent, or at a
message limit; a reply that ends the loop with nothing submitted yet is graded as a plain answer. With
``tools=False`` the model answers once and the code in its reply is graded once (plain chat).

The scorer takes the best submission (passed first, then SOL score, then speedup) and reports ``passed`` (every
workload, held-out included), ``sol_score`` and ``speedup`` (held-out workloads; 0 when not passed) and
``submissions`` used; the Score's metadata holds every graded submission and the best one as JSON.

This module imports inspect_ai: nothing else in solbench imports it, so solbench works without it installed.
"""
from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any, NamedTuple

import anyio
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import ChatMessageSystem
from inspect_ai.scorer import Score, Target, accuracy, mean, scorer, stderr
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.tool import Tool, tool

from solbench.agents.extract import extract_code
from solbench.agents.grader import EvalGrader
from solbench.agents.prompts import ProblemBrief, normalise_language, render_feedback, render_system, render_task
from solbench.agents.scaffold import best_of
from solbench.agents.types import Budget, Graded, Spent

STORE_KEY = "solbench:submissions"  # per sample: [{"graded": Graded as dict, "files": {name: source}}]
TOOL_NOTE = """
In this environment you submit by calling the `evaluate` tool with the complete source as `code` (several
files: fenced blocks, each named on the line before, as above); it answers with the measured feedback. You
have $n graded submissions. `show_problem` repeats the task, `read_feedback` the last feedback. When you are
done, reply without calling a tool: your best submission is the one scored.
"""


class _Problem(NamedTuple):
    problem: Any
    brief: ProblemBrief
    task_text: str
    template_dirs: tuple[str, ...] = ()


class _Attempt:
    """One sample's attempt: its grader (with its own secret held-out seed), budget and submissions so far.
    (No dataclass here: inspect loads this file by path, unregistered in sys.modules, which dataclasses need.)"""

    def __init__(self, grader: EvalGrader, p: _Problem, budget: Budget, language: str, state: TaskState):
        self.grader, self.p, self.budget, self.language, self.state = grader, p, budget, language, state
        self.spent = Spent()
        self.last_feedback = "Nothing has been evaluated yet."

    def files(self, code: str) -> dict[str, str]:
        if "```" in code or "~~~" in code:  # fenced (maybe several named files): read it as a reply would be
            ex = extract_code(code, entry=self.grader.entry)
            if ex.ok:
                return ex.files
        return {"solution.py": code}

    async def submit(self, files: dict[str, str]) -> str:
        why = self.spent.exhausted(self.budget)
        if why is not None:
            return f"Submission refused: the {why} budget is spent; nothing was graded. Reply without a tool call."
        self.spent.submissions += 1
        n = self.spent.submissions
        try:
            g = await anyio.to_thread.run_sync(self.grader.grade, files, self.language)
            g = g.model_copy(update={"submission": n})
        except Exception as e:  # noqa: BLE001 - the grader's failure, no verdict on the code: recorded all the same
            g = Graded(submission=n, solution_digest="", language=self.language, verdict="GRADER_ERROR",
                       reasons=["the grader failed; this is no verdict on the submission"],
                       message=f"{type(e).__name__}: {e}"[:300])
        self.state.store.set(STORE_KEY, [*self.state.store.get(STORE_KEY, []),
                                         {"graded": g.model_dump(mode="json"), "files": files}])
        self.last_feedback = render_feedback(g, self.p.brief, self.p.template_dirs, budget=(self.budget, self.spent))
        return self.last_feedback


@tool
def evaluate(att: _Attempt) -> Tool:
    async def execute(code: str) -> str:
        """Grade a complete solution on the problem's workloads and return the measured feedback.

        Args:
            code: The whole source file that defines the entry function (for several files: fenced blocks, each
                named on the line before, e.g. `# file: kernel.py`).
        """
        return await att.submit(att.files(code))
    return execute


@tool
def show_problem(att: _Attempt) -> Tool:
    async def execute() -> str:
        """Show the task statement again: definition, reference, signature, workloads and their speed of light."""
        return att.p.task_text
    return execute


@tool
def read_feedback(att: _Attempt) -> Tool:
    async def execute() -> str:
        """Show the feedback of the last evaluated submission again."""
        return att.last_feedback
    return execute


@solver
def solbench_agent(language: str = "triton", device: str = "cpu", heldout: int = 3, submissions: int = 5,
                   tools: bool = True, hardware: str | None = None, baselines: tuple[str, ...] | None = None,
                   dps: bool = True, seed: int | None = None, template_dirs: tuple[str, ...] = ()) -> Solver:
    """The model's attempt at one problem: a tool-use loop (``tools``) or one plain-chat answer graded once."""
    from solbench.evaluate.runner import EvalOptions

    options = EvalOptions(device=device) if baselines is None else EvalOptions(device=device, baselines=baselines)

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        p = _load(state.metadata["source"], language, hardware, device, dps, template_dirs, submissions)
        grader = EvalGrader(p.problem, options, heldout=heldout, seed=seed, dps=dps, entry=p.brief.entry,
                            label=f"inspect-{state.sample_id}-{state.epoch}")
        att = _Attempt(grader, p, Budget(attempts=None, submissions=submissions), language, state)
        system = render_system(p.brief, p.template_dirs) + (TOOL_NOTE.replace("$n", str(submissions)) if tools else "")
        state.messages.insert(0, ChatMessageSystem(content=system))
        if tools:
            state.tools = [evaluate(att), show_problem(att), read_feedback(att)]
            state.tool_choice = "auto"
            while not state.completed:
                state = await generate(state, tool_calls="single")
                if not state.output.message.tool_calls or att.spent.exhausted(att.budget):
                    break
        else:
            state = await generate(state, tool_calls="none")
        if not att.spent.submissions:  # plain chat, or a model that answered without calling evaluate
            ex = extract_code(state.output.completion, entry=p.brief.entry)
            if ex.ok:
                await att.submit(ex.files)
            else:
                state.metadata["extract_problem"] = ex.problem
        return state

    return solve


def _scalar(x: float | None) -> float:
    return 0.0 if x is None else float(x)


@scorer(metrics={"passed": [accuracy(), stderr()], "sol_score": [mean(), stderr()], "speedup": [mean()],
                 "submissions": [mean()]})
def solbench_scorer():
    """The best submission's held-out scores: passed 1/0, SOL score, speedup (0 when not passed), submissions."""

    async def score(state: TaskState, target: Target) -> Score:
        subs = state.store.get(STORE_KEY, [])
        graded = [Graded.model_validate(s["graded"]) for s in subs]
        best = best_of(graded)
        value = {"passed": int(bool(best and best.passed)),
                 "sol_score": _scalar(best.score_sol) if best and best.passed else 0.0,
                 "speedup": _scalar(best.score_speedup) if best and best.passed else 0.0,
                 "submissions": len(graded)}
        files = subs[graded.index(best)]["files"] if best else {}
        if best is None:
            why = state.metadata.get("extract_problem") or "nothing was submitted"
        else:
            why = (f"best: submission {best.submission} of {len(graded)}, {best.verdict}"
                   + (f" ({', '.join(best.reasons)})" if best.reasons else "")
                   + (f", SOL score {best.score_sol:.3f}" if best.passed and best.score_sol is not None else "")
                   + (f", speedup {best.score_speedup:.3g}x" if best.passed and best.score_speedup else ""))
        return Score(value=value, answer="\n\n".join(f"# file: {k}\n{v}" for k, v in files.items()) or None,
                     explanation=why,
                     metadata={"best": best.model_dump_json() if best else None,
                               "graded": [g.model_dump(mode="json") for g in graded]})

    return score


def _names(x: str | list[str] | tuple[str, ...]) -> list[str]:
    items = x.split(",") if isinstance(x, str) else list(x)
    return [s.strip() for s in items if str(s).strip()]


@functools.lru_cache(maxsize=64)
def _load(source: str, language: str, hardware: str | None, device: str, dps: bool, template_dirs: tuple[str, ...],
          submissions: int) -> _Problem:
    """A problem, its brief and its rendered task (cached: the task and each of its samples ask for them)."""
    from solbench.hardware.registry import detect
    from solbench.problems.problem import load_problem

    problem = load_problem(source)
    brief = ProblemBrief.build(problem, language, hardware or ("cpu" if device == "cpu" else detect(device)), dps=dps)
    budget = (Budget(attempts=None, submissions=submissions), Spent())
    return _Problem(problem, brief, render_task(brief, template_dirs=template_dirs, budget=budget), template_dirs)


@task
def solbench(problems: str | list[str] = "rmsnorm", language: str = "triton", device: str = "cpu",
             heldout: int = 3, submissions: int = 5, tools: bool = True, hardware: str | None = None,
             baselines: str | list[str] | None = None, dps: bool = True, seed: int | None = None,
             message_limit: int | None = 60, template_dirs: str | list[str] | None = None) -> Task:
    """solbench problems (comma-separated bundled names or problem directories) for any inspect model.

    ``hardware``: the chip the prompt describes (default: the one ``device`` is); ``baselines``: the evaluator's
    baselines, comma-separated (default: its own choice; "" for none); ``seed``: fixes the held-out workloads
    (default: a fresh secret one per sample and epoch); ``message_limit``: inspect's limit on the conversation."""
    from solbench.problems.problem import resolve_problem_dir

    dirs = tuple(_names(template_dirs)) if template_dirs else ()
    lang = normalise_language(language)
    samples = []
    for ref in _names(problems):
        # inspect builds a task from a file inside that file's directory: a relative problem directory is looked
        # up there, then where the shell was ($PWD); the resolved path keys _load for the task and its solver
        here = Path(os.environ.get("PWD", "."), ref)
        source = str(resolve_problem_dir(here if not Path(ref).exists() and (here / "definition.json").is_file()
                                         else ref))
        p = _load(source, lang, hardware, device, dps, dirs, submissions)
        samples.append(Sample(id=p.problem.name, input=p.task_text,
                              metadata={"problem": p.problem.name, "source": source, "language": lang,
                                        "device": device, "hardware": p.brief.hardware_id}))
    solve = solbench_agent(lang, device, heldout=heldout, submissions=submissions, tools=tools, hardware=hardware,
                           baselines=None if baselines is None else tuple(_names(baselines)), dps=dps, seed=seed,
                           template_dirs=dirs)
    return Task(dataset=samples, solver=solve, scorer=solbench_scorer(), message_limit=message_limit,
                metadata={"language": lang, "device": device, "heldout": heldout, "submissions": submissions})
