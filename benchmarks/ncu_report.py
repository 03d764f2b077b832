"""The CPU-side logic of benchmarks/ncu_agreement.py, kept free of any GPU so that tests can feed it fabricated
data: Nsight Compute's CSV, the attribution of its kernels to cases and calls, the grouping of CUPTI kernel
records into calls, the comparison with the targets, the table and the summary."""

from __future__ import annotations

import csv
import io
import re
import statistics
from collections.abc import Iterable
from typing import Any

METRIC = "gpu__time_duration.sum"
#: the NVTX push/pop range every profiled call runs in (ncu_target.py); ``--nvtx-include "solbench_ncu/"``
PROFILED_RANGE = "solbench_ncu"
#: the per-call range around it: case index and call index, for attributing kernels to calls
CALL_RANGE_RE = re.compile(r"sbncu_c(\d+)_k(\d+)")
#: the targets: solbench within 3% of ncu for kernels of 20 us or more, within 0.3 us of CUPTI at every size
NCU_MIN_US = 20.0
NCU_REL = 0.03
CUPTI_ABS_US = 0.3
NCU_SMALL = "ncu cache control"  # the ncu target does not apply (< 20 us): ncu's cache control adds ~1 us there
_UNIT_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6,
            "second": 1e6}


def call_range(case_index: int, call: int) -> str:
    return f"sbncu_c{case_index:02d}_k{call:02d}"


def median(xs: Iterable[float]) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def median_se(xs: list[float] | None, resamples: int = 400, seed: int = 0) -> float | None:
    """The bootstrap standard error of the median of ``xs`` (None for fewer than 5 values)."""
    import random

    if not xs or len(xs) < 5:
        return None
    rng = random.Random(seed)
    meds = [statistics.median(rng.choices(xs, k=len(xs))) for _ in range(resamples)]
    return statistics.pstdev(meds)


# ---------------------------------------------------------------- Nsight Compute CSV


def parse_ncu_csv(text: str) -> list[dict[str, Any]]:
    """The profiled kernels of ``ncu --csv`` output (details page), in launch order: id, name, duration_us and the
    row's NVTX columns as one string. ncu's own messages (``==PROF==``, ``==WARNING==``) and the target's output
    may surround or interleave the CSV; only the header line and the rows that follow it in CSV form are read.
    ValueError when there is no CSV or no row of the metric."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        raise ValueError("no CSV header in ncu's output")
    body = [lines[start]] + [ln for ln in lines[start + 1:] if ln.startswith('"')]
    kernels: dict[int, dict[str, Any]] = {}
    for row in csv.DictReader(io.StringIO("\n".join(body))):
        if (row.get("Metric Name") or "").strip() != METRIC:
            continue
        try:
            kid = int((row.get("ID") or "").strip())
            value = float((row.get("Metric Value") or "").replace(",", "").strip())
        except ValueError:
            continue
        unit = (row.get("Metric Unit") or "nsecond").strip()
        if unit not in _UNIT_US:
            raise ValueError(f"unknown unit {unit!r} for {METRIC}")
        # the NVTX columns ("thread Domain:Push/Pop_Range:..."); every cell but the kernel's name, should a
        # version of ncu name them otherwise (the per-call range names are distinctive)
        nvtx = " ".join(str(v) for k, v in row.items() if k != "Kernel Name" and isinstance(v, str) and "sbncu_" in v)
        nvtx = nvtx or " ".join(str(v) for k, v in row.items()
                                if k and isinstance(v, str) and ("range" in k.lower() or "nvtx" in k.lower()))
        kernels[kid] = {"id": kid, "name": (row.get("Kernel Name") or "").strip(), "duration_us": value * _UNIT_US[unit],
                        "nvtx": nvtx}
    if not kernels:
        raise ValueError(f"ncu's CSV holds no {METRIC} row")
    return [kernels[k] for k in sorted(kernels)]


def attribute(kernels: list[dict[str, Any]], names: list[str], launches: int, counts: dict[str, int] | None = None,
              ran: list[str] | None = None) -> tuple[dict[str, list[list[dict[str, Any]]]], str, list[str]]:
    """The profiled kernels by case and call: ({case: [[kernels of call 0], ...]}, method, problems).

    ``names`` are the cases in the target's order (case index = position). By NVTX (method "nvtx") where the rows
    carry the per-call ranges; otherwise by launch order (method "order"), cutting the kernels into ``launches``
    calls of ``counts[case]`` kernels for each case that ran (``ran``, the target's manifest; default all), in
    order; the counts (from CUPTI) must account for every kernel."""
    problems: list[str] = []
    out: dict[str, list[list[dict[str, Any]]]] = {n: [[] for _ in range(launches)] for n in names}
    tagged = [(k, CALL_RANGE_RE.search(k.get("nvtx") or "")) for k in kernels]
    if any(m for _, m in tagged):
        stray = 0
        for k, m in tagged:
            ci, call = (int(m.group(1)), int(m.group(2))) if m else (-1, -1)
            if not (0 <= ci < len(names) and 0 <= call < launches):
                stray += 1
                continue
            out[names[ci]][call].append(k)
        if stray:
            problems.append(f"{stray} profiled kernel(s) outside any case's call range")
        return out, "nvtx", problems
    counts = counts or {}
    names = [n for n in names if ran is None or n in ran]
    out = {n: out[n] for n in names}
    missing = [n for n in names if not counts.get(n)]
    if missing:
        return ({}, "order", [f"no NVTX ranges in ncu's rows and no kernel count per call for {', '.join(missing)}"])
    want = sum(counts[n] * launches for n in names)
    if want != len(kernels):
        why = (f"no NVTX ranges in ncu's rows, and {len(kernels)} kernels profiled where the CUPTI counts give "
               f"{want}: cannot attribute them by order")
        return {}, "order", [why]
    i = 0
    for n in names:
        for call in range(launches):
            out[n][call] = kernels[i:i + counts[n]]
            i += counts[n]
    return out, "order", problems


def ncu_case_time(calls: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """One case's ncu figures: the median over its calls of each call's kernel durations summed (calls that
    profiled no kernel left out), the kernels per call, the first call's kernel names."""
    sums = [sum(k["duration_us"] for k in c) for c in calls if c]
    first = next((c for c in calls if c), [])
    return {"T_ncu_us": median(sums), "ncu_calls_us": sums, "ncu_kernels_per_call": [len(c) for c in calls],
            "ncu_kernel_names": [k["name"][:100] for k in first]}


# ---------------------------------------------------------------- CUPTI (kineto) records


def is_kernel(name: str) -> bool:
    """Device records that are not kernels (copies, memsets) are left out."""
    low = name.lower()
    return not low.startswith(("memcpy", "memset", "[memory]"))


def group_calls(events: list[tuple[str, float, float]], harness: set[str]) -> list[list[tuple[str, float, float]]]:
    """The solution's kernels of each call, from device records (name, start_us, end_us) of a session in which
    every call followed harness kernels (the hold's spin kernel and the read flush, named in ``harness``): walked
    in start order, a harness kernel ends the call being gathered."""
    groups: list[list[tuple[str, float, float]]] = []
    current: list[tuple[str, float, float]] = []
    for ev in sorted((e for e in events if is_kernel(e[0])), key=lambda e: e[1]):
        if ev[0] in harness:
            if current:
                groups.append(current)
            current = []
        else:
            current.append(ev)
    if current:
        groups.append(current)
    return groups


def cupti_case_time(groups: list[list[tuple[str, float, float]]], calls: int) -> dict[str, Any]:
    """One case's CUPTI figures: per call the span from the first kernel's start to the last one's end (for one
    kernel, its duration), and the median. An error where the calls seen are not the calls made."""
    out: dict[str, Any] = {"T_cupti_us": None, "cupti_error": None}
    if len(groups) != calls:
        out["cupti_error"] = f"{len(groups)} kernel groups for {calls} calls"
        return out
    sizes = {len(g) for g in groups}
    if len(sizes) != 1:
        out["cupti_error"] = f"kernels per call differ between calls: {sorted(sizes)}"
        return out
    spans = [max(e[2] for e in g) - min(e[1] for e in g) for g in groups]
    busy = [sum(e[2] - e[1] for e in g) for g in groups]
    out.update(T_cupti_us=median(spans), cupti_busy_us=median(busy), cupti_calls=len(groups),
               cupti_se_us=median_se(spans),
               kernels_per_call=len(groups[0]), kernel_names=[e[0] for e in groups[0]],
               cupti_min_us=min(spans), cupti_max_us=max(spans))
    return out


# ---------------------------------------------------------------- comparison, table, summary


def compare(t_solbench_us: float | None, t_ncu_us: float | None, t_cupti_us: float | None,
            se_solbench_us: float | None = None, se_cupti_us: float | None = None) -> dict[str, Any]:
    """The gaps and the targets of one case: solbench vs ncu in % (target: within 3% where ncu times 20 us or
    more; below that the row says "ncu cache control" and keeps the gap), solbench vs CUPTI in us (target: within
    0.3 us at every size). A target whose clocks are missing is "n/a". With the two medians' standard errors,
    ``gap_cupti_se_us`` is the standard error of their difference: a miss within two of them is a difference
    the two sets of samples cannot tell from run-to-run noise (``cupti_within_noise``)."""
    sb, nc, cu = t_solbench_us, t_ncu_us, t_cupti_us
    gap_ncu = (sb - nc) / nc * 100.0 if sb is not None and nc else None
    gap_cupti = sb - cu if sb is not None and cu is not None else None
    if gap_ncu is None:
        ncu_target = "n/a"
    elif nc < NCU_MIN_US:
        ncu_target = NCU_SMALL
    else:
        ncu_target = "met" if abs(gap_ncu) <= NCU_REL * 100.0 + 1e-9 else "missed"
    if gap_cupti is None:
        cupti_target = "n/a"
    else:
        cupti_target = "met" if abs(gap_cupti) <= CUPTI_ABS_US + 1e-9 else "missed"
    out = {"gap_ncu_pct": gap_ncu, "gap_cupti_us": gap_cupti, "ncu_target": ncu_target,
           "cupti_target": cupti_target}
    if gap_cupti is not None and se_solbench_us is not None and se_cupti_us is not None:
        se = (se_solbench_us ** 2 + se_cupti_us ** 2) ** 0.5
        out["gap_cupti_se_us"] = se
        out["cupti_within_noise"] = abs(gap_cupti) <= 2 * se
    return out


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Met / missed counts over the cases, per target and together, and ncu's gap where its target does not apply."""
    def count(key: str, what: str) -> int:
        return sum(1 for r in rows if r.get(key) == what)

    s = {"cases": len(rows),
         "ncu_met": count("ncu_target", "met"), "ncu_missed": count("ncu_target", "missed"),
         "ncu_cache_control": count("ncu_target", NCU_SMALL), "ncu_na": count("ncu_target", "n/a"),
         "cupti_met": count("cupti_target", "met"), "cupti_missed": count("cupti_target", "missed"),
         "cupti_na": count("cupti_target", "n/a"),
         "cupti_missed_within_noise": sum(1 for r in rows if r.get("cupti_target") == "missed"
                                          and r.get("cupti_within_noise"))}
    s["met"] = s["ncu_met"] + s["cupti_met"]
    s["missed"] = s["ncu_missed"] + s["cupti_missed"]
    small = [r["T_solbench_us"] - r["T_ncu_us"] for r in rows
             if r.get("ncu_target") == NCU_SMALL and r.get("T_solbench_us") is not None]
    s["ncu_small_gap_us_median"] = median(small)
    below = [r["T_ncu_us"] - r["T_cupti_us"] for r in rows
             if r.get("T_ncu_us") is not None and r.get("T_cupti_us") is not None and r["T_ncu_us"] < NCU_MIN_US]
    s["ncu_minus_cupti_small_us_median"] = median(below)
    return s


def summary_line(s: dict[str, Any]) -> str:
    line = (f"targets met: {s['met']}, missed: {s['missed']} over {s['cases']} cases "
            f"(ncu within {NCU_REL:.0%} at >= {NCU_MIN_US:g} us: {s['ncu_met']} met, {s['ncu_missed']} missed, "
            f"{s['ncu_cache_control']} below {NCU_MIN_US:g} us ({NCU_SMALL}), {s['ncu_na']} n/a; "
            f"CUPTI within {CUPTI_ABS_US:g} us: {s['cupti_met']} met, {s['cupti_missed']} missed "
            f"({s.get('cupti_missed_within_noise', 0)} of them within two standard errors), {s['cupti_na']} n/a)")
    if s.get("ncu_small_gap_us_median") is not None:
        line += f"; below {NCU_MIN_US:g} us solbench - ncu is {s['ncu_small_gap_us_median']:+.2f} us (median)"
    if s.get("ncu_minus_cupti_small_us_median") is not None:
        line += f", ncu - CUPTI {s['ncu_minus_cupti_small_us_median']:+.2f} us"
    return line


def _f(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


COLUMNS = (("case", 26), ("size", 12), ("k", 2), ("T_solbench", 10), ("T_ncu", 9), ("T_cupti", 9), ("sb-ncu", 8),
           ("sb-cupti", 8), ("2se", 5), ("ncu target", 17), ("cupti", 6), ("timing", 12))


def format_table(rows: list[dict[str, Any]]) -> str:
    """The printed table: times in us, gaps in % (ncu) and us (CUPTI), the targets, the evaluator's timing method;
    each row's errors on the lines under it."""
    head = " ".join(f"{name:>{w}s}" if i >= 2 else f"{name:{w}s}" for i, (name, w) in enumerate(COLUMNS))
    out = [head + "   (times in us)", "-" * len(head)]
    for r in rows:
        k = r.get("kernels_per_call") or r.get("kernels_expected")
        cells = [r["case"], r.get("size", ""), str(k or "-"), _f(r.get("T_solbench_us"), ".2f"),
                 _f(r.get("T_ncu_us"), ".2f"), _f(r.get("T_cupti_us"), ".2f"), _f(r.get("gap_ncu_pct"), "+.1f") +
                 ("%" if r.get("gap_ncu_pct") is not None else ""), _f(r.get("gap_cupti_us"), "+.2f"),
                 _f(2 * r["gap_cupti_se_us"] if r.get("gap_cupti_se_us") is not None else None, ".2f"),
                 r.get("ncu_target", "n/a"), r.get("cupti_target", "n/a"), str(r.get("timing_method") or "-")]
        out.append(" ".join(f"{c:>{w}s}" if i >= 2 else f"{c:{w}s}" for i, (c, (_, w)) in enumerate(zip(cells, COLUMNS))))
        for key in ("eval_error", "cupti_error", "ncu_error"):
            if r.get(key):
                out.append(f"{'':4s}{key.split('_')[0]}: {r[key]}")
    out.append("sb-ncu: (T_solbench - T_ncu) / T_ncu; sb-cupti: T_solbench - T_cupti in us; 2se: two standard "
               "errors of that difference (bootstrap of both medians); k: kernels per call")
    multi = [r for r in rows if (r.get("kernels_per_call") or 0) > 1]
    for r in multi:
        out.append(f"multi-kernel {r['case']}: CUPTI first start to last end {_f(r.get('T_cupti_us'), '.2f')} us, "
                   f"kernels busy {_f(r.get('cupti_busy_us'), '.2f')} us; ncu's kernels summed "
                   f"{_f(r.get('T_ncu_us'), '.2f')} us ({', '.join(r.get('kernel_names') or [])[:120]})")
    return "\n".join(out)
