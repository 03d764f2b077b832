"""The built-in agent loop: generate, evaluate in the sandbox, feed back what a kernel engineer would want, repeat.

Two modes. ``chat``: every reply's code is extracted and graded, and the feedback (compile errors, the failing
workload and its worst element, per-workload time against T_SOL, the SOL score and bound) is the next user
message. ``tools``: the model calls ``evaluate``, ``show_problem`` and ``read_feedback`` as functions, and the
attempt ends when it answers without a tool call. Either way the budget (turns, graded submissions, tokens,
money, wall time) is checked before every model call and every grading (the turn limit only before a call: the
reply in hand is graded), and the best submission so far is kept (passed first, then the held-out SOL score,
then the held-out speedup).

Every reply and graded submission goes to the attempt's ``Journal`` as it happens; on resume the recorded ones
are read back in order instead of calling the model or the evaluator again, so no paid call is repeated.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from solbench.agents import prompts, skill as skills
from solbench.agents.extract import extract_code
from solbench.agents.types import Budget, Graded, Message, Reply, Spent, Tool, ToolCall, Usage, submission_rank

TOOLS = [
    Tool(name="evaluate", description="Grade a solution in the sandbox on the problem's visible workloads and "
         "return the feedback. Counts against the submission budget.",
         parameters={"type": "object", "properties": {
             "code": {"type": "string", "description": "the entry file's full source"},
             "files": {"type": "object", "description": "optional: several files, path -> source",
                       "additionalProperties": {"type": "string"}}}, "required": []}),
    Tool(name="show_problem", description="The problem statement again: reference, signature, workloads with "
         "T_SOL and the binding bound."),
    Tool(name="read_feedback", description="The feedback of the last graded submission."),
]


class AttemptResult(BaseModel):
    key: str
    problem: str
    language: str
    model: str | None = None
    arm: str | None = None
    replicate: int = 0
    chip: str | None = None
    graded: list[Graded] = Field(default_factory=list)
    best: Graded | None = None
    usage: Usage = Field(default_factory=Usage)
    usd: float = 0.0
    wall_s: float = 0.0
    turns: int = 0
    submissions: int = 0
    stopped: str = "done"
    skill: str | None = None  # the SKILL.md kept during the attempt (when asked to keep one)
    skill_usage: Usage = Field(default_factory=Usage)  # what writing it cost (charged to the arm that uses it)
    skill_usd: float = 0.0
    skill_given: bool = False  # the attempt started from another attempt's skill
    skill_check: dict | None = None  # what the mechanical check cut from the skill's rewrites (skill_check)
    sandbox: str | None = None  # an external agent's: "namespaces", or "none" (--unsandboxed-agent)
    charged: Usage = Field(default_factory=Usage)  # tokens charged before the first call (a received skill's)


def better(a: Graded | None, b: Graded) -> bool:
    """Whether ``b`` beats the best so far ``a``."""
    return a is None or submission_rank(b) > submission_rank(a)


class Attempt:
    """One attempt at one problem in one language; ``run()`` returns its ``AttemptResult``."""

    def __init__(self, problem: Any, language: str, provider: Any, grader: Any, budget: Budget, hardware: str,
                 journal: Any, mode: str = "chat", skill_in: str | None = None, keep_skill: bool = False,
                 skill_chars: int = skills.DEFAULT_CHARS, charge: tuple[Usage, float] | None = None,
                 template_dirs: tuple = (), key: str = "", tag: str = "", model: str | None = None,
                 arm: str | None = None,
                 replicate: int = 0, stop_on_pass: bool = False):
        if mode not in ("chat", "tools"):
            raise ValueError(f"mode must be chat or tools, not {mode!r}")
        self.problem, self.language, self.provider, self.grader = problem, language, provider, grader
        self.budget, self.journal, self.mode, self.template_dirs = budget, journal, mode, template_dirs
        self.brief = prompts.ProblemBrief.build(problem, language, hardware, dps=getattr(grader, "dps", True))
        self.spent = Spent()
        if charge:
            self.spent.usage, self.spent.usd = charge[0], charge[1]
        self.skill = skills.Skill(chars=skill_chars) if keep_skill else None
        self.skill_in = skill_in
        self.stop_on_pass = stop_on_pass
        self.tag = tag or key
        self.result = AttemptResult(key=key, problem=problem.name, language=language, model=model, arm=arm,
                                    replicate=replicate, chip=hardware, skill_given=bool(skill_in),
                                    charged=charge[0] if charge else Usage())
        self.last_feedback = "nothing has been graded yet"

    # ---- the two calls that cost: each read back from the journal where it was recorded ------------
    def complete(self, messages: list[Message], tools: list[Tool] | None) -> Reply:
        rec = self.journal.recorded("reply")
        if rec is not None:
            reply = Reply.model_validate(rec["reply"])
        else:
            self.journal.record("prompt", {"turn": self.spent.attempts, "messages": [m.model_dump() for m in
                                                                                      messages[-2:]]})
            reply = self.provider.complete(messages, tools)
            self.journal.record("reply", {"reply": reply.model_dump(exclude={"raw"}), "turn": self.spent.attempts,
                                          "problem": self.problem.name, "attempt": self.tag})
        self.spent.attempts += 1
        self.spent.usage = self.spent.usage + reply.usage
        self.spent.usd += reply.cost_usd
        return reply

    def grade(self, files: dict[str, str]) -> Graded:
        rec = self.journal.recorded("submission")
        if rec is not None:
            graded = Graded.model_validate(rec["graded"])
        else:
            graded = self.grader.grade(files, self.language)
            self.journal.record("submission", {"graded": graded.model_dump(), "files": files})
        self.spent.submissions += 1
        self.result.graded.append(graded)
        if better(self.result.best, graded):
            self.result.best = graded
        self.last_feedback = prompts.render_feedback(graded, self.brief, self.template_dirs,
                                                     budget=(self.budget, self.spent))
        if self.skill is not None:
            self.skill.update(self, files, graded)
        return graded

    # ---- the loop ---------------------------------------------------------------------------------
    def opening(self) -> list[Message]:
        task = prompts.render_task(self.brief, self.template_dirs, budget=(self.budget, self.spent))
        if self.skill_in:
            task += "\n\n" + skills.handed_on(self.skill_in)
        if self.skill is not None:
            task += "\n\n" + skills.KEEP_NOTE
        return [Message(role="system", content=prompts.render_system(self.brief, self.template_dirs,
                                                                    language=self.language)),
                Message(role="user", content=task)]

    def run(self) -> AttemptResult:
        messages = self.opening()
        stopped = "done"
        while True:
            why = self.spent.exhausted(self.budget)
            if why:
                stopped = f"budget:{why}"
                break
            reply = self.complete(messages, TOOLS if self.mode == "tools" else None)
            messages.append(Message(role="assistant", content=reply.text, tool_calls=reply.tool_calls))
            if self.mode == "tools":
                if not reply.tool_calls:
                    break
                for call in reply.tool_calls:
                    messages.append(Message(role="tool", tool_call_id=call.id, name=call.name,
                                            content=self.tool(call)))
                continue
            found = extract_code(reply.text)
            if found.ok and (found.truncated or reply.finish_reason == "length"):
                # a reply cut off at the token limit is not graded: the code may parse and still be incomplete
                messages.append(Message(role="user", content="Your reply was cut off at the output token limit "
                                        "before the code ended; nothing was graded. Reply with the complete "
                                        "solution in one fenced code block, more briefly."))
                continue
            if not found.ok:
                if self.result.best is not None and self.result.best.passed:
                    break  # the model stopped writing code after a passing submission: it is done
                messages.append(Message(role="user", content=f"No usable code in your reply: {found.problem}. "
                                        "Reply with the complete solution in one fenced code block."))
                continue
            why = self.spent.exhausted(self.grading_budget())
            if why:
                stopped = f"budget:{why}"
                break
            graded = self.grade(found.files)
            if graded.passed and self.stop_on_pass:
                break
            messages.append(Message(role="user", content=self.last_feedback))
        return self.finish(stopped)

    def grading_budget(self) -> Budget:
        """What a grading is checked against: every limit but the turns (the reply in hand was one of them)."""
        return self.budget.model_copy(update={"attempts": None})

    def tool(self, call: ToolCall) -> str:
        if call.name == "show_problem":
            return prompts.render_task(self.brief, self.template_dirs, budget=(self.budget, self.spent))
        if call.name == "read_feedback":
            return self.last_feedback
        if call.name != "evaluate":
            return f"unknown tool {call.name!r}: the tools are evaluate, show_problem and read_feedback"
        files = call.arguments.get("files") if isinstance(call.arguments.get("files"), dict) else None
        code = call.arguments.get("code")
        if not files and isinstance(code, str) and code.strip():
            found = extract_code(code) if "```" in code else None
            files = found.files if found is not None and found.ok else {"solution.py": code}
        if not files:
            return "evaluate needs 'code' (the entry file's source) or 'files' (path -> source)"
        why = self.spent.exhausted(self.grading_budget())
        if why:
            return f"not graded: the {why} budget is spent"
        self.grade({str(k): str(v) for k, v in files.items()})
        return self.last_feedback

    def finish(self, stopped: str) -> AttemptResult:
        r = self.result
        r.usage, r.usd, r.turns, r.submissions = self.spent.usage, self.spent.usd, self.spent.attempts, \
            self.spent.submissions
        r.wall_s = self.spent.wall_s()
        r.stopped = stopped
        if self.skill is not None:
            r.skill, r.skill_usage, r.skill_usd = self.skill.text, self.skill.usage, self.skill.usd
            r.skill_check = self.skill.check_summary()
        self.journal.finish(r.model_dump(), status="finished")
        return r
