"""Terminal tables (rich). Renders data the library returned; computes nothing new."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich import box
from rich.table import Table

from solbench.records import scoring
from solbench.records.verdict import Evaluation

def _ms(x: float | None) -> str:
    if x is None:
        return "-"
    if x >= 100:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.3f}"
    if x >= 0.01:
        return f"{x:.4f}"
    return f"{x:.2e}"


def _num(x: float | None, fmt: str = "{:.3f}") -> str:
    return "-" if x is None else fmt.format(x)


def _si(x: float | None) -> str:
    if x is None:
        return "-"
    for unit, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.2f}{unit}"
    return f"{x:.0f}"


def _table(title: str) -> Table:
    """A table that fits 80 columns: no box, long cells cut with an ellipsis rather than wrapped."""
    return Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)


def problems_table(rows: list[dict[str, Any]], width: int = 80) -> Table:
    t = _table(f"{len(rows)} problems")
    name = max((len(r["name"]) for r in rows), default=4)
    family = max((len(r["family"]) for r in rows), default=6)
    t.add_column("name", no_wrap=True, min_width=name)
    t.add_column("family", no_wrap=True, min_width=family)
    t.add_column("workloads", justify="right", min_width=9)
    t.add_column("tags", no_wrap=True, overflow="ellipsis", max_width=max(8, width - name - family - 9 - 8))
    for r in rows:
        tags = ", ".join(x for x in r["tags"] if x.startswith(("model:", "pass:", "precision:", "stage:")))
        t.add_row(r["name"], r["family"], str(r["workloads"]), tags)
    return t


def hardware_table(rows: list[dict[str, Any]]) -> Table:
    t = _table("hardware registry (dense, scaled to max clock)")
    t.add_column("id", no_wrap=True)
    t.add_column("name", no_wrap=True, overflow="ellipsis", max_width=24)
    for col in ("DRAM TB/s", "bf16 TF/s", "fp8 TF/s", "fp32 TF/s", "LLC MiB"):
        t.add_column(col, justify="right")
    for r in rows:
        t.add_row(r["id"], r["name"], f"{r['dram_tbps']:.2f}", f"{r['bf16_tflops']:.0f}", f"{r['fp8_tflops']:.0f}",
                  f"{r['fp32_tflops']:.1f}", f"{r['llc_mb']:.0f}")
    return t


def calibration_table(data: dict[str, Any]) -> Table:
    t = _table(f"calibration of {data.get('device_name') or data.get('hardware')}")
    t.add_column("pattern")
    t.add_column("rate")
    t.add_column("seconds")
    for m in data.get("measurements", []):
        rate = m.get("rate")
        unit = "B/s" if m.get("bytes") else "FLOP/s"
        t.add_row(str(m.get("pattern")), (_si(rate) + unit) if rate else "-", _num(m.get("seconds"), "{:.2e}"))
    return t


def run_summary(evaluations: list[Evaluation], run_id: int, db: Path) -> str:
    n = len(evaluations)
    passed = sum(1 for e in evaluations if e.verdict == "passed")
    unsupported = sum(1 for e in evaluations if e.verdict == "unsupported")
    scored = any(e.sol_score is not None and e.verdict == "passed" for e in evaluations)
    mean = scoring.run_mean(evaluations)  # an unsupported or failed evaluation without a score counts 0
    score = (f"; mean SOL score {mean:.3f} (unsupported and failed counting 0)" if scored and mean is not None else
             "; no SOL score: nothing that passed was timed" + (" (interpreted Triton on the CPU is checked, not "
                                                                  "timed)" if any(w.interpreted for e in evaluations
                                                                                  for w in e.workloads) else ""))
    return (f"run {run_id}: {n} evaluations, {passed} passed, {unsupported} unsupported, "
            f"{n - passed - unsupported} failed{score}; stored in {db}")
