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
    """The unmeasured run of each tool, then up to ``args.rounds`` rounds, each tool's run printed as it ends; with
    ``args.budget_s`` no round starts that the last one's walls say would not end in the time left, and a run in
    flight is stopped at the budget's end, so the report always comes (a stage's limit would lose it)."""
    ours, peer = solbench_command(args), args.peer
    deadline = time.monotonic() + args.budget_s if args.budget_s else float("inf")

    def run(label: str, tool: str) -> dict:
        limit = max(1.0, min(args.limit_s, deadline - time.monotonic()))
        r = timed(ours, None, limit) if tool == "solbench" else timed(peer, args.peer_cwd, limit, True)
        print(f"{label} {tool}: {r['wall_s']} s, exit {r['rc']}", flush=True)
        return r

    warm = {tool: run("unmeasured", tool) for tool in ("solbench", "peer")}
    rounds, last = [], sum(w["wall_s"] for w in warm.values())
    for i in range(args.rounds):
        if time.monotonic() + last > deadline:
            print(f"round {i + 1}: not started, {deadline - time.monotonic():.0f} s of the budget left", flush=True)
            break
        r = {tool: run(f"round {i + 1}", tool) for tool in ("solbench", "peer")}
        if any(x["rc"] == 124 for x in r.values()):
            break  # stopped by the budget or its limit: not a round
        rounds.append(r)
        last = sum(x["wall_s"] for x in r.values())
    return summary(args, ours, warm, rounds)


def summary(args: argparse.Namespace, ours: list[str], warm: dict, rounds: list[dict]) -> dict:
    walls = {k: [r[k]["wall_s"] for r in rounds] for k in ("solbench", "peer")}
    ok = {k: bool(rounds) and all(r[k]["rc"] == 0 for r in rounds) for k in ("solbench", "peer")}
    med = {k: statistics.median(v) if v else None for k, v in walls.items()}
    ratio = med["solbench"] / med["peer"] if rounds and med["peer"] > 0 else None
    return {"solbench_command": shlex.join(ours), "peer_command": args.peer, "peer_cwd": args.peer_cwd,
            "warm_up_s": {k: v["wall_s"] for k, v in warm.items()}, "rounds": len(rounds), "wall_s": walls,
            "median_s": med, "all_exited_0": ok, "ratio": round(ratio, 3) if ratio else None,
            "target_ratio": TARGET_RATIO, "met": bool(ratio is not None and ratio <= TARGET_RATIO and all(ok.values())),
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
    ap.add_argument("--budget-s", type=float, default=None, help="the whole comparison's time limit")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if not Path(args.problem).is_dir() or not Path(args.solution).is_file():
        print("cost_side_by_side: --problem must be a directory and --solution a file", file=sys.stderr)
        return 2
    result = side_by_side(args)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    if not result["rounds"]:
        print("cost_side_by_side: no timed round ended within the budget", file=sys.stderr)
        return 1
    med = result["median_s"]
    print(f"solbench: {result['wall_s']['solbench']} s (median {med['solbench']:.2f}); "
          f"peer: {result['wall_s']['peer']} s (median {med['peer']:.2f}); "
          f"ratio {result['ratio']} (target <= {TARGET_RATIO}: {'met' if result['met'] else 'missed'})")
    print(json.dumps(result["solbench_last"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
