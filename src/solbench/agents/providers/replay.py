"""A provider that calls no model: it hands back the replies recorded in a trajectory file, in order.

The file is JSON Lines; each line with a ``"reply"`` key (a :class:`~solbench.agents.types.Reply` as a dict) is
one recorded reply, optionally tagged ``"problem"``, ``"attempt"`` and ``"turn"``. Other lines (other kinds of
trajectory record) are skipped. Replies come back exactly as recorded, cost and usage included, so metrics over
a replayed run match the original; the messages sent are ignored.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from solbench.agents.providers.retry import ProviderError, one_line
from solbench.agents.types import Message, Reply, Tool


def read_replies(path: str | Path, problem: str | None = None, attempt: int | None = None,
                 ) -> list[tuple[dict[str, Any], Reply]]:
    """(record, reply) for every recorded reply in ``path``, in file order, filtered by problem and attempt."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise ProviderError(f"replay file {path} not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ProviderError(f"cannot read replay file {path}: {one_line(e)}") from None
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as e:
            raise ProviderError(f"replay file {path} line {n} is not JSON: {e}") from None
        if not isinstance(record, dict) or "reply" not in record:
            continue
        if problem is not None and record.get("problem") != problem:
            continue
        if attempt is not None and record.get("attempt") != attempt:
            continue
        try:
            reply = Reply.model_validate(record["reply"])
        except ValidationError as e:
            raise ProviderError(f"replay file {path} line {n}: not a reply "
                                f"({one_line(e.errors()[0]['loc'])}: {e.errors()[0]['msg']})") from None
        out.append((record, reply))
    return out


class ReplayProvider:
    """Replays ``path``'s replies in order; ``ProviderError`` ("replay file exhausted ...") once they run out."""

    def __init__(self, path: str | Path, name: str = "replay", problem: str | None = None,
                 attempt: int | None = None):
        self.name = name
        self.path = Path(path)
        self.problem = problem
        self.records = read_replies(self.path, problem, attempt)
        self.calls = 0
        self.last_record: dict[str, Any] | None = None  # the record of the reply last returned

    @property
    def remaining(self) -> int:
        return len(self.records) - self.calls

    def complete(self, messages: list[Message], tools: list[Tool] | None = None) -> Reply:
        if self.calls >= len(self.records):
            which = f" for problem {self.problem!r}" if self.problem is not None else ""
            raise ProviderError(f"replay file exhausted: {self.path} holds {len(self.records)} repl"
                                f"{'y' if len(self.records) == 1 else 'ies'}{which} and the run asked for more "
                                f"(model {self.name!r})")
        record, reply = self.records[self.calls]
        self.calls += 1
        self.last_record = record
        return reply.model_copy(deep=True)
