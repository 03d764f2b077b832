"""Three clocks on the same kernels, on one GPU: solbench's own time, Nsight Compute's and CUPTI's.

For each case of ncu_cases.CASES (an example solution of the starter suite on one workload: decode sizes that are
launch-bound, mid sizes, prefill and training sizes, and solutions that launch several kernels per call):

  T_solbench  ``time_ms`` of the public evaluator (``evaluate``, baselines off), and its ``timing_method``;
  T_ncu       Nsight Compute's ``gpu__time_duration.sum`` (``--cache-control all --clock-control none``), the
              kernels of one call summed, median over ``--ncu-launches`` calls: one ncu run over ncu_target.py,
              NVTX ranges attributing the kernels to cases and calls;
  T_cupti     the kernels' own CUPTI activity records through torch's profiler (kineto), each call after a read
              flush (a sum over 2.5x the L2) behind a spin-kernel hold; from the first kernel's start to the last
              one's end; median over ``--cupti-calls`` calls.

Targets: solbench within 3% of ncu where ncu times 20 us or more, and within 0.3 us of CUPTI at every size. Below
20 us the ncu column says "ncu cache control" (ncu's cache control also empties the instruction and constant
caches, about 1 us at tiny sizes) and the gap is still printed. Output: a table, one line on ncu when it did not
run, the summary line; ``--out`` writes the JSON. Every step is bounded (``--budget-s``); ``--list`` prints the
cases without a GPU.

Order: CUPTI first (in this process; it also compiles every solution into Triton's cache, which the ncu run then
finds), the evaluations (their trusted worker ended afterwards), then ncu with the time left (40 s kept for it).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import ncu_report as rep
from ncu_cases import Case, build_call, describe, resolve, select
from ncu_profile import ncu_times

SEED = 20261201


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="write the JSON here")
    ap.add_argument("--cases", default=None, help="comma-separated: case names, 1-based indices, launch-bound, "
                    "mid, large, multi, all (default all; --list shows them)")
    ap.add_argument("--list", action="store_true", help="print the cases and exit (no GPU needed)")
    ap.add_argument("--clocks", default="solbench,ncu,cupti", help="which clocks to read (comma-separated)")
    ap.add_argument("--ncu-launches", type=int, default=5, help="profiled calls per case under ncu (>= 3)")
    ap.add_argument("--cupti-calls", type=int, default=60, help="profiled calls per case for CUPTI (>= 20)")
    ap.add_argument("--budget-s", type=float, default=270.0, help="the whole run's time limit (ncu ends 12 s before)")
    ap.add_argument("--ncu-reserve-s", type=float, default=40.0,
                    help="seconds of the budget kept for the ncu run (on the H200: 105 kernels in 8.1 s, 2026-12-01)")
    ap.add_argument("--ncu", default=None, help="the ncu executable (default: on PATH, else /usr/local/cuda/bin/ncu)")
    ap.add_argument("--seed", type=int, default=SEED)
    args = ap.parse_args(argv)
    if args.ncu_launches < 3:
        ap.error("--ncu-launches must be at least 3")
    if args.cupti_calls < 20:
        ap.error("--cupti-calls must be at least 20")
    if args.budget_s <= 0:
        ap.error("--budget-s must be positive")
    clocks = {c.strip() for c in args.clocks.split(",") if c.strip()}
    if not clocks or clocks - {"solbench", "ncu", "cupti"}:
        ap.error("--clocks takes solbench, ncu and cupti")
    args.clocks = clocks
    try:
        args.selected = select(args.cases)
    except ValueError as exc:
        ap.error(str(exc))
    if not args.selected:
        ap.error("--cases selects no case")
    return args


# ---------------------------------------------------------------- clock (c): CUPTI through kineto


def cupti_times(cases: list[Case], calls: int, seed: int, deadline: float) -> dict[str, dict[str, Any]]:
    """Per case: the CUPTI kernel records of ``calls`` calls, each behind a spin-kernel hold and a read flush."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from solbench.evaluate.timing.rounds import Flusher

    cuda_type = torch.autograd.DeviceType.CUDA
    flush = Flusher(max(torch.cuda.get_device_properties(0).L2_cache_size, 60 << 20), torch.device("cuda"))

    def session(body) -> list[tuple[str, float, float]]:
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            body()
            torch.cuda.synchronize()
        return [(e.name, float(e.time_range.start), float(e.time_range.end)) for e in prof.events()
                if getattr(e, "device_type", None) == cuda_type
                and not any(w in str(getattr(e, "activity_type", "") or "").lower() for w in ("memcpy", "memset"))]

    def harness_only() -> None:
        for _ in range(3):
            torch.cuda._sleep(200_000)
            flush()

    def timed_calls(fn, cycles: int) -> None:
        """``calls`` calls, each behind the hold and the flush, synchronised every 10."""
        for i in range(calls):
            torch.cuda._sleep(cycles)
            flush()
            fn()
            if (i + 1) % 10 == 0:
                torch.cuda.synchronize()

    for _ in range(30):  # the clocks up before anything is recorded
        flush()
    harness = {n for n, _, _ in session(harness_only) if rep.is_kernel(n)}
    out: dict[str, dict[str, Any]] = {}
    for case in cases:
        if time.monotonic() > deadline:
            out[case.name] = {"T_cupti_us": None, "cupti_error": "skipped: the CUPTI phase ran out of time"}
            continue
        fn = inputs = None
        try:
            fn, inputs = build_call(case, "cuda", seed)
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            host_s = time.perf_counter() - t0
            torch.cuda.synchronize()
            cycles = int(min(1.5 * host_s + 50e-6, 0.02) * 2.0e9)  # the hold: the host enqueues flush and call
            events = session(functools.partial(timed_calls, fn, cycles))
            res = rep.cupti_case_time(rep.group_calls(events, harness), calls)
            res["hold_us"] = round(cycles / 2.0e3, 1)
        except Exception as exc:
            res = {"T_cupti_us": None, "cupti_error": f"{type(exc).__name__}: {exc}"[:400]}
        out[case.name] = res
        del fn, inputs
        torch.cuda.empty_cache()
    out["_harness"] = {"kernel_names": sorted(harness)}
    return out


# ---------------------------------------------------------------- clock (a): the evaluator


def solbench_times(cases: list[Case], deadline: float, device: str = "cuda") -> dict[str, dict[str, Any]]:
    """Per case: ``evaluate`` of the example solution on the one workload, baselines off (the language proof off
    too: it times nothing and its profiler start-up costs seconds)."""
    from solbench.evaluate.runner import EvalOptions, evaluate
    from solbench.problems.solution import load_solution

    known = {f.name for f in dataclasses.fields(EvalOptions)}
    hardware = None
    try:  # detected once, not once per evaluation
        from solbench.hardware.registry import detect

        hardware = detect(device)
    except Exception:
        pass
    out: dict[str, dict[str, Any]] = {}
    for case in cases:
        left = deadline - time.monotonic()
        if left < 15:
            out[case.name] = {"T_solbench_us": None, "eval_error": "skipped: the evaluation phase ran out of time"}
            continue
        t0 = time.monotonic()
        try:
            problem, _, path = resolve(case, device)
            want = {"device": device, "workloads": [case.workload], "baselines": (), "profile_dsl": "off",
                    "startup_timeout_s": min(90.0, left), "workload_timeout_s": min(45.0, left), "hardware": hardware}
            ev = evaluate(problem, load_solution(path, problem.name),
                          EvalOptions(**{k: v for k, v in want.items() if k in known}))
            w = ev.workloads[0]
            t = getattr(w, "time_ms", None)
            g = getattr(w, "graph_ms", None)
            res = {"T_solbench_us": t * 1e3 if t is not None else None, "verdict": w.verdict,
                   "timing_method": getattr(w, "timing_method", None), "graph_us": g * 1e3 if g is not None else None,
                   "n_samples": getattr(w, "n_samples", None),
                   "solbench_se_us": rep.median_se([x * 1e3 for x in getattr(w, "samples_ms", None) or []]),
                   "iqr_us": w.iqr_ms * 1e3 if getattr(w, "iqr_ms", None) is not None else None}
            e = getattr(w, "event_time_ms", None)  # with CUPTI timing: the event interval of the same samples
            if e is not None:
                res["event_time_us"] = e * 1e3
            for key in ("timing_notes", "event_gaps", "stray_records"):
                if getattr(w, key, None):
                    res[key] = getattr(w, key)
            if w.verdict != "passed" or t is None:
                res["eval_error"] = f"verdict {w.verdict}: {(w.message or ev.message or '')[:300]}"
        except Exception as exc:
            res = {"T_solbench_us": None, "eval_error": f"{type(exc).__name__}: {exc}"[:400]}
        res["eval_s"] = round(time.monotonic() - t0, 1)
        out[case.name] = res
    return out


# ---------------------------------------------------------------- assembly


def release_memory() -> None:
    """What the CUPTI phase left in torch's caching allocator, given back before the evaluator's processes run."""
    try:
        import gc

        import torch

        gc.collect()
        torch.cuda.empty_cache()
    except Exception:
        pass


def retire_workers() -> None:
    """The evaluator's trusted worker ended before ncu runs (it would sit on the GPU, idle, through the run)."""
    try:
        from solbench.evaluate.trusted import keeper

        keeper.retire_all()
    except Exception:
        pass


def device_info() -> dict[str, Any]:
    try:
        import torch

        return {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                "l2_bytes": torch.cuda.get_device_properties(0).L2_cache_size}
    except Exception as exc:
        return {"device": None, "error": f"{type(exc).__name__}: {exc}"}


def assemble(cases: list[Case], sb: dict, nc: dict, cu: dict) -> list[dict[str, Any]]:
    rows = []
    for case in cases:
        row: dict[str, Any] = {"case": case.name, "problem": case.problem, "workload": case.workload,
                               "size": case.size, "kernels_expected": case.kernels, "multi_kernel": case.multi}
        if case.why:
            row["multi_kernel_why"] = case.why
        row.update(sb.get(case.name, {}))
        row.update(cu.get(case.name, {}))
        row.update(nc.get("per_case", {}).get(case.name, {}))
        row.setdefault("T_solbench_us", None)
        row.setdefault("T_cupti_us", None)
        row.setdefault("T_ncu_us", None)
        notes = []
        if nc.get("target_errors", {}).get(case.name):
            notes.append(nc["target_errors"][case.name])
        per_call = [k for k in row.get("ncu_kernels_per_call", []) if k]
        if per_call and row.get("kernels_per_call") and set(per_call) != {row["kernels_per_call"]}:
            notes.append(f"ncu saw {sorted(set(per_call))} kernels per call, CUPTI {row['kernels_per_call']}")
        if row["T_ncu_us"] is None and not notes:
            notes.append(nc.get("error") or "no ncu time")
        if notes:
            row["ncu_error"] = "; ".join(notes)
        if row.get("kernels_per_call") and row["kernels_per_call"] != case.kernels:
            row["cupti_error"] = "; ".join(filter(None, [row.get("cupti_error"), (
                f"{row['kernels_per_call']} kernels per call, where the solution's source has {case.kernels}")]))
        row.update(rep.compare(row["T_solbench_us"], row["T_ncu_us"], row["T_cupti_us"], row.get("solbench_se_us"),
                               row.get("cupti_se_us")))
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cases = args.selected
    if args.list:
        print(f"{len(cases)} cases ({sum(c.size == 'launch-bound' for c in cases)} launch-bound, "
              f"{sum(c.multi for c in cases)} multi-kernel):")
        for case in cases:
            print(describe(case))
        return 0
    started = time.monotonic()
    deadline = started + args.budget_s
    info = device_info()
    print(f"device: {info.get('device')}  torch {info.get('torch')}  cases: {len(cases)}  budget {args.budget_s:.0f} s",
          flush=True)
    cu: dict = {}
    sb: dict = {}
    nc: dict = {"per_case": {}, "error": "not asked for (--clocks)"}
    if "cupti" in args.clocks:
        try:  # (c) first: it also compiles every solution into Triton's cache, which the ncu run then finds
            cu = cupti_times(cases, args.cupti_calls, args.seed, started + min(90.0, 0.35 * args.budget_s))
        except Exception as exc:
            cu = {c.name: {"cupti_error": f"{type(exc).__name__}: {exc}"[:400]} for c in cases}
        release_memory()
        print(f"CUPTI done ({time.monotonic() - started:.0f} s)", flush=True)
    if "solbench" in args.clocks:
        reserve = args.ncu_reserve_s if "ncu" in args.clocks else 5.0  # what the ncu run keeps for itself
        try:
            sb = solbench_times(cases, max(deadline - reserve, time.monotonic() + 30))
        except Exception as exc:
            sb = {c.name: {"eval_error": f"{type(exc).__name__}: {exc}"[:400]} for c in cases}
        retire_workers()
        print(f"evaluations done ({time.monotonic() - started:.0f} s)", flush=True)
    if "ncu" in args.clocks:
        counts = {c.name: (cu.get(c.name) or {}).get("kernels_per_call") or c.kernels for c in cases}
        try:
            nc = ncu_times(cases, args.ncu_launches, args.seed, deadline - time.monotonic() - 12, counts, args.ncu)
        except Exception as exc:
            nc = {"per_case": {}, "error": f"{type(exc).__name__}: {exc}"[:400]}
        print(f"ncu done ({time.monotonic() - started:.0f} s)", flush=True)
    rows = assemble(cases, sb, nc, cu)
    summary = rep.summarize(rows)
    print()
    print(rep.format_table(rows))
    print()
    if nc.get("error"):
        print("ncu: " + " ".join(str(nc["error"]).split()))
    elif nc.get("attribution"):
        print(f"ncu: {nc.get('version') or nc.get('path')}; kernels attributed by {nc['attribution']}, "
              f"{len(nc.get('kernels', []))} profiled in {nc.get('ncu_s')} s")
    print(rep.summary_line(summary))
    elapsed = time.monotonic() - started
    print(f"elapsed {elapsed:.0f} s")
    if args.out:
        doc = {"device": info, "settings": {"ncu_launches": args.ncu_launches, "cupti_calls": args.cupti_calls,
                                            "seed": args.seed, "clocks": sorted(args.clocks),
                                            "targets": {"ncu_rel": rep.NCU_REL, "ncu_min_us": rep.NCU_MIN_US,
                                                        "cupti_abs_us": rep.CUPTI_ABS_US}},
               "cases": rows, "summary": summary, "summary_line": rep.summary_line(summary),
               "ncu": {k: v for k, v in nc.items() if k != "per_case"},
               "cupti_harness": cu.get("_harness"), "elapsed_s": round(elapsed, 1)}
        Path(args.out).write_text(json.dumps(doc, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
