"""Native builds ahead of a service's queued jobs, on the host's spare cores.

A compiled solution (CUDA C++, CUTLASS, cuBLAS, cuDNN) is built by its evaluation before its candidate starts: 20
to 54 s of nvcc on the H200 host, during which its slot, and so its GPU, does nothing else. ``solbench run`` knows
its jobs in advance and builds them ahead (``evaluate.native.pool``); a service learns its jobs as they come. So
``BuildsAhead`` watches the queue and builds each queued job's solution as soon as it is queued, several at once,
on the cores the slots leave (each build thread confined to them and niced, its compilers too): by the time a slot
claims the job, its evaluation finds the library in the build cache.

Nothing a build ahead leaves is believed for being one: the evaluation's own build loads the cached bytes and checks
their hashes as always, a build that failed here is built again there (its failure is that evaluation's verdict),
and a job whose spec does not load is left to its slot, which says why.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from solbench.evaluate.native.pool import build_thread
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


class BuildsAhead:
    """Builds of the queue's jobs on ``workers`` threads confined to ``cores``, each job's once, oldest first."""

    def __init__(self, queue: JobQueue, device: str, workers: int, cores: set[int] | None = None,
                 plan: Callable[[Job], Callable[[], Any] | None] | None = None, poll_s: float = 0.5):
        self.queue = queue
        self.cores = set(cores) if cores else None
        self.plan = plan or (lambda job: build_for(job, device, queue))
        self.poll_s = poll_s
        self.seen: set[int] = set()
        self.built: list[int] = []  # job ids whose build ahead ended, in order
        self._pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="solbench-build-ahead",
                                        initializer=build_thread, initargs=(self.cores,))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="builds-ahead", daemon=True)

    def start(self) -> "BuildsAhead":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        with self.queue.changed:
            self.queue.changed.notify_all()
        self._thread.join(timeout=30)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def scan(self) -> int:
        """Start the builds of queued jobs not looked at yet; how many were started."""
        started = 0
        for job in sorted(self.queue.jobs(state="queued", limit=SCAN), key=lambda j: j.id):
            if job.id in self.seen:
                continue
            self.seen.add(job.id)
            build = self.plan(job)
            if build is not None:
                self._pool.submit(self._run, job.id, build)
                started += 1
        return started

    def _run(self, job_id: int, build: Callable[[], Any]) -> None:
        try:
            build()
        except Exception:  # noqa: BLE001 - the evaluation builds again and judges
            pass
        self.built.append(job_id)

    def _watch(self) -> None:
        while not self._stop.is_set():
            try:
                self.scan()
            except Exception:  # the database busy beyond its timeout: the next scan
                pass
            with self.queue.changed:
                self.queue.changed.wait(self.poll_s)
