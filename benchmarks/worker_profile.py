"""Where a solution's time goes in the trusted worker (and with ``--candidate`` in the candidate's process): one
``solbench eval`` with the worker under cProfile.

    python benchmarks/worker_profile.py --problem DIR_OR_NAME --solution FILE [--device cuda] [--db DB] \
        [--top 40] [--out profile.txt] [--dump profile.pstats] [--candidate] [--dump-candidate candidate.pstats]

The worker writes one profile per job (``SOLBENCH_WORKER_PROFILE``); they are merged and printed by cumulative
time and by own time, so a phase of docs/PERFORMANCE.md's breakdown can be followed down to the calls it makes.
``--candidate``: each candidate's process (the solution's, and the audit's null candidate) profiles its commands
too (``SOLBENCH_CANDIDATE_PROFILE``), printed after the worker's, merged.
"""

from __future__ import annotations

import argparse
import io
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from solbench.evaluate.candidate.profiling import VAR as CANDIDATE_VAR
from solbench.evaluate.trusted.profiling import WORKER_VAR


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", required=True)
    ap.add_argument("--solution", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--db", default="profile.db")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--limit-s", type=float, default=300)
    ap.add_argument("--out")
    ap.add_argument("--dump", help="also write the merged profile here (pstats' format, for callers and callees)")
    ap.add_argument("--candidate", action="store_true", help="profile the candidates' processes too")
    ap.add_argument("--dump-candidate", help="write the candidates' merged profile here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="solbench-profile-") as where, \
            tempfile.TemporaryDirectory(prefix="solbench-candidate-profile-") as cand_where:
        os.chmod(where, 0o777)
        env = dict(os.environ, **{WORKER_VAR: where})
        if args.candidate or args.dump_candidate:
            env[CANDIDATE_VAR] = cand_where
        cmd = [sys.executable, "-m", "solbench.cli", "eval", "--problem", args.problem, "--solution", args.solution,
               "--device", args.device, "--db", args.db]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=args.limit_s)
        wall = time.perf_counter() - t0
        files = sorted(Path(where).glob("*.prof"))
        text = io.StringIO()
        print(f"eval: rc {proc.returncode}, {wall:.1f} s wall, {len(files)} worker profile(s)", file=text)
        print(proc.stdout[-3000:], proc.stderr[-1500:], sep="\n", file=text)
        report(files, args.dump, args.top, text, "the trusted worker")
        if args.candidate or args.dump_candidate:
            report(sorted(Path(cand_where).glob("*.prof")), args.dump_candidate, args.top, text, "the candidates")
    print(text.getvalue())
    if args.out:
        Path(args.out).write_text(text.getvalue())
    return 0 if files else 1


def report(files: list[Path], dump: str | None, top: int, text: io.StringIO, whose: str) -> None:
    """``files`` merged: written to ``dump`` (pstats' format) and printed by cumulative and by own time."""
    print(f"\n==== {whose}: {len(files)} profile(s) ====", file=text)
    if not files:
        return
    stats = pstats.Stats(*map(str, files), stream=text)
    if dump:
        stats.dump_stats(dump)
    stats.strip_dirs()
    for key in ("cumulative", "tottime"):
        print(f"\n== by {key} ==", file=text)
        stats.sort_stats(key).print_stats(top)


if __name__ == "__main__":
    sys.exit(main())
