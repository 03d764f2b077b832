"""Native builds and torch.compile baselines ahead of a service's queued jobs, on the host's spare cores.

A compiled solution (CUDA C++, CUTLASS, cuBLAS, cuDNN) is built by its evaluation before its candidate starts: 20
to 54 s of nvcc on the H200 host, during which its slot, and so its GPU, does nothing else. ``solbench run`` knows
its jobs in advance and builds them ahead (``evaluate.native.pool``); a service learns its jobs as they come. So
``BuildsAhead`` watches the queue and builds each queued job's solution as soon as it is queued, several at once,
on the cores the slots leave (each build thread confined to them and niced, its compilers too): by the time a slot
claims the job, its evaluation finds the library in the build cache. Until its build ahead ends a job is marked
``building`` in the queue, whose claims take the other jobs of its priority first: a slot evaluates those while the
compilers run, instead of waiting for them (on an H100, 2026-12-07, the served examples' first CUDA C++ job held
the one slot for 50 s of build while six Triton jobs queued behind it needed none).

A service runs them in a process of its own (``start_apart``): a build's Python side (loading the job's problem,
hashing sources and headers, its sandbox) could otherwise hold the HTTP server's interpreter lock while requests
wait; a scan there sees new jobs by polling the database.

Threads of their own (half as many: a build never waits behind them) compile ahead the torch.compile baselines a
queued job's evaluation will measure (those its database does not hold for this harness), each workload of each
problem (by content) once, compiled and never run (``evaluate.compile_ahead``): the evaluation's own compile finds
the caches filled, or waits for a compile ahead that is running (a mark of the device's kind: a slot on any GPU of
the host waits for it).

Nothing a build ahead leaves is believed for being one: the evaluation's own build loads the cached bytes and checks
their hashes as always, a build that failed here is built again there (its failure is that evaluation's verdict),
and a job whose spec does not load is left to its slot, which says why.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from solbench.evaluate.native.pool import build_thread, confine
from solbench.schedule.jobs import Job
from solbench.schedule.queue import JobQueue

SCAN = 256  # queued jobs looked at per scan, oldest first


def build_for(job: Job, device: str, view_of: Any) -> Callable[[], Any] | None:
    """The build that fills the cache for ``job``'s evaluation (``carry.warm`` in the build sandbox), or None: a
    language that builds nothing, or a spec that does not load (its slot says why)."""
    from solbench.evaluate.isolation.view import sandbox_view
    from solbench.evaluate.native.pool import solution_build
    from solbench.schedule.slot import load_spec_problem, load_spec_solution

    try:
        return solution_build(load_spec_solution(job.spec, load_spec_problem(job.spec)), device,
                              sandbox_view(view_of, device))
    except Exception:  # noqa: BLE001 - the slot meets it again and gives the verdict
        return None


def compiles_for(job: Job, device: str, store: Any) -> list[tuple[str, str, Callable[[str], Any]]]:
    """The torch.compile baselines ``job``'s evaluation will compile (``compile_ahead.plan``: asked for, and not
    measured in ``store`` by this harness), as (problem, workload, compile(key)): each compiles that workload ahead
    on the trusted worker ``key``, marked while it runs (``compile_ahead.compile_marked``); none for a spec that does
    not load (its slot says why)."""
    from solbench.evaluate.ahead_marks import problem_key
    from solbench.evaluate.compile_ahead import Ahead, compile_marked, plan
    from solbench.schedule.slot import load_spec_problem, options_for

    try:
        problem = load_spec_problem(job.spec)
    except Exception:  # noqa: BLE001 - the slot meets it again and gives the verdict
        return []
    opts = options_for(job.spec, device, store)
    return [(problem_key(problem), uuid, functools.partial(compile_marked, Ahead(problem, [uuid]), opts))
            for ahead in plan([problem], opts, store) for uuid in ahead.uuids]


def _plan_key(job: Job) -> str:
    """What a job's compiles ahead follow from: its problem (its files where carried) and its options, hashed."""
    spec = job.spec
    plain = json.dumps([spec.problem, spec.problem_files, spec.options.model_dump(mode="json")], sort_keys=True)
    return hashlib.sha256(plain.encode()).hexdigest()


class BuildsAhead:
    """Builds of the queue's jobs on ``workers`` threads confined to ``cores``, each job's once, oldest first; and
    the torch.compile baselines their evaluations will compile (``compiles``), each workload's once."""

    def __init__(self, queue: JobQueue, device: str, workers: int, cores: set[int] | None = None,
                 plan: Callable[[Job], Callable[[], Any] | None] | None = None, poll_s: float = 0.5,
                 compiles: Callable[[Job], list[tuple[str, str, Callable[[str], Any]]]] | None = None):
        self.queue = queue
        self.device = device
        self.cores = set(cores) if cores else None
        self.plan = plan or (lambda job: build_for(job, device, queue))
        self.compiles = compiles or (lambda job: compiles_for(job, device, self._store()))
        self.poll_s = poll_s
        self.seen: set[int] = set()
        self.compiled: set[tuple[str, str]] = set()  # (problem, workload) compiled ahead, or under way
        self.planned: set[str] = set()  # the problems and options whose compiles were planned (``_plan_key``)
        self._db: Any = None  # the results database (``_store``)
        self.built: list[int] = []  # job ids whose build ahead ended, in order
        self.on_built: Callable[[int], None] | None = None
        self.on_compiled: Callable[[str, str], None] | None = None  # (problem, workload) after its compile ahead
        self._pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="solbench-build-ahead",
                                        initializer=build_thread, initargs=(self.cores,))
        # compiles on threads of their own, half as many: a job's build never queues behind another's compiles
        self._compile_pool = ThreadPoolExecutor(max_workers=max(1, workers // 2),
                                                thread_name_prefix="solbench-compile-ahead", initializer=build_thread,
                                                initargs=(self.cores,))
        self._keys: set[str] = set()  # the compiles' workers (``_compile``)
        self._keys_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="builds-ahead", daemon=True)

    def start(self) -> "BuildsAhead":
        self._mark(self.queue.built)  # marks a previous builds' process left: their builds ended with it
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.queue.wake()
        self._thread.join(timeout=30)
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._compile_pool.shutdown(wait=False, cancel_futures=True)
        from solbench.evaluate.trusted import keeper

        with self._keys_lock:
            keys = list(self._keys)
        for key in keys:  # a running compile's worker: its thread returns at once
            keeper.retire_judge(key, 0.0)
        self._mark(self.queue.built)  # the builds not run are their evaluations' now

    def scan(self) -> int:
        """Start the builds of queued jobs not looked at yet; how many were started."""
        started = 0
        for job in sorted(self.queue.jobs(state="queued", limit=SCAN), key=lambda j: j.id):
            if job.id in self.seen:
                continue
            self.seen.add(job.id)
            build = self.plan(job)
            if build is not None:
                self._mark(self.queue.building, job.id)
                self._pool.submit(self._run, job.id, build)
                started += 1
            self._plan_compiles(job)
        return started

    def _plan_compiles(self, job: Job) -> None:
        """Queue the compiles ahead of ``job``'s evaluation not queued yet; a problem and options whose plan failed
        (the database busy) are planned again with their next job."""
        planned = _plan_key(job)  # jobs of one problem and options plan the same compiles: planned once
        if planned in self.planned:
            return
        try:
            units = self.compiles(job)
        except Exception:  # noqa: BLE001 - the evaluation compiles where it always did
            return
        self.planned.add(planned)
        for problem, uuid, compile_one in units:
            if (problem, uuid) not in self.compiled:
                self.compiled.add((problem, uuid))
                self._compile_pool.submit(self._compile, problem, uuid, compile_one)

    def _store(self) -> Any:
        """The results database, for what its baselines hold (opened once, by the watch's thread)."""
        if self._db is None:
            from solbench.store.db import Store

            self._db = Store(self.queue.path)
        return self._db

    def _compile(self, problem: str, uuid: str, compile_one: Callable[[str], Any]) -> None:
        """One workload's compile ahead, on a trusted worker of this thread's, which it retires: a service keeps no
        worker (and no CUDA context on the device) for compiles that may never come again."""
        from solbench.evaluate.compile_ahead import KEY
        from solbench.evaluate.trusted import keeper

        if self._stop.is_set():
            return
        key = self.device + KEY + "service-" + threading.current_thread().name.rsplit("_", 1)[-1]
        with self._keys_lock:
            self._keys.add(key)
        try:
            compile_one(key)
        except Exception:  # noqa: BLE001 - the evaluation compiles it where it always did
            pass
        finally:
            keeper.retire_judge(key, 0.0)
        if self.on_compiled is not None:
            self.on_compiled(problem, uuid)

    def _mark(self, mark: Callable[..., None], *job_id: int) -> None:
        """A job's build marked begun or ended in the queue (``JobQueue.building``, ``built``): a mark the
        database refuses (busy beyond its timeout) costs only the order of claims."""
        try:
            mark(*job_id)
        except sqlite3.Error:
            pass

    def _run(self, job_id: int, build: Callable[[], Any]) -> None:
        try:
            build()
        except Exception:  # noqa: BLE001 - the evaluation builds again and judges
            pass
        self._mark(self.queue.built, job_id)
        self.built.append(job_id)
        if self.on_built is not None:
            self.on_built(job_id)

    def _watch(self) -> None:
        while not self._stop.is_set():
            try:
                self.scan()
            except Exception:  # the database busy beyond its timeout: the next scan
                pass
            self.queue.idle(self._stop, self.poll_s)


def start_apart(db: str | Path, device: str, workers: int, cores: set[int], log: str | Path) -> subprocess.Popen:
    """``BuildsAhead`` on ``db``'s queue in a process of its own (and a session of its own, its compilers in it),
    confined to ``cores``; it writes a line per build ended (built or not) to ``log`` and ends when its parent
    does."""
    cmd = [sys.executable, "-m", "solbench.schedule.builds", f"--db={db}", f"--device={device}",
           f"--workers={workers}", f"--cores={','.join(str(c) for c in sorted(cores))}", f"--parent={os.getpid()}"]
    with open(log, "ab") as sink:
        return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
                                start_new_session=True)


def stop_apart(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """End the builds' process: asked (SIGTERM: it kills its builds' jails, each a session of its own, then
    itself), then killed with its group after ``grace_s``. A build cut short is built again by its evaluation."""
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=grace_s)
        return
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="a service's native builds ahead, in a process of their own")
    ap.add_argument("--db", required=True)
    ap.add_argument("--device", required=True)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--cores", default="")
    ap.add_argument("--parent", type=int, required=True)
    args = ap.parse_args(argv)
    cores = {int(c) for c in args.cores.split(",") if c}
    confine(cores or None)  # the scans too, not only the builds, keep off the slots' cores
    ahead = BuildsAhead(JobQueue(args.db), args.device, args.workers, cores or None)
    ahead.on_built = lambda job_id: print(f"build ahead ended: job {job_id}", flush=True)
    ahead.on_compiled = lambda problem, uuid: print(f"compile ahead ended: {problem.split(':')[0]} / {uuid}",
                                                    flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    ahead.start()
    print(f"builds ahead: {args.workers} worker(s) on core(s) {args.cores or 'any'}", flush=True)
    while os.getppid() == args.parent and not stop.wait(1.0):  # the service gone (even by kill -9), or asked
        pass
    from solbench.evaluate.native.build import cancel

    ahead.stop()  # no new build starts: the watch ends, queued builds are dropped
    cancel({t.ident for t in threading.enumerate() if t.ident is not None})  # each build's jail is its own session
    if os.getpgid(0) == os.getpid():  # a group of its own (``start_apart``): whatever else it started, and itself
        os.killpg(0, signal.SIGKILL)


if __name__ == "__main__":
    main()
