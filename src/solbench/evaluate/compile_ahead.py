"""The torch.compile baselines compiled ahead of their evaluations, on the host's spare cores, beside the run.

A run's first evaluation of each problem measures its baselines, and the reference under ``torch.compile``
(``dynamic=False``: one compile per workload) is compiled there, one workload after another, in the device's
trusted worker: on a fresh H200 the starter suite's compiles took minutes of the main job while the host's
cores sat idle. When the run starts, ``start`` compiles the same baselines in trusted workers of their own,
several at once, each confined to the cores the evaluation leaves. Their compiles fill Inductor's and Triton's
caches on disk, which the run's own trusted worker then reads: the same code in the same kind of process
compiles the same graph for the same shapes, so its compile is a cache hit (Inductor's key ignores how many
compile threads a process has: the workers ahead compile with one each, so that they do not start a pool of
compilers apiece).

The compiles ahead run beside the run's evaluations and their timing, so they run none of their graphs: a worker
ahead traces the reference on input shells and compiles it without running it (``trusted.compile_only``, which
says what Inductor itself still runs on the device while it compiles); it holds no device lease. The run's
evaluations take the problems in the run's order, so the compiles ahead do too: the first problem's are the first
needed. An evaluation that reaches a compile baseline whose compile ahead is running waits for it
(``ahead_marks``) rather than compiling it a second time; a worker ahead is retired as soon as no compile is left
to begin, so that its CUDA context's memory goes back to the evaluations. Nothing they produce is believed:
the run's baselines are measured as always, and a compile ahead that failed (a reference that does not compile,
or breaks its graph) only leaves the run's compile to be done where it always was.
"""

from __future__ import annotations

import dataclasses
import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

from solbench import tempdirs
from solbench.evaluate import ahead_marks
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
    """``ahead``'s compile baselines compiled on input shells and never run (``trusted.compile_only``), on the
    trusted worker ``key``: uuid -> verdict (what the run's own compile will then find in the caches)."""
    checked = dataclasses.replace(opts, draws=1, time_candidate=False, progress=None, workloads=ahead.uuids)
    job = worker_job(ahead.problem, [{"kind": "compile"}], [(0, u) for u in ahead.uuids], checked,
                     secrets.randbits(63))
    job["compile_only"] = True
    owner = tempdirs.private_dir(EVAL_PREFIX)
    try:
        outcome = keeper.run_worker(job, opts.startup_timeout_s, AHEAD_LIMIT_S, owner.path, key=key, env=AHEAD_ENV)
    finally:
        owner.close()
    return {uuid: report.verdict for (_, uuid), report in outcome.results.items()}


def compile_marked(ahead: Ahead, opts: EvalOptions, key: str,
                   one: Callable[[Ahead, EvalOptions, str], dict[str, str]] = compile_one) -> dict[str, str]:
    """``one`` workload's compile ahead (``ahead`` names one) on the worker ``key``, marked while it runs: an
    evaluation that reaches the same compile meanwhile waits for it (``ahead_marks``); one that reaches it before it
    began compiles it itself, as without a compile ahead. Nothing where another process's mark is held: {}."""
    mark = ahead_marks.mark(opts.device, ahead_marks.problem_key(ahead.problem), ahead.uuids[0])
    if mark is None:  # another process compiles it ahead now: that compile serves
        return {}
    try:
        return one(ahead, opts, key)
    finally:
        ahead_marks.unmark(mark)


class Running:
    """Compiles ahead under way (``start``): ``wait()`` for their verdicts (problem -> uuid -> verdict), ``stop()``
    to start no further one and end those running (their workers killed: the run has ended, or was interrupted)."""

    def __init__(self, units: list[Ahead], opts: EvalOptions, workers: int, cores: set[int] | None,
                 done: Callable[[Ahead, dict[str, str]], Any] | None,
                 one: Callable[[Ahead, EvalOptions, str], dict[str, str]]):
        self.units, self.opts, self.done, self.one = units, opts, done, one
        self.out: dict[str, dict] = {u.problem.name: {} for u in units}
        self.stopped = threading.Event()
        self.error: BaseException | None = None
        self._keys: set[str] = set()
        self._lock = threading.Lock()
        self._started = 0  # units begun: a thread that finds none left to begin retires its worker
        self._pool = ThreadPoolExecutor(max_workers=max(1, min(workers, len(units))),
                                        thread_name_prefix="solbench-compile", initializer=confine,
                                        initargs=(cores,))
        self._futures = [(u, self._pool.submit(self._run, u)) for u in units]
        self._waiter = threading.Thread(target=self._collect, name="solbench-compile-ahead", daemon=True)
        self._waiter.start()

    def _run(self, unit: Ahead) -> dict[str, str]:
        if self.stopped.is_set():
            return {}
        key = self.opts.device + KEY + threading.current_thread().name.rsplit("_", 1)[-1]
        with self._lock:
            self._keys.add(key)
            self._started += 1
        began = time.monotonic()
        try:
            verdicts = compile_marked(unit, self.opts, key, self.one)
        except Exception:  # noqa: BLE001 - the run's own compile is then done where it always was
            verdicts = {}
        except BaseException:  # an interruption: no further compile starts
            self.stopped.set()
            raise
        unit.seconds = time.monotonic() - began
        with self._lock:
            begun = self._started == len(self.units)
        if begun or self.stopped.is_set():  # nothing left for this thread: its worker's device memory goes back
            keeper.retire_judge(key, 0.0)
        if self.done is not None:
            try:
                self.done(unit, verdicts)
            except Exception:  # noqa: BLE001 - a progress line that failed stops no compile
                pass
        return verdicts

    def _collect(self) -> None:
        try:
            for unit, future in self._futures:
                self.out[unit.problem.name].update(future.result())
        except BaseException as exc:  # noqa: BLE001 - raised by ``wait``
            self.error = exc
            self.stopped.set()
        finally:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._retire()

    def _retire(self) -> None:
        with self._lock:
            keys = list(self._keys)
        for key in keys:
            keeper.retire_judge(key, 0.0)

    def wait(self) -> dict[str, dict]:
        self._waiter.join()
        if self.error is not None:
            raise self.error
        return self.out

    def stop(self) -> None:
        self.stopped.set()
        while self._waiter.is_alive():  # a running compile's worker killed (again, where one began meanwhile)
            self._retire()
            self._waiter.join(1.0)


def start(aheads: list[Ahead], opts: EvalOptions, workers: int, cores: set[int] | None = None,
          done: Callable[[Ahead, dict[str, str]], Any] | None = None,
          one: Callable[[Ahead, EvalOptions, str], dict[str, str]] = compile_one) -> Running | None:
    """Every workload of ``aheads`` compiled on its own (a problem's workloads side by side too), in the order of
    ``aheads`` (the run's), on ``workers`` threads confined to ``cores``, each thread with a trusted worker of its
    own (kept from one workload to the next, retired once none is left to begin); returns at once, each workload
    marked (``ahead_marks``) while its compile ahead runs. ``done(unit, verdicts)`` after each workload
    (``unit.seconds``: its time). None where there is nothing to compile."""
    units = [Ahead(a.problem, [uuid]) for a in aheads for uuid in a.uuids]
    if not units or workers < 1:
        return None
    return Running(units, opts, workers, cores, done, one)


def compile_ahead(aheads: list[Ahead], opts: EvalOptions, workers: int, cores: set[int] | None = None,
                  done: Callable[[Ahead, dict[str, str]], Any] | None = None,
                  one: Callable[[Ahead, EvalOptions, str], dict[str, str]] = compile_one) -> dict[str, dict]:
    """``start`` and wait: problem -> uuid -> verdict (none for a workload whose compile ahead failed). An
    interruption (Ctrl-C) starts no further compile and is raised once the running ones have ended."""
    running = start(aheads, opts, workers, cores, done, one)
    if running is None:
        return {}
    try:
        return running.wait()
    except BaseException:
        running.stop()
        raise
