"""Validate solbench's timing protocol against Nsight Compute's gpu__time_duration.

Runs benchmarks/ncu_target.py under `ncu --clock-control none` (clocks are left
alone, as on a shared machine; ncu flushes caches before each kernel by
default), then times the same ops in-process with solbench's protocol (read
flush, events queued behind it, median). Prints both and the relative gap.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def ncu_durations() -> list[tuple[str, float]]:
    ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    # only kernels inside the target's NVTX range "profiled" (after warm-up) are measured
    cmd = [ncu, "--clock-control", "none", "--metrics", "gpu__time_duration.sum", "--csv", "--nvtx",
           "--nvtx-include", "profiled/", sys.executable, str(HERE / "ncu_target.py")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL,
                          env=dict(os.environ))
    text = proc.stdout
    start = text.find('"ID"')
    if start < 0:
        raise RuntimeError(f"ncu produced no CSV (rc {proc.returncode}): {proc.stdout[-1500:]} {proc.stderr[-1500:]}")
    rows = list(csv.DictReader(io.StringIO(text[start:])))
    out = []
    for row in rows:
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        unit = row.get("Metric Unit", "ns")
        scale = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0}.get(unit, 1e-6)
        out.append((row["Kernel Name"], value * scale))
    return out


def solbench_times() -> list[tuple[str, float]]:
    from ncu_target import ops

    from solbench.evaluate.timing import Flusher, TimingConfig, time_cuda

    flush = Flusher(torch.cuda.get_device_properties(0).L2_cache_size, torch.device("cuda"))
    res = []
    for name, fn in ops():
        t = time_cuda(lambda i, f=fn: f(), 1, flush, TimingConfig(budget_s=0.5), graph=False)
        res.append((name, t.median_ms))
    return res


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    from ncu_target import REPS

    ours = solbench_times()
    kernels = ncu_durations()
    rows = []
    for i, (name, ms) in enumerate(ours):
        chunk = kernels[i * REPS:(i + 1) * REPS]
        ncu_ms = statistics.median(k[1] for k in chunk) if chunk else None
        rows.append({"op": name, "kernel": chunk[0][0][:60] if chunk else None, "solbench_ms": ms, "ncu_ms": ncu_ms,
                     "rel_gap": (ms - ncu_ms) / ncu_ms if ncu_ms else None})
    print(f"{'op':40s} {'solbench ms':>12s} {'ncu ms':>10s} {'gap':>8s}  kernel")
    for r in rows:
        gap = f"{r['rel_gap']:+.1%}" if r["rel_gap"] is not None else "-"
        print(f"{r['op']:40s} {r['solbench_ms']:12.4f} {r['ncu_ms'] or float('nan'):10.4f} {gap:>8s}  {r['kernel']}")
    if args.out:
        Path(args.out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows,
                                              "kernels": kernels}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
