"""SKILL.md: the evidence-backed, language-independent kernel knowledge an attempt keeps as it goes.

After each graded submission of an attempt asked to keep one, one extra model call rewrites the skill from the
previous version, the code just graded and its feedback. The skill is bounded (``DEFAULT_CHARS`` characters,
about 1,500 tokens; longer text is cut at a line boundary and marked). Its calls are counted apart from the
attempt's own (``usage``): a transfer experiment charges them to the arm that receives the skill, so every arm
spends the same budget. A skill is handed on whether or not its attempt passed (unless a gate says otherwise).
Every rewrite is checked mechanically before it is kept (``skill_check``: code, commands and API calls are cut, a
skill that is mostly code is withheld), and what was cut is recorded with the rewrite in the journal.
"""

from __future__ import annotations

from typing import Any

from solbench.agents import skill_check
from solbench.agents.extract import fenced_blocks
from solbench.agents.types import Message, Usage

DEFAULT_CHARS = 6000

KEEP_NOTE = ("While you work, a SKILL.md is kept from your submissions: what you changed, the effect you expected "
             "against the effect measured and why, why failed approaches failed, and when each conclusion holds. "
             "Write your reasoning about performance plainly so it can be distilled.")

_INSTRUCTIONS = """You maintain SKILL.md, the notes a kernel engineer keeps for a colleague who will solve the \
same problem next, possibly in another kernel language or on another chip. Keep only knowledge that transfers: \
what was changed, the expected against the measured effect and why, why failed approaches failed (with the \
error or the number), and when each conclusion holds (sizes, dtypes, chip). Prose only: no code, no commands, \
no API calls or signatures, nothing specific to one language's syntax (code is cut mechanically, and a skill \
that is mostly code is withheld). At most {chars} characters. Reply with the complete new SKILL.md in one \
```markdown fenced block."""


def handed_on(text: str) -> str:
    """The skill as the receiving attempt's prompt carries it (``text`` already checked)."""
    return ("A colleague's SKILL.md from an earlier attempt at this problem (another language or chip; it may be "
            "wrong: check its claims against your own measurements):\n\n```markdown\n" + text.strip() + "\n```")


def bounded(text: str, chars: int) -> str:
    text = text.strip()
    if len(text) <= chars:
        return text
    cut = text[:chars].rsplit("\n", 1)[0]
    return cut + "\n[cut at the skill's length limit]"


class Skill:
    def __init__(self, chars: int = DEFAULT_CHARS):
        self.chars = chars
        self.text = ""
        self.usage = Usage()
        self.usd = 0.0
        self.calls = 0
        self.checks: list[dict] = []  # what the check cut from each rewrite

    def check_summary(self) -> dict | None:
        """What the check cut over the attempt's rewrites (None before the first)."""
        if not self.checks:
            return None
        return {"rewrites": len(self.checks), "lines_cut": sum(c["lines_cut"] for c in self.checks),
                "spans_cut": sum(c["spans_cut"] for c in self.checks),
                "withheld": sum(bool(c["withheld"]) for c in self.checks), "last": self.checks[-1]}

    def update(self, attempt: Any, files: dict[str, str], graded: Any) -> None:
        """Rewrite the skill after ``graded`` (one model call, journal-aware like the attempt's own)."""
        rec = attempt.journal.recorded("skill")
        if rec is not None:
            self.text, used, usd = rec["text"], Usage.model_validate(rec["usage"]), float(rec.get("usd", 0.0))
            report = rec.get("check")
        else:
            code = "\n\n".join(f"# file: {p}\n{t}" for p, t in files.items())[-6000:]
            feedback = attempt.last_feedback[-4000:]
            messages = [Message(role="system", content=_INSTRUCTIONS.format(chars=self.chars)),
                        Message(role="user", content=f"Current SKILL.md:\n\n{self.text or '(empty)'}\n\n"
                                f"Submission {graded.submission} in {attempt.language}:\n```\n{code}\n```\n\n"
                                f"Its feedback:\n{feedback}")]
            reply = attempt.provider.complete(messages, None)
            blocks = [b for b in fenced_blocks(reply.text) if b.lang in ("markdown", "md", "")]
            checked = skill_check.check(blocks[-1].code if blocks else reply.text)
            self.text = bounded(checked.text, self.chars) if checked.text.strip() else self.text
            used, usd, report = reply.usage, reply.cost_usd, checked.report()
            # with the reply itself, so that a replay model re-plays the skill's calls in their place
            attempt.journal.record("skill", {"text": self.text, "usage": used.model_dump(), "usd": usd,
                                             "submission": graded.submission, "problem": attempt.problem.name,
                                             "attempt": attempt.tag, "check": report,
                                             "reply": reply.model_dump(exclude={"raw"})})
        if report is not None:
            self.checks.append(report)
        self.usage = self.usage + used
        self.usd += usd
        self.calls += 1
