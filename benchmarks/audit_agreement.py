"""How the audit's own clock agrees with a candidate's timing (docs/PERFORMANCE.md, docs/SECURITY.md).

For each solution given, every workload is evaluated without baselines, and the median sample (the candidate's
claim) is set beside the audit's time (the trusted side's %globaltimer brackets on the GPU, the candidate's CPU
time read from outside on the CPU). Prints one line per workload and a summary: the honest spread the audit's
tolerance must cover, and each workload's margin, the claim over the least claim the audit lets pass
(``AGREE`` times the audit's time, less its resolution): under 1 is a ``time_forgery``, and an honest workload
near 1 is a false reject waiting to happen.

    python benchmarks/audit_agreement.py --device cuda [--problems rmsnorm,silu_and_mul] [--out audit.json]
    python benchmarks/audit_agreement.py --device cuda --honest [--files cuda_graph_cache.py] --repeat 3

The default solutions are the starter suite's examples in ``--language``; ``--honest`` takes the honest
integrity corpus instead (tests/honest, each entry on its own problem), every entry that may run on the device.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def starter(language: str, wanted: set[str]) -> list[tuple[str, object, Path]]:
    """(label, problem, solution file) for the starter suite's examples in ``language``."""
    from solbench.problems.suite import select_problems

    out = []
    for problem in select_problems("starter"):
        if wanted and problem.name not in wanted:
            continue
        files = [p for p in problem.example_solutions if p.stem == language or p.name.startswith(language)]
        if files:
            out.append((problem.name, problem, files[0]))
    return out


def honest(device: str, wanted: set[str]) -> list[tuple[str, object, Path]]:
    """(label, problem, solution file) for the honest corpus's entries that run on ``device`` (tests/honest: an
    entry of the CPU runs on the GPU too unless it says ``gpu_too: false``, as the GPU test set runs them)."""
    from solbench.problems.problem import load_problem

    folder = ROOT / "tests" / "honest"
    entries = [e for path in sorted(folder.glob("MANIFEST*.json")) for e in json.loads(path.read_text())]
    problems: dict[str, object] = {}
    out = []
    for e in entries:
        if wanted and e["file"] not in wanted:
            continue
        if (device == "cpu" and e["runs_on"] != "cpu") or (device != "cpu" and not e.get("gpu_too", True)):
            continue
        name = e.get("problem", "problem")
        if name not in problems:
            problems[name] = load_problem(ROOT / "tests" / "exploits" / name)
        out.append((e["file"], problems[name], folder / e["file"]))
    return out


def margin(claim_ms: float | None, audit_ms: float | None, resolution_ms: float | None, device: str) -> float | None:
    """The claim over the least claim the audit lets pass (``audit_verdict.verdict``'s floor from the audit's time), or
    None where either is missing or the floor is not above zero (nothing could be convicted). On the CPU the
    verdict also holds the claim against the fastest audited call, which the record does not keep."""
    from solbench.evaluate.timing.audit_verdict import AGREE

    if not claim_ms or audit_ms is None or resolution_ms is None:
        return None
    floor = AGREE["cpu" if device == "cpu" else "cuda"] * audit_ms - resolution_ms
    return claim_ms / floor if floor > 0 else None


def main() -> None:
    from solbench.evaluate.runner import EvalOptions, evaluate
    from solbench.problems.solution import load_solution

    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--problems", default="", help="starter problems, comma-separated (default: all)")
    ap.add_argument("--language", default="triton")
    ap.add_argument("--honest", action="store_true", help="the honest integrity corpus instead of the examples")
    ap.add_argument("--files", default="", help="with --honest: these entries only, comma-separated")
    ap.add_argument("--repeat", type=int, default=1, help="evaluations of each solution, one after another")
    ap.add_argument("--budget-s", type=float, default=240.0)
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.honest:
        chosen = honest(args.device, {f for f in args.files.split(",") if f})
    else:
        chosen = starter(args.language, {p for p in args.problems.split(",") if p})
    rows = []
    started = time.perf_counter()
    for label, problem, path in chosen:
        for run in range(args.repeat):
            if time.perf_counter() - started > args.budget_s:
                break
            ev = evaluate(problem, load_solution(path, problem.name), EvalOptions(device=args.device, baselines=()))
            rows.extend(_rows(label, run, ev, args.device))
    _summary(rows, args.out)


def _rows(label: str, run: int, ev, device: str) -> list[dict]:
    rows = []
    for w in ev.workloads:
        row = {"solution": label, "run": run, "workload": w.uuid, "verdict": w.verdict, "reasons": w.reasons,
               "claim_ms": w.time_ms, "audit_ms": w.audit_ms, "audit_calls": w.audit_calls,
               "audit_group": w.audit_group, "resolution_ms": w.audit_resolution_ms,
               "overhead_ms": w.audit_overhead_ms, "warnings": w.warnings, "message": (w.message or "")[:400],
               "margin": margin(w.time_ms, w.audit_ms, w.audit_resolution_ms, device)}
        if w.time_ms and w.audit_ms:
            row["diff_us"] = (w.audit_ms - w.time_ms) * 1e3
            row["ratio"] = w.audit_ms / w.time_ms
        rows.append(row)
        m = row["margin"]
        print(f"{label[:26]:26s} {w.uuid[:24]:24s} {w.verdict:12s} claim {w.time_ms or 0:8.4f} audit "
              f"{w.audit_ms or float('nan'):8.4f} ms x{w.audit_group or 0:<3d} ratio "
              f"{row.get('ratio', float('nan')):5.2f} margin {m if m is not None else float('nan'):5.2f} "
              f"{','.join(w.reasons)[:20]}", flush=True)
    return rows


def _summary(rows: list[dict], out: str | None) -> None:
    diffs = [r["diff_us"] for r in rows if "diff_us" in r]
    ratios = [r["ratio"] for r in rows if "ratio" in r]
    margins = sorted((r["margin"], r["solution"], r["workload"]) for r in rows if r["margin"] is not None)
    summary = {"workloads": len(rows), "audited": len(diffs),
               "forged": sum("time_forgery" in r["reasons"] for r in rows),
               "unconfirmed": sum("time_unconfirmed" in r["warnings"] for r in rows)}
    if diffs:
        summary.update(diff_us_median=statistics.median(diffs), diff_us_min=min(diffs), diff_us_max=max(diffs),
                       ratio_min=min(ratios), ratio_max=max(ratios))
    if margins:
        summary["closest"] = [{"margin": round(m, 3), "solution": s, "workload": w} for m, s, w in margins[:5]]
    print(json.dumps(summary))
    if out:
        with open(out, "w") as f:
            json.dump({"rows": rows, "summary": summary}, f, indent=1)


if __name__ == "__main__":
    main()
