"""Harness cost and repeatability on the starter suite (figures go to docs/PERFORMANCE.md).

Run after `solbench run --db DB` has evaluated the suite once (first compiles,
baselines measured and cached). This script evaluates every example solution
again against the same database, so baselines come from the cache and Triton's
and Inductor's caches are warm: what is left is the steady-state cost of an
evaluation. It reports

- seconds per solution and per workload (a least-squares fit of
  elapsed = fixed + per_workload * workloads over all evaluations), against the
  targets of 3.75 s per solution and 0.25 s per workload;
- run-to-run agreement of the kernel medians between the two evaluations, for
  kernels of 50 us or more, against the 1% target.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from solbench.evaluate.runner import EvalOptions, evaluate
from solbench.hardware.registry import detect
from solbench.problems.solution import load_solution
from solbench.problems.suite import select_problems
from solbench.store.db import Store


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0
    return my - slope * mx, slope


def _made_alike(a, b) -> bool:
    """Same timing protocol, software, harness code and language-proof mode (evaluations stored before the last
    two were recorded have neither, and match each other only)."""
    keys = ("timing_hold", "torch", "triton", "cuda", "driver", "harness", "profile_dsl")
    ea, eb = a.environment or {}, b.environment or {}
    return all(ea.get(k) == eb.get(k) for k in keys)


def analyse(store: Store) -> dict:
    """Pair each (problem, solution)'s latest evaluation with the latest one before it made the same way (the
    same timing protocol, software versions, harness code and language-proof mode: `_made_alike`). On a fresh
    machine that is the `run` stage's, which pays for the first compiles and the baseline measurements; the
    latest is the steady state whose cost the targets speak of. Evaluations made another way (older code in a
    carried database, the other timing protocol) are neither costed nor compared."""
    by_key: dict[tuple[str, str], list] = {}
    for eid in store.evaluation_ids():
        ev, _ = store.evaluation(eid)
        if ev.device != "cpu":
            by_key.setdefault((ev.problem, ev.solution), []).append(ev)
    first_points, steady_points, agreement, rows = [], [], [], []
    phases: dict[str, float] = {}
    for (problem, solution), evs in sorted(by_key.items()):
        last = evs[-1]
        same = [e for e in evs[:-1] if _made_alike(e, last)]
        first = same[-1] if same else last
        first_points.append((len(first.workloads), first.elapsed_s))
        if same:
            steady_points.append((len(last.workloads), last.elapsed_s))
            for name, s in (last.phases or {}).items():
                phases[name] = phases.get(name, 0.0) + s
            before = {w.uuid: w.time_ms for w in first.workloads}
            for w in last.workloads:
                b = before.get(w.uuid)
                if b and w.time_ms and min(b, w.time_ms) >= 0.05:
                    agreement.append({"problem": problem, "workload": w.uuid, "first_ms": b, "second_ms": w.time_ms,
                                      "rel_diff": abs(w.time_ms - b) / min(w.time_ms, b)})
        rows.append({"problem": problem, "solution": solution, "workloads": len(last.workloads),
                     "first_s": first.elapsed_s, "steady_s": last.elapsed_s if len(evs) > 1 else None,
                     "sol_score": last.sol_score, "verdict": last.verdict})
    fixed, per_workload = fit(steady_points) if len(steady_points) > 1 else (float("nan"), float("nan"))
    diffs = sorted(a["rel_diff"] for a in agreement)
    n_steady = sum(p[0] for p in steady_points)
    return {
        "date": time.strftime("%Y-%m-%d"),
        "solutions_first": len(first_points),
        "first_total_s": sum(p[1] for p in first_points),
        "solutions_steady": len(steady_points),
        "steady_workloads": n_steady,
        "steady_total_s": sum(p[1] for p in steady_points),
        "steady_mean_s_per_solution": statistics.fmean([p[1] for p in steady_points]) if steady_points else None,
        "steady_mean_s_per_workload": sum(p[1] for p in steady_points) / n_steady if n_steady else None,
        "fit_fixed_s_per_solution": fixed,
        "fit_s_per_workload": per_workload,
        "repeat_pairs_ge_50us": len(diffs),
        "repeat_within_1pct": sum(d <= 0.01 for d in diffs),
        "repeat_median_rel_diff": statistics.median(diffs) if diffs else None,
        "repeat_max_rel_diff": diffs[-1] if diffs else None,
        #: seconds per phase summed over the steady-state evaluations (solbench.evaluate.phases)
        "steady_phases_s": dict(sorted(phases.items(), key=lambda kv: -kv[1])),
        "per_solution": rows,
        "agreement": agreement,
    }


def report_phases(result: dict) -> None:
    """Where the steady state's time went, per workload (a nested phase is also counted in its parent)."""
    n = result.get("steady_workloads") or 0
    phases = result.get("steady_phases_s") or {}
    if not n or not phases:
        return
    print(f"{'phases, s per workload':32s} (nested phases, e.g. timing.rounds, are part of their parent)")
    for name, s in list(phases.items())[:16]:
        print(f"   {name:29s} {s / n:.4f}")


def report(result: dict) -> None:
    print(f"{'previous evaluations':32s} {result['solutions_first']} solutions, {result['first_total_s']:.1f} s "
          "(on a fresh machine: first compiles and baseline measurements included)")
    if result["steady_mean_s_per_solution"] is not None:
        print(f"{'steady state':32s} {result['solutions_steady']} solutions, {result['steady_workloads']} workloads, "
              f"{result['steady_total_s']:.1f} s")
        print(f"{'  mean per solution':32s} {result['steady_mean_s_per_solution']:.2f} s (target <= 3.75 s)")
        print(f"{'  mean per workload':32s} {result['steady_mean_s_per_workload']:.3f} s")
        print(f"{'  fit: fixed per solution':32s} {result['fit_fixed_s_per_solution']:.2f} s")
        print(f"{'  fit: per workload':32s} {result['fit_s_per_workload']:.3f} s (target <= 0.25 s)")
    n = result["repeat_pairs_ge_50us"]
    if n:
        print(f"{'repeat agreement (>= 50 us)':32s} {result['repeat_within_1pct']}/{n} within 1%, "
              f"median {result['repeat_median_rel_diff']:.2%}, max {result['repeat_max_rel_diff']:.2%}")
        for a in sorted(result["agreement"], key=lambda a: -a["rel_diff"])[:5]:
            print(f"   {a['problem']}/{a['workload']}: {a['first_ms']:.4f} vs {a['second_ms']:.4f} ms "
                  f"({a['rel_diff']:.2%})")


def profile_cost(device: str, n: int, hold: bool, out: str | None) -> int:
    """Elapsed time of each evaluation with the language proof off and on, printed as it goes (a run stopped by
    its time limit still reports the pairs it finished). Baselines are left out, so neither run pays for
    measuring them; each solution is evaluated once first, uncounted, so its kernels are compiled for both; and
    which mode runs first alternates from one solution to the next."""
    from solbench.evaluate.timing.rounds import TimingConfig

    hw = detect(device)

    def once(problem, solution, mode: str):
        return evaluate(problem, solution, EvalOptions(device=device, hardware=hw, timing=TimingConfig(hold=hold),
                                                       profile_dsl=mode, baselines=()), store=None)

    pairs = []
    todo = [(p, path) for p in select_problems("starter") for path in p.example_solutions][:n]
    for i, (problem, path) in enumerate(todo):
        solution = load_solution(path, problem.name)
        once(problem, solution, "off")  # compiles the solution's kernels (and starts the trusted worker)
        row = {"problem": problem.name}
        for mode in (("off", "one") if i % 2 == 0 else ("one", "off")):
            ev = once(problem, solution, mode)
            row[mode] = ev.elapsed_s
            row[f"{mode}_verdict"] = ev.verdict
        pairs.append(row)
        print(f"profile cost  {problem.name:28s} off {row['off']:6.2f} s  one {row['one']:6.2f} s  "
              f"({row['off_verdict']}, {row['one_verdict']})", flush=True)
    if pairs:
        extra = sorted(r["one"] - r["off"] for r in pairs)
        print(f"profiler adds per solution: median {statistics.median(extra):.2f} s "
              f"(min {extra[0]:.2f}, max {extra[-1]:.2f}) over {len(pairs)} solutions; "
              f"mean with it off {statistics.fmean(r['off'] for r in pairs):.2f} s")
    if out:
        Path(out).write_text(json.dumps(pairs, indent=1))
    return 0


def cold_eval(db: str, device: str, problem: str, repeats: int) -> list[dict]:
    """Wall time of `solbench eval` in a fresh process (the CLI, the trusted worker's cold start, the evaluation),
    with the evaluation's own phases; baselines from the database's cache."""
    import subprocess

    rows = []
    for problem_name in [problem] * repeats:
        path = next(p for p in select_problems("starter") if p.name == problem_name).example_solutions[0]
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "solbench.cli", "eval", "--problem", problem_name, "--solution",
                               str(path), "--device", device, "--db", db, "--json", "--quiet"],
                              capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        try:
            ev = json.loads(proc.stdout[proc.stdout.index("{"):])
        except ValueError:
            print(f"cold eval failed (rc {proc.returncode}): {proc.stderr[-400:]}")
            continue
        row = {"problem": problem_name, "workloads": len(ev.get("workloads") or []), "wall_s": wall,
               "evaluation_s": ev.get("elapsed_s"), "verdict": ev.get("verdict"), "phases": ev.get("phases") or {}}
        rows.append(row)
        top = sorted(row["phases"].items(), key=lambda kv: -kv[1])[:6]
        print(f"cold `solbench eval` {problem_name}: {row['workloads']} workloads, {wall:.2f} s wall, evaluation "
              f"{row['evaluation_s']:.2f} s ({row['verdict']}); " + ", ".join(f"{k} {v:.2f}" for k, v in top))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default=None)
    ap.add_argument("--analyse-only", action="store_true", help="no new evaluations: summarise what DB holds")
    ap.add_argument("--no-hold", dest="hold", action="store_false",
                    help="time without the stream held by a spin kernel (TimingConfig.hold, on by default)")
    ap.add_argument("--profile-cost", type=int, default=0, metavar="N",
                    help="instead: evaluate the first N example solutions with the language proof off and on "
                         "(the default, one profiled workload), baselines left out, and print what the profiler "
                         "adds per solution")
    ap.add_argument("--only", default=None, help="comma-separated starter problems (default: all 17)")
    ap.add_argument("--no-baselines", dest="baselines", action="store_false",
                    help="evaluate without baselines (the harness's own cost; no SOL scores)")
    ap.add_argument("--repeat", type=int, default=1, help="evaluate each solution this many times in this call")
    ap.add_argument("--cold", type=int, default=0, metavar="N",
                    help="also time N cold `solbench eval` processes of --cold-problem (after the steady state)")
    ap.add_argument("--cold-problem", default="rmsnorm")
    args = ap.parse_args()
    if args.profile_cost:
        return profile_cost(args.device, args.profile_cost, args.hold, args.out)
    store = Store(args.db)
    if not args.analyse_only:
        from solbench.evaluate.timing.rounds import TimingConfig

        hw = detect(args.device)
        only = set(args.only.split(",")) if args.only else None
        for _ in range(args.repeat):
            for problem in select_problems("starter"):
                if only and problem.name not in only:
                    continue
                for path in problem.example_solutions:
                    evaluate(problem, load_solution(path, problem.name),
                             EvalOptions(device=args.device, hardware=hw, timing=TimingConfig(hold=args.hold),
                                         baselines=None if args.baselines else ()), store=store)
    result = analyse(store)
    if args.cold:
        result["cold"] = cold_eval(args.db, args.device, args.cold_problem, args.cold)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    report(result)
    report_phases(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
