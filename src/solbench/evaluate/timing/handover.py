"""The hand-over of an audit's calls (``audit``): the trusted side's ``go`` line and the candidate's answers."""

from __future__ import annotations


def hand_over(sub, k: int, s: int, m: int = 1, word: str = "ok") -> None:
    """Hand group ``k`` over (``m`` calls, on slots ``s``, ``s + 1``, ...) and wait for the candidate's answer."""
    sub.proc.send_line(f"go {k} {s} {m}")
    answer(sub, k, word)


def answer(sub, k: int, word: str) -> None:
    """Read the candidate's ``word k`` (``queued``: a GPU group's calls are enqueued; ``ok``: the calls ended);
    raises ``CandidateGone`` when it does not answer within what is left of its limit."""
    with sub.waiting() as left_s:
        line = sub.proc.read_line(left_s)
    if line != f"{word} {k}".encode():
        raise Ended(line)


class Ended(Exception):
    """The candidate answered something other than ``ok`` (its failure follows as a full reply)."""

    def __init__(self, line: bytes | None):
        super().__init__(line)
        self.line = line
