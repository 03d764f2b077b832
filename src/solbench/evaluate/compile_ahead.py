"""The torch.compile baselines compiled ahead of a run, side by side on the host's spare cores.

A run's first evaluation of each problem measures its baselines, and the reference under ``torch.compile``
(``dynamic=False``: one compile per workload) is compiled there, one workload after another, in the device's
trusted worker: on a fresh H200 the starter suite's compiles took minutes of the main job while the host's
cores sat idle. Before the run's evaluations start, ``compile_ahead`` runs the same baselines as check-only jobs
(one draw, nothing timed) in trusted workers of their own, several at once, each confined to the cores the
evaluation leaves. Their compiles fill Inductor's and Triton's caches on disk, which the run's own trusted
worker then reads: the same code in the same kind of process compiles the same graph for the same shapes, so
its compile is a cache hit (Inductor's key ignores how many compile threads a process has: the workers ahead
compile with one each, so that they do not start a pool of compilers apiece).

This is a barrier, not an overlap: the workers ahead use the device (a compiled graph runs once, and Triton
tunes its kernels' launch configurations on it), and timing is exclusive on its GPU, so they run before the
first evaluation, each holding the device's lease shared (``lease``): never beside another process's timing.
Nothing they produce is believed: the run's baselines are measured as always, and a compile ahead that failed
(out of memory beside the others, a reference that does not compile) only leaves the run's compile to be done
where it always was. The launch configurations Triton chose in the workers ahead were benchmarked beside one
another on a shared device, so they are forgotten at the end (``forget_tuning``): the run's worker tunes its
kernels again, alone on the device, as it did without the compiles ahead.

The longest compiles start first (``compile_weight``): in the suite's order, the last few compiles of a fresh H100's
main job ran alone for 23 of the barrier's 60 s while the other cores sat idle.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from solbench import tempdirs
from solbench.evaluate import lease
from solbench.evaluate.baselines import default_baselines, harness_digest
from solbench.evaluate.native.pool import confine
from solbench.evaluate.runner import EVAL_PREFIX, EvalOptions, select_workloads, worker_job
from solbench.evaluate.trusted import keeper
from solbench.problems.problem import Problem

#: the workers ahead compile with one thread each (Inductor's own pool would start a compiler per core apiece)
AHEAD_ENV = {"TORCHINDUCTOR_COMPILE_THREADS": "1"}
KEY = "#compile-ahead-"  # the workers' keys: the device's name and this, with the thread's number
#: a compile ahead that takes longer is given up (its worker ended): the run's own compile is then done as before
AHEAD_LIMIT_S = 300.0


@dataclass
class Ahead:
    """One problem's workloads whose compile baseline the run will measure."""

    problem: Problem
    uuids: list[str]
    seconds: float | None = None  # how long its compile ahead took, once it has ended (failed or not)


def plan(problems: list[Problem], opts: EvalOptions, store=None) -> list[Ahead]:
    """The run's problems (each once) whose compile baselines it will measure: the baselines asked for include
    the compile one, and ``store`` holds none measured by this harness for the workload (``opts`` unchanged:
    the options of the run's evaluations)."""
    out, seen = [], set()
    harness = harness_digest()  # reads and hashes the harness's files: once
    for problem in problems:
        if problem.name in seen:
            continue
        seen.add(problem.name)
        kinds = opts.baselines if opts.baselines is not None else default_baselines(problem, opts.device)
        if "compile" not in kinds:
            continue
        uuids = select_workloads(problem, opts)
        if store is not None and opts.use_baseline_cache:
            digest = problem.digest()
            uuids = [u for u in uuids if not store.baseline_measured(digest, u, "compile", harness)]
        if uuids:
            out.append(Ahead(problem, uuids))
    return out


def compile_one(ahead: Ahead, opts: EvalOptions, key: str) -> dict[str, str]:
    """``ahead``'s compile baselines, checked on one draw and not timed, on the trusted worker ``key``: uuid ->
    verdict (what the run's own compile will then find in the caches)."""
    checked = dataclasses.replace(opts, draws=1, time_candidate=False, progress=None, workloads=ahead.uuids)
    job = worker_job(ahead.problem, [{"kind": "compile"}], [(0, u) for u in ahead.uuids], checked,
                     secrets.randbits(63))
    owner = tempdirs.private_dir(EVAL_PREFIX)
    try:
        with lease.hold(opts.device, exclusive=False):
            outcome = keeper.run_worker(job, opts.startup_timeout_s, AHEAD_LIMIT_S, owner.path, key=key,
                                        env=AHEAD_ENV)
    finally:
        owner.close()
    return {uuid: report.verdict for (_, uuid), report in outcome.results.items()}


def compile_ahead(aheads: list[Ahead], opts: EvalOptions, workers: int, cores: set[int] | None = None,
                  done: Callable[[Ahead, dict[str, str]], Any] | None = None,
                  one: Callable[[Ahead, EvalOptions, str], dict[str, str]] = compile_one) -> dict[str, dict]:
    """Every workload of ``aheads`` on its own (a problem's workloads compile side by side too), on ``workers``
    threads confined to ``cores``, each thread with a trusted worker of its own (kept from one workload to the
    next, retired at the end); returns when all have ended: problem -> uuid -> verdict (none for a workload whose
    compile ahead failed). ``done(unit, verdicts)`` after each workload (``unit.seconds``: its time). An
    interruption (Ctrl-C) starts no further compile and is raised once the running ones have ended."""
    units = [Ahead(a.problem, [uuid]) for a in aheads for uuid in a.uuids]
    weights = {a.problem.name: compile_weight(a.problem) for a in aheads}
    units.sort(key=lambda u: -weights[u.problem.name])  # the longest first; stable: the suite's order otherwise
    if not units or workers < 1:
        return {}
    started = time.time()
    keys: set[str] = set()
    lock = threading.Lock()
    stop = threading.Event()

    def run(unit: Ahead) -> dict[str, str]:
        if stop.is_set():
            return {}
        key = opts.device + KEY + threading.current_thread().name.rsplit("_", 1)[-1]
        with lock:
            keys.add(key)
        began = time.monotonic()
        try:
            verdicts = one(unit, opts, key)
        except Exception:  # noqa: BLE001 - the run's own compile is then done where it always was
            verdicts = {}
        unit.seconds = time.monotonic() - began
        if done is not None:
            done(unit, verdicts)
        return verdicts

    pool = ThreadPoolExecutor(max_workers=min(workers, len(units)), thread_name_prefix="solbench-compile",
                              initializer=confine, initargs=(cores,))
    out: dict[str, dict] = {a.problem.name: {} for a in aheads}
    try:
        for unit, future in [(u, pool.submit(run, u)) for u in units]:
            out[unit.problem.name].update(future.result())
    except BaseException:
        stop.set()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        for key in keys:
            keeper.retire_judge(key)
        forget_tuning(started)
    return out


#: operations whose Inductor kernels (sorts, scans) compile and tune for long: each weighs this many calls. On a fresh
#: H100 (2026-12-06) moe_topk_softmax's compiles (9 calls, one a sort) took up to 29 s each, the attention and
#: mamba2_chunk_scan ones (14 to 43 calls) 8 to 19 s on average, the rest about 1 s
SLOW_OPS = {"sort": 20, "argsort": 20, "topk": 20, "kthvalue": 20, "msort": 20, "cumsum": 10, "cumprod": 10,
            "logcumsumexp": 10}


def compile_weight(problem: Problem) -> int:
    """How long a workload of ``problem`` takes to compile, as an order (not a time): the calls in its reference's
    source, each an operation Inductor traces, lowers and may give a kernel of its own, a sort or scan weighing more
    (``SLOW_OPS``); 0 for a source that does not parse. On the starter suite it ranks mamba2_chunk_scan (43 calls),
    moe_topk_softmax (a sort) and the attention problems first, the elementwise ones (5 to 7 calls) last."""
    try:
        tree = ast.parse(getattr(problem, "reference_source", "") or "")
    except SyntaxError:
        return 0
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    return sum(SLOW_OPS.get(_called(node.func), 1) for node in calls)


def _called(func: ast.expr) -> str:
    """The name a call calls (``torch.sort`` and ``x.sort``: "sort")."""
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def inductor_cache() -> Path:
    """Inductor's cache folder as the trusted workers find it (their environment keeps TORCHINDUCTOR_CACHE_DIR;
    otherwise torch's default, ``<temporary directory>/torchinductor_<user>``)."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir  # no side effect, unlike cache_dir()

    return Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR") or default_cache_dir()).resolve()


def forget_tuning(since: float, root: Path | None = None) -> int:
    """Remove the launch configurations Inductor's kernels chose since ``since`` (``*.best_config``, its local
    autotuning cache): the workers ahead benchmarked them beside one another. How many were removed."""
    removed = 0
    for path in (root or inductor_cache()).rglob("*.best_config"):
        try:
            if path.stat().st_mtime >= since - 1 and not path.is_symlink():
                path.unlink()
                removed += 1
        except OSError:
            continue
    return removed
