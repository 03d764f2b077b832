"""The integrity corpus's compiled solutions built into the build cache on the host, nothing run on the GPU.

    python scripts/prebuild_corpus.py [--list] [--workers N]

`gpu-check.sh quick+prebuild` (or `corpus+prebuild`) runs this beside the corpus: the corpus evaluates its
solutions one at a time on the GPU, and each compiled one (the CUDA C++ fixtures of tests/honest and
tests/exploits) used to build there first, in series (the four honest `i21_02` softmaxes 23 to 50 s each on an H100,
2026-12-07), while the host's other cores sat idle. Here they are built side by side, in the order the corpus meets
them, by the same call an evaluation's build makes (``native.pool.solution_build``, the sandbox view of an
evaluation without a database), so that the corpus's own builds find the cache filled; nothing built here is
trusted for it (the evaluation checks the cached bytes as always). The entries are those the GPU test set runs
(``tests/corpus/test_exploits.py``), and of the exploits only those the static scan lets through to a build: a
source it rejects is never compiled by an evaluation, and is not here either.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "src")]


def selected() -> list[tuple[str, object]]:
    """(name, solution) of every compiled solution the GPU test set evaluates from the corpus, in the order it
    evaluates them, each once; exploits the static scan rejects left out."""
    from solbench.evaluate.languages import get_language
    from solbench.evaluate.static_reject import static_findings
    from solbench.problems.solution import load_solution
    from tests.corpus.test_exploits import EXPLOITS, HONEST, _on_the_gpu_too, _problem
    from tests.paths import TESTS

    def on_gpu(entries):
        return [e for e in entries if e["runs_on"] == "gpu"] + [p.values[0] for p in _on_the_gpu_too(entries)]

    out, seen = [], set()
    for folder, entries in (("exploits", on_gpu(EXPLOITS)), ("honest", on_gpu(HONEST))):
        for entry in entries:
            name = f"{folder}/{entry['file']}"
            if name in seen:
                continue
            seen.add(name)
            problem = _problem(entry)
            solution = load_solution(TESTS / folder / entry["file"], problem.name)
            language = get_language(solution.language)
            if not hasattr(language, "build_plan"):
                continue
            if folder == "exploits" and any(f.severity == "reject" for f in
                                            static_findings(problem, solution, language.name)):
                continue
            out.append((name, solution))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="name what would be built, build nothing")
    ap.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    args = ap.parse_args()
    chosen = selected()
    if args.list:
        print("\n".join(name for name, _ in chosen))
        return 0
    from solbench.evaluate.isolation.view import sandbox_view
    from solbench.evaluate.native.pool import solution_build

    view = sandbox_view(None, "cuda")
    t0 = time.monotonic()

    def build(item):
        name, solution = item
        began = time.monotonic()
        try:
            report = solution_build(solution, "cuda", view)()
            why = (report or {}).get("failed")
        except Exception as exc:  # noqa: BLE001 - the corpus's own build meets it again and judges it
            why = f"{type(exc).__name__}: {exc}"
        return name, time.monotonic() - began, why

    with ThreadPoolExecutor(max_workers=max(1, args.workers)) as pool:
        for name, seconds, why in pool.map(build, chosen):
            print(f"{name}: {seconds:.1f} s{'' if why is None else f' ({why})'}", flush=True)
    print(f"prebuilt {len(chosen)} solution(s) in {time.monotonic() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
