"""Cost of the static scan (figures go to docs/PERFORMANCE.md; targets: 100 ms of CPU time for 2,000 lines of
Python, 50 ms for 2,000 lines of CUDA C++).

The Python source is every starter example solution, concatenated until it passes 2,000 lines (with
each copy's functions renamed, so the scan sees distinct definitions); the CUDA source is 2,000 one-line kernels.
Best CPU time of several runs, so other processes on a shared machine matter less.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from solbench.evaluate.integrity.static import scan_sources
from solbench.problems.suite import select_problems


def best_cpu_time(fn, runs: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(runs):
        t0 = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t0)
    return best, out


def python_source(lines: int = 2000) -> str:
    files = [path for problem in select_problems("starter") for path in problem.example_solutions]
    blocks, n, i = [], 0, 0
    while n < lines:
        text = files[i % len(files)].read_text().replace("def ", f"def c{i}_")
        blocks.append(text)
        n += len(text.splitlines())
        i += 1
    return "\n".join(blocks)


def cuda_source(kernels: int = 2000) -> str:
    return "\n".join(
        f"__global__ void k{i}(const float* __restrict__ x, float* y, int n) {{ int i = blockIdx.x * blockDim.x"
        f" + threadIdx.x; if (i < n) y[i] = x[i] * {i}.f; }}" for i in range(kernels))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    py, cu = python_source(), cuda_source()
    t_py, f_py = best_cpu_time(lambda: scan_sources([("big.py", py)], "triton"), args.runs)
    t_cu, f_cu = best_cpu_time(lambda: scan_sources([("big.cu", cu)], "cuda"), args.runs)
    result = {"date": time.strftime("%Y-%m-%d"), "python_lines": len(py.splitlines()), "python_ms": t_py * 1e3,
              "python_findings": len(f_py), "cuda_lines": len(cu.splitlines()), "cuda_ms": t_cu * 1e3,
              "cuda_findings": len(f_cu)}
    print(f"static scan, {result['python_lines']} lines of Python: {result['python_ms']:.1f} ms CPU "
          f"(target 100 ms), {result['python_findings']} findings")
    print(f"static scan, {result['cuda_lines']} lines of CUDA C++: {result['cuda_ms']:.1f} ms CPU "
          f"(target 50 ms), {result['cuda_findings']} findings")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
