"""Terminal tables (rich). Renders data the library returned; computes nothing new."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table

from solbench.records import scoring
from solbench.records.verdict import Evaluation

_VERDICT_STYLE = {"passed": "green", "unsupported": "yellow", "invalid_reference": "magenta"}


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


def problems_table(rows: list[dict[str, Any]]) -> Table:
    t = Table(title=f"{len(rows)} problems")
    for col in ("name", "family", "workloads", "tags"):
        t.add_column(col)
    for r in rows:
        tags = ", ".join(x for x in r["tags"] if x.startswith(("model:", "pass:", "precision:", "stage:")))
        t.add_row(r["name"], r["family"], str(r["workloads"]), tags)
    return t


def sol_table(report: dict[str, Any]) -> Table:
    t = Table(title=f"{report['problem']} on {report['hardware']} (datasheet ceilings at max clock)")
    for col in ("workload", "flops", "bytes", "T_SOL ms", "bound", "calibrated ms"):
        t.add_column(col)
    for w in report["workloads"]:
        if "error" in w:
            t.add_row(w["uuid"], "[red]" + w["error"][:60] + "[/red]", "", "", "", "")
            continue
        flops = " ".join(f"{k.replace('tensor_', '')}:{_si(v)}" for k, v in w["flops"].items() if v)
        t.add_row(w["uuid"], flops or "-", _si(w["bytes"]) + "B", _ms(w["sol_ms"]), w["bound"],
                  _ms(w.get("calibrated_sol_ms")))
    return t


def hardware_table(rows: list[dict[str, Any]]) -> Table:
    t = Table(title="hardware registry (dense, scaled to max clock)")
    for col in ("id", "name", "DRAM TB/s", "bf16 TFLOP/s", "fp8 TFLOP/s", "fp32 TFLOP/s", "LLC MiB"):
        t.add_column(col)
    for r in rows:
        t.add_row(r["id"], r["name"], f"{r['dram_tbps']:.2f}", f"{r['bf16_tflops']:.0f}", f"{r['fp8_tflops']:.0f}",
                  f"{r['fp32_tflops']:.1f}", f"{r['llc_mb']:.0f}")
    return t


def calibration_table(data: dict[str, Any]) -> Table:
    t = Table(title=f"calibration of {data.get('device_name') or data.get('hardware')}")
    t.add_column("pattern")
    t.add_column("rate")
    t.add_column("seconds")
    for m in data.get("measurements", []):
        rate = m.get("rate")
        unit = "B/s" if m.get("bytes") else "FLOP/s"
        t.add_row(str(m.get("pattern")), (_si(rate) + unit) if rate else "-", _num(m.get("seconds"), "{:.2e}"))
    return t


def evaluation_table(evaluations: list[Evaluation]) -> Table:
    t = Table(title="solbench results")
    for col in ("problem", "solution", "workload", "T_kernel ms", "T_baseline ms (which)", "T_SOL ms", "bound",
                "SOL score", "verdict"):
        t.add_column(col, overflow="fold")
    for ev in evaluations:
        for i, w in enumerate(ev.workloads):
            verdict = w.verdict
            style = _VERDICT_STYLE.get(verdict, "red")
            notes = [x for x in w.reasons if x != verdict] + [x for x in w.warnings if x in ("interpreted", "below_sol", "invalid_bound")]
            kernel = "interp." if w.interpreted else _ms(w.time_ms)
            base = f"{_ms(w.baseline_ms)} ({w.baseline})" if w.baseline_ms else "-"
            t.add_row(ev.problem if i == 0 else "", ev.solution if i == 0 else "", w.uuid, kernel, base,
                      _ms(w.sol_ms), w.bound or "-", _num(w.sol_score),
                      f"[{style}]{verdict}[/{style}]" + (f" ({', '.join(notes)})" if notes else ""))
    return t


def run_summary(evaluations: list[Evaluation], run_id: int, db: Path) -> str:
    n = len(evaluations)
    passed = sum(1 for e in evaluations if e.verdict == "passed")
    unsupported = sum(1 for e in evaluations if e.verdict == "unsupported")
    mean = scoring.run_mean(evaluations)  # an unsupported or failed evaluation without a score counts 0
    return (f"run {run_id}: {n} evaluations, {passed} passed, {unsupported} unsupported, {n - passed - unsupported} failed"
            + (f"; mean SOL score {mean:.3f} (unsupported counting 0)" if mean is not None else "")
            + f"; stored in {db}")
