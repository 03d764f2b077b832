"""How the audit's own clock agrees with a candidate's timing (docs/PERFORMANCE.md, docs/SECURITY.md).

For each example solution given (default: the starter suite's Triton examples), every workload is evaluated
without baselines, and the median sample (the candidate's claim) is set beside the audit's time (the trusted
side's %globaltimer brackets on the GPU, the candidate's CPU time read from outside on the CPU). Prints one line
per workload and a summary: the honest spread the audit's tolerance must cover.

    python benchmarks/audit_agreement.py --device cuda [--problems rmsnorm,silu_and_mul] [--out audit.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def main() -> None:
    from solbench.evaluate.runner import EvalOptions, evaluate
    from solbench.problems.solution import load_solution
    from solbench.problems.suite import select_problems

    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--problems", default="")
    ap.add_argument("--language", default="triton")
    ap.add_argument("--budget-s", type=float, default=240.0)
    ap.add_argument("--out")
    args = ap.parse_args()
    wanted = {p for p in args.problems.split(",") if p}
    rows = []
    started = time.perf_counter()
    for problem in select_problems("starter"):
        if wanted and problem.name not in wanted:
            continue
        if time.perf_counter() - started > args.budget_s:
            break
        files = [p for p in problem.example_solutions if p.stem == args.language or p.name.startswith(args.language)]
        if not files:
            continue
        ev = evaluate(problem, load_solution(files[0], problem.name), EvalOptions(device=args.device, baselines=()))
        for w in ev.workloads:
            row = {"problem": problem.name, "workload": w.uuid, "verdict": w.verdict, "reasons": w.reasons,
                   "claim_ms": w.time_ms, "audit_ms": w.audit_ms, "audit_calls": w.audit_calls,
                   "audit_group": w.audit_group, "resolution_ms": w.audit_resolution_ms,
                   "overhead_ms": w.audit_overhead_ms, "warnings": w.warnings,
                   "message": (w.message or "")[:400]}
            if w.time_ms and w.audit_ms:
                row["diff_us"] = (w.audit_ms - w.time_ms) * 1e3
                row["ratio"] = w.audit_ms / w.time_ms
            rows.append(row)
            print(f"{problem.name:28s} {w.uuid[:28]:28s} {w.verdict:14s} claim {w.time_ms or 0:9.4f} ms  audit "
                  f"{w.audit_ms or float('nan'):9.4f} ms  x{w.audit_group or 0:<3d} diff {row.get('diff_us', float('nan')):8.2f} us  "
                  f"{','.join(r for r in w.reasons)[:30]}", flush=True)
    diffs = [r["diff_us"] for r in rows if "diff_us" in r]
    ratios = [r["ratio"] for r in rows if "ratio" in r]
    summary = {"workloads": len(rows), "audited": len(diffs),
               "forged": sum("time_forgery" in r["reasons"] for r in rows),
               "unconfirmed": sum("time_unconfirmed" in r["warnings"] for r in rows)}
    if diffs:
        summary.update(diff_us_median=statistics.median(diffs), diff_us_min=min(diffs), diff_us_max=max(diffs),
                       ratio_min=min(ratios), ratio_max=max(ratios))
    print(json.dumps(summary))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"rows": rows, "summary": summary}, f, indent=1)


if __name__ == "__main__":
    main()
