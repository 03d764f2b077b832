"""The built-in agent loop's own overhead: prompting, extraction and bookkeeping, against the attempt's wall time.

A loopback model server on this machine answers at once (a fast endpoint), so an attempt's wall time is the
model calls, the graded evaluations and the loop itself; the loop's share is what remains. Target (issue 13):
under 5% of an attempt's wall time. Figures go to docs/PERFORMANCE.md.

    python benchmarks/bench_agent_loop.py --device cpu --attempts 3
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "agents"))  # the loopback server the tests use

CPU_KERNEL = "import torch\n\n\ndef run(x, y, alpha, out):\n    torch.add(y, x, alpha=alpha, out=out)\n"
GPU_KERNEL = '''import torch
import triton
import triton.language as tl


@triton.jit
def _rms(x_ptr, w_ptr, out_ptr, stride_x, stride_o, hidden, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = offs < hidden
    x = tl.load(x_ptr + row * stride_x + offs, mask=m, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32)
    y = x * tl.rsqrt(tl.sum(x * x, axis=0) / hidden + eps) * w
    tl.store(out_ptr + row * stride_o + offs, y.to(out_ptr.dtype.element_ty), mask=m)


def run(x, weight, eps, out):
    hidden = x.shape[-1]
    x2, o2 = x.reshape(-1, hidden), out.view(-1, hidden)
    block = triton.next_power_of_2(hidden)
    _rms[(x2.shape[0],)](x2, weight, o2, x2.stride(0), o2.stride(0), hidden, eps, BLOCK=block,
                         num_warps=min(max(block // 256, 1), 16))
'''


class Timed:
    """Wraps a provider or a grader and adds up the seconds spent inside it."""

    def __init__(self, inner, method: str):
        self.inner, self.method, self.seconds = inner, method, 0.0
        self.name = getattr(inner, "name", "timed")
        self.dps = getattr(inner, "dps", True)

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def _timed(self, *a, **k):
        t0 = time.perf_counter()
        try:
            return getattr(self.inner, self.method)(*a, **k)
        finally:
            self.seconds += time.perf_counter() - t0


class TimedProvider(Timed):
    def complete(self, *a, **k):
        return self._timed(*a, **k)


class TimedGrader(Timed):
    def grade(self, *a, **k):
        return self._timed(*a, **k)


def main() -> int:
    from agents_loopback import LoopbackServer, code_reply, no_code_reply

    from solbench.agents.grader import EvalGrader
    from solbench.agents.loop import Attempt
    from solbench.agents.models import ModelConfig
    from solbench.agents.providers import make_provider
    from solbench.agents.types import Budget
    from solbench.evaluate.runner import EvalOptions
    from solbench.hardware.registry import detect
    from solbench.problems.problem import load_problem
    from solbench.store.journal import Journal

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--attempts", type=int, default=3)
    ap.add_argument("--submissions", type=int, default=3, help="graded submissions per attempt")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    cuda = args.device.startswith("cuda")
    problem = load_problem("rmsnorm" if cuda else ROOT / "tests" / "fixtures" / "problems" / "axpy")
    kernel, language = (GPU_KERNEL, "triton") if cuda else (CPU_KERNEL, "pytorch")
    hw = detect(args.device).id
    # the process's one-off imports (torch, the fake-tensor tracer the SOL analysis and the evaluator share)
    t0 = time.perf_counter()
    from solbench.agents.prompts import ProblemBrief

    ProblemBrief.build(problem, language, hw)
    print(f"warm-up (imports, first trace; once per process, shared with the evaluator): "
          f"{time.perf_counter() - t0:.2f} s", flush=True)
    rows = []
    for i in range(args.attempts):
        script = [code_reply(kernel)] * args.submissions + [no_code_reply()]
        with LoopbackServer(script) as srv, tempfile.TemporaryDirectory() as tmp:
            import sqlite3

            cfg = ModelConfig(name="fast", provider="openai", model="m", base_url=srv.openai_base_url,
                              max_retries=0)
            provider = TimedProvider(make_provider(cfg), "complete")
            grader = TimedGrader(EvalGrader(problem, EvalOptions(device=args.device, baselines=()), heldout=1,
                                            seed=1234 + i), "grade")
            journal = Journal(sqlite3.connect(Path(tmp) / "j.db"), f"bench/{i}", problem=problem.name)
            t0 = time.perf_counter()
            r = Attempt(problem, language, provider, grader, Budget(attempts=args.submissions + 1,
                        submissions=args.submissions), hw, journal, key=f"bench/{i}").run()
            wall = time.perf_counter() - t0
        loop = wall - provider.seconds - grader.seconds
        rows.append({"attempt": i, "wall_s": wall, "model_s": provider.seconds, "grading_s": grader.seconds,
                     "loop_s": loop, "loop_share": loop / wall, "submissions": r.submissions,
                     "passed": bool(r.best and r.best.passed)})
        print(f"attempt {i}: {wall:.2f} s wall = model {provider.seconds:.3f} + grading {grader.seconds:.2f} + "
              f"loop {loop:.3f} s ({loop / wall:.2%}); {r.submissions} submissions, passed "
              f"{rows[-1]['passed']}", flush=True)
    total = sum(r["wall_s"] for r in rows)
    loop = sum(r["loop_s"] for r in rows)
    print(f"loop overhead: {loop:.3f} s of {total:.2f} s ({loop / total:.2%}; target < 5%) over {len(rows)} "
          f"attempts on {args.device}")
    if args.out:
        Path(args.out).write_text(json.dumps({"device": args.device, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
