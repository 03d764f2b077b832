"""Where one solution's evaluation goes, by phase: ``solbench eval --json`` run cold several times in a row.

    python benchmarks/eval_phases.py --problem DIR_OR_NAME --solution FILE [--device cuda] [--db DB] \
        [--runs 3] [--src DIR ...] [--out phases.json]

Each run is a fresh process (the CLI's start, the trusted worker's and the candidate's included: ``outside`` is
the command's time around the evaluation itself, its imports and its printing); the first
measures the baselines a database lacks, the later ones find them cached. Per run: the wall time, the worker's
time, and each phase summed over the workloads (nested phases, ``timing.audit.bracket`` in ``timing.audit`` in
``timing``, are part of their parent; the audit's input draws are in ``inputs``), so that two trees can be
compared phase by phase on one machine. ``--src`` (repeatable) names trees whose ``src`` to run (an older
commit's, from ``git archive``): the runs then alternate between them, A B A B, so that neither tree meets a
warmer machine than the other.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

#: the phases printed, in this order, with their columns' names (the rest are kept in the JSON)
SHOWN = {"worker": "worker", "worker_start": "w.start", "candidate_start": "c.start", "inputs": "inputs",
         "calls": "calls", "compare": "compare", "timing": "timing", "timing.rounds": "rounds", "timing.audit": "audit",
         "timing.audit.bracket": "brackets", "timing.audit.check": "checks", "timing.audit.calibration": "calib"}


def phases(evaluation: dict) -> dict[str, float]:
    """The evaluation's phases in seconds: the runner's, the worker's and every workload's summed (the runner
    merges the workloads' into its own)."""
    return {k: round(v, 3) for k, v in sorted((evaluation.get("phases") or {}).items())}


def one(args: argparse.Namespace, src: str | None) -> dict:
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path(src).resolve()), env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, "-m", "solbench.cli", "eval", "--problem", args.problem, "--solution", args.solution,
           "--device", args.device, "--db", args.db, "--json", "--quiet"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=args.limit_s,
                          env=env)
    wall = time.perf_counter() - t0
    try:
        ev = json.loads(proc.stdout)
    except ValueError:
        return {"wall_s": round(wall, 2), "rc": proc.returncode, "error": (proc.stderr or proc.stdout)[-400:]}
    # outside: the command's own start and end around ``evaluate`` (imports, loading, storing, printing)
    outside = wall - ev["elapsed_s"] if isinstance(ev.get("elapsed_s"), (int, float)) else None
    return {"wall_s": round(wall, 2), "rc": proc.returncode, "verdict": ev.get("verdict"),
            "outside_s": None if outside is None else round(outside, 3),
            "workloads": len(ev.get("workloads") or []), "phases": phases(ev)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", required=True)
    ap.add_argument("--solution", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--db", default="phases.db")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--limit-s", type=float, default=300)
    ap.add_argument("--src", action="append", help="a tree's src to run (repeatable; default: this environment's)")
    ap.add_argument("--out")
    args = ap.parse_args()
    runs = []
    head = " ".join(f"{name:>8}" for name in SHOWN.values())
    print(f"{'run':>5} {'wall s':>6} {'outside':>7} {'verdict':>8} {head}")
    for i in range(args.runs):
        for t, src in enumerate(args.src or [None]):
            r = dict(one(args, src), src=src)
            runs.append(r)
            label = f"{i + 1}{chr(ord('a') + t) if args.src else ''}"
            if "error" in r:
                print(f"{label:>5} {r['wall_s']:>6} rc {r['rc']}: {r['error']}")
                continue
            cells = " ".join(f"{r['phases'].get(p, 0.0):>8.3f}" for p in SHOWN)
            outside = "" if r["outside_s"] is None else f"{r['outside_s']:.2f}"
            print(f"{label:>5} {r['wall_s']:>6} {outside:>7} {r['verdict']:>8} {cells}")
    if args.out:
        Path(args.out).write_text(json.dumps({"problem": args.problem, "solution": args.solution,
                                              "device": args.device, "runs": runs}, indent=1))
    return 0 if all(r.get("rc") == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
