"""Quick look at example solutions on this machine, without baselines: verdict, time, T_SOL and the
stream-tail figure per workload. Usage: python scripts/gpu_smoke.py PROBLEM [PROBLEM ...]"""

import sys

from solbench.evaluate.runner import EvalOptions, evaluate
from solbench.problems.problem import load_problem
from solbench.problems.solution import load_solution

for name in sys.argv[1:]:
    problem = load_problem(name)
    for path in problem.example_solutions:
        ev = evaluate(problem, load_solution(path, problem.name), EvalOptions(device="cuda", baselines=()))
        env = ev.environment
        print(f"{name}: {ev.verdict} {ev.reasons} {ev.elapsed_s:.1f} s sandbox={env.get('sandbox')} "
              f"ready={env.get('candidate_ready_s')} warnings={ev.warnings}")
        for w in ev.workloads:
            print(f"  {w.uuid[-28:]:28s} {w.verdict:12s} t={w.time_ms} n={w.n_samples} calls={w.timed_calls} "
                  f"rechecked={w.rechecked} sol={w.sol_ms and round(w.sol_ms, 4)} graph={w.graph_ms} "
                  f"dsl={w.dsl_share} {(w.message or '')[:300]}")
        if ev.verdict != "passed":
            print((ev.log or "")[-3000:])
