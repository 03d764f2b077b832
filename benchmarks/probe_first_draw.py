"""Why a workload's first input draw costs more than its later ones: the draw after an arena's release, with the
caching allocator emptied (``torch.cuda.empty_cache()``, what the trusted worker does at each workload's end) and
without, on every workload of one problem.

Usage: python benchmarks/probe_first_draw.py [--problem DIR] [--repeat N] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from solbench.problems.inputs import make_inputs
from solbench.problems.problem import load_problem

ROOT = Path(__file__).resolve().parents[1]


def _arena(nbytes: int, pool) -> None:
    """An arena's life as the trusted worker has it: allocated from the arenas' pool, written, freed."""
    with torch.cuda.use_mem_pool(pool):
        buf = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    buf.fill_(1)
    torch.cuda.synchronize()
    del buf


def _draw_ms(problem, workload, seed: int) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    xs = make_inputs(problem.definition, workload, seed, "cuda", problem.directory)
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1e3
    del xs
    return ms


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--problem", default=str(ROOT / "src/solbench/suite/norm/rmsnorm"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("needs a GPU")
    problem = load_problem(Path(args.problem))
    pool = torch.cuda.MemPool()
    rows = []
    workloads = problem.workloads_for("cuda")  # the workloads a GPU evaluation runs, in its order
    for i, w in enumerate(workloads):
        before = workloads[i - 1]  # the workload judged before this one (the last one's, for the first)
        _draw_ms(problem, w, 0)  # the draw's kernels loaded
        got: dict[str, list[float]] = {"emptied": [], "kept": [], "later": []}
        for r in range(args.repeat):
            for mode in ("emptied", "kept"):
                xs = make_inputs(problem.definition, before, 1, "cuda", problem.directory)
                del xs
                _arena(1 << 30, pool)
                if mode == "emptied":
                    torch.cuda.empty_cache()
                got[mode].append(_draw_ms(problem, w, 10 + r))
                got["later"].append(_draw_ms(problem, w, 100 + r))
        row = {"workload": w.uuid, **{k: round(statistics.median(v), 3) for k, v in got.items()}}
        rows.append(row)
        print(json.dumps(row), flush=True)
    report = {"device": torch.cuda.get_device_name(), "problem": problem.definition.name, "rows": rows}
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
