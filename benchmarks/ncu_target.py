"""The program benchmarks/ncu_agreement.py runs under Nsight Compute: every selected case's example solution,
on inputs made as the evaluator makes them (ncu_cases.build_call), called a few times.

Each case is built and warmed up (compiled) outside any NVTX range; then each of its ``--launches`` calls runs
inside two push/pop ranges: ``sbncu_cNN_kMM`` (case NN of the list, call MM), and inside it ``solbench_ncu``,
which ``--nvtx-include "solbench_ncu/"`` selects. So ncu profiles only the calls, and its CSV rows name the call
they came from. ``--flat`` leaves out the per-call range (the kernels are then attributed by launch order).

Nothing is printed on stdout (ncu prints its CSV there); progress goes to stderr. ``--manifest`` records which
cases ran, after each one, so a run stopped early still says how far it got. ``--deadline-s`` stops starting new
cases after that many seconds, so ncu can still print what it has.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from ncu_cases import build_call, select
from ncu_report import PROFILED_RANGE, call_range


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=None, help="comma-separated case names (ncu_cases.select); default all")
    ap.add_argument("--launches", type=int, default=5, help="profiled calls per case")
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--manifest", default=None, help="JSON file: the cases that ran and the errors")
    ap.add_argument("--deadline-s", type=float, default=None, help="start no case after this many seconds")
    ap.add_argument("--flat", action="store_true", help="only the solbench_ncu range, no per-call range")
    ap.add_argument("--device", default="cuda", help="cuda (cpu: for tests, with Triton's interpreter; no NVTX)")
    args = ap.parse_args(argv)
    if args.launches < 1:
        ap.error("--launches must be at least 1")
    return args


class _NoNvtx:
    @staticmethod
    def range_push(name: str) -> None:
        return None

    @staticmethod
    def range_pop() -> None:
        return None


def log(msg: str) -> None:
    print(f"ncu_target: {msg}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    import torch

    on_gpu = args.device != "cpu"
    nvtx = torch.cuda.nvtx if on_gpu else _NoNvtx
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    cases = select(args.cases)
    manifest = {"cases": [c.name for c in cases], "ran": [], "errors": {}, "launches": args.launches,
                "flat": args.flat}

    def save() -> None:
        if args.manifest:
            Path(args.manifest).write_text(json.dumps(manifest, indent=1))

    save()
    for ci, case in enumerate(cases):
        if args.deadline_s is not None and time.monotonic() - started > args.deadline_s:
            manifest["errors"][case.name] = "not run: the target's deadline had passed"
            save()
            continue
        try:
            fn, inputs = build_call(case, args.device, args.seed)
            for _ in range(2):  # compile and warm up outside the profiled ranges
                fn()
            sync()
        except Exception as exc:
            manifest["errors"][case.name] = f"{type(exc).__name__}: {exc}"[:500]
            log(f"{case.name}: {manifest['errors'][case.name]}")
            save()
            continue
        try:
            for call in range(args.launches):
                if not args.flat:
                    nvtx.range_push(call_range(ci, call))
                nvtx.range_push(PROFILED_RANGE)
                try:
                    fn()
                finally:
                    nvtx.range_pop()
                    if not args.flat:
                        nvtx.range_pop()
                sync()
            manifest["ran"].append(case.name)
        except Exception as exc:
            manifest["errors"][case.name] = f"during the profiled calls: {type(exc).__name__}: {exc}"[:500]
        del fn, inputs
        if on_gpu:
            torch.cuda.empty_cache()
        save()
        log(f"{case.name} done ({time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
