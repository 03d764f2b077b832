"""The cost of one solution, solbench against a peer's CLI, side by side in one call (issue 23's first target).

Each tool evaluates the same solution of the same problem (its definition and workloads unmodified) as a separate
cold process, alternating A B A B, so that both see the same machine state: solbench with

    python -m solbench.cli eval --problem PROBLEM --solution SOLUTION --device DEVICE --db DB --json

and the peer with the command line given (``--peer``, run by the shell in ``--peer-cwd``; for SOL-ExecBench the
one docs/PERFORMANCE.md names, with SOL-ExecBench installed from carried wheels and its example copied from a
snapshot: its code is run, never copied into this repository). Before the timed rounds each tool runs once
unmeasured, so that solbench's baselines are cached in DB and both tools' compile caches are warm, as in the
issue's measurement. Reported per tool: every round's wall time, their median, and the ratio solbench / peer
(target: at most 0.5); for solbench also its verdict, workloads and the phase breakdown of its last round
(from ``--json``: where the time goes).

    python benchmarks/cost_side_by_side.py --problem DIR --solution FILE --peer "CMD" --peer-cwd DIR \
        --db gpu.db --rounds 2 --out cost.json
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET_RATIO = 0.5


def timed(cmd: list[str] | str, cwd: str | None, limit_s: float, shell: bool = False) -> dict:
    """One cold process: its wall time, exit status and output's tail (stdout kept whole for solbench's JSON)."""
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=cwd, shell=shell, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=limit_s)
        rc, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc, out, err = 124, (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else \
            (exc.stdout or ""), "timed out"
    return {"wall_s": round(time.perf_counter() - t0, 3), "rc": rc, "stdout": out, "stderr_tail": (err or "")[-2000:]}


def solbench_command(args: argparse.Namespace) -> list[str]:
    return [sys.executable, "-m", "solbench.cli", "eval", "--problem", args.problem, "--solution", args.solution,
            "--device", args.device, "--db", args.db, "--json"]


def solbench_summary(run: dict) -> dict:
    """Verdict, workloads and phases from solbench's ``--json`` output (an object, or a list of one)."""
    try:
        data = json.loads(run["stdout"])
    except (json.JSONDecodeError, TypeError):
        return {"error": "no JSON on stdout", "stdout_tail": (run.get("stdout") or "")[-1000:]}
    ev = data[0] if isinstance(data, list) else data
    phases = ev.get("phases") or {}
    top = dict(sorted(phases.items(), key=lambda kv: -kv[1])[:12])
    return {"verdict": ev.get("verdict"), "workloads": len(ev.get("workloads") or []),
            "elapsed_s": ev.get("elapsed_s"), "phases_s": {k: round(v, 3) for k, v in top.items()}}


def side_by_side(args: argparse.Namespace) -> dict:
    ours = solbench_command(args)
    peer = args.peer
    warm = {"solbench": timed(ours, None, args.limit_s), "peer": timed(peer, args.peer_cwd, args.limit_s, True)}
    rounds = []
    for _ in range(args.rounds):
        a = timed(ours, None, args.limit_s)
        b = timed(peer, args.peer_cwd, args.limit_s, True)
        rounds.append({"solbench": a, "peer": b})
    walls = {k: [r[k]["wall_s"] for r in rounds] for k in ("solbench", "peer")}
    ok = {k: all(r[k]["rc"] == 0 for r in rounds) for k in ("solbench", "peer")}
    med = {k: statistics.median(v) for k, v in walls.items()}
    ratio = med["solbench"] / med["peer"] if med["peer"] > 0 else None
    return {"solbench_command": shlex.join(ours), "peer_command": peer, "peer_cwd": args.peer_cwd,
            "warm_up_s": {k: v["wall_s"] for k, v in warm.items()}, "wall_s": walls, "median_s": med,
            "all_exited_0": ok, "ratio": round(ratio, 3) if ratio else None, "target_ratio": TARGET_RATIO,
            "met": bool(ratio is not None and ratio <= TARGET_RATIO and all(ok.values())),
            "solbench_last": solbench_summary(rounds[-1]["solbench"]) if rounds else None,
            "failures": {k: [r[k]["stderr_tail"] for r in rounds if r[k]["rc"] != 0][:1] for k in ("solbench", "peer")},
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host_cores": len(os.sched_getaffinity(0))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problem", required=True, help="the problem's directory (the peer's definition, unmodified)")
    ap.add_argument("--solution", required=True, help="the solution file both tools evaluate")
    ap.add_argument("--peer", required=True, help="the peer CLI's command line (run by the shell)")
    ap.add_argument("--peer-cwd", default=None)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--db", default="cost.db")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--limit-s", type=float, default=240.0, help="each process's time limit")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if not Path(args.problem).is_dir() or not Path(args.solution).is_file():
        print("cost_side_by_side: --problem must be a directory and --solution a file", file=sys.stderr)
        return 2
    result = side_by_side(args)
    print(f"solbench: {result['wall_s']['solbench']} s (median {result['median_s']['solbench']:.2f}); "
          f"peer: {result['wall_s']['peer']} s (median {result['median_s']['peer']:.2f}); "
          f"ratio {result['ratio']} (target <= {TARGET_RATIO}: {'met' if result['met'] else 'missed'})")
    print(json.dumps(result["solbench_last"], indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
