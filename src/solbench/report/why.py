"""Why a result is what it is, in one short line: the reason, the worst element of a failed comparison, the first
line of an error in the solution's own code (not the harness's frames)."""

from __future__ import annotations

import re

from solbench.records.verdict import Evaluation, WorkloadResult

_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)')
#: frames of these are the harness's or a library's, not the solution's
_NOT_THE_SOLUTIONS = ("/solbench/", "site-packages", "dist-packages", "/lib/python", "<frozen")


def error_line(text: str | None) -> str | None:
    """A traceback's gist: the solution's last frame (``file.py:12 in run``) and the exception's line; any other
    text's first line."""
    if not text or not text.strip():
        return None
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    frames = [m for m in map(_FRAME.match, lines) if m]
    if not frames:
        return lines[0].strip()
    own = [m for m in frames if not any(x in m["path"] for x in _NOT_THE_SOLUTIONS)]
    last = next((ln.strip() for ln in reversed(lines) if not ln.startswith((" ", "\t")) and ":" in ln), None)
    where = f"{own[-1]['path'].rsplit('/', 1)[-1]}:{own[-1]['line']} in {own[-1]['fn']}" if own else None
    return ": ".join(x for x in (where, last or lines[-1].strip()) if x)


def worst_element(w: WorkloadResult) -> str | None:
    """``out[3]: got nan, expected 4.33``, from a failed comparison's record (its draw's seed is not shown)."""
    f = w.failure or {}
    worst = f.get("worst") if isinstance(f.get("worst"), dict) else None
    if not worst:
        return None
    index = worst.get("index")
    at = "[" + ", ".join(map(str, index)) + "]" if isinstance(index, list) else ""
    return f"worst {worst.get('output', '?')}{at}: got {_g(worst.get('got'))}, expected {_g(worst.get('expected'))}"


def _g(x) -> str:
    if x is None:  # NaN and infinities are stored as JSON's null
        return "nan/inf"
    return f"{x:.4g}" if isinstance(x, float) else str(x)


def workload_why(w: WorkloadResult) -> str | None:
    """Why a workload did not pass (None: it passed)."""
    if w.verdict == "passed":
        return None
    gist = error_line(w.message)
    # a reason the message already names is not said twice
    reasons = [r for r in w.reasons if r != w.verdict and not (gist and r.split(":")[-1] in gist)]
    parts = [", ".join(reasons) if reasons else None, gist, worst_element(w)]
    return "; ".join(p for p in parts if p) or w.verdict


def evaluation_why(ev: Evaluation) -> str | None:
    """Why an evaluation did not pass: its worst workload's reason, or the evaluation's own message."""
    failing = [w for w in ev.workloads if w.verdict != "passed"]
    if failing:
        worst = next(w for w in failing if w.verdict == ev.verdict) if any(
            w.verdict == ev.verdict for w in failing) else failing[0]
        return workload_why(worst)
    return error_line(ev.message) if ev.verdict != "passed" else None


def notes(w: WorkloadResult) -> list[str]:
    """The warnings worth a reader's attention (interpretation is shown in the time's place)."""
    return [x for x in w.warnings if x != "interpreted"]
