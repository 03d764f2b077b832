"""Native builds ahead of their evaluations: a run's compilers busy on the host's spare cores while the device
times other solutions (``solbench run``).

A ``BuildPool`` takes one build per job of the run, in the order the jobs will be evaluated, and starts them on
``workers`` threads, first come first built; ``ready(i)`` waits for job ``i``'s build before its evaluation
starts, which then finds the library in the build cache (``carry.warm`` fills it). Builds of later jobs go on
while earlier jobs are evaluated, and a job whose build has not ended yields its turn to a later one that builds
nothing or whose build has ended (``ready_first``).

The cores are split (``split_cores``): the lowest ones stay with the evaluation (the runner, its trusted worker
and the candidate, which inherit the runner's affinity) and the builds get the rest, each build thread confining
itself, and so every compiler it starts, to them. No sample is then taken on a core that a compiler shares. On a
host with too few cores to split (fewer than ``MIN_CORES``) there is no pool, and each evaluation builds its own
solution as it starts.

A build thread also lowers its own scheduling priority (``BUILD_NICE``), and so its compilers': its builds share
the spare cores with the torch.compile baselines compiled ahead, which each problem's first evaluation needs (in
the run's order, the first problem's first), while a build is needed only by its own compiled solution, which the
run takes once it is built.

Nothing a pool's build leaves is trusted for being the pool's: the evaluation's ``Carry`` loads the cached bytes
and checks their hashes as always, and a build that failed here is built again there, where its failure is the
evaluation's verdict.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Callable, Iterator

#: cores the evaluation keeps, and the fewest a host needs for a pool
EVALUATION_CORES = 4
MIN_CORES = 8
#: the niceness a build thread takes (``build_thread``): the compiles ahead, which evaluations may wait for, go first
BUILD_NICE = 10

Build = Callable[[], Any]


def available_cores() -> set[int]:
    return set(os.sched_getaffinity(0))


def slot_split(slots: int = 1) -> tuple[set[int], set[int]]:
    """``split_cores`` of this process's cores for ``slots`` evaluating at once: at least ``EVALUATION_CORES``, two
    per slot, are the evaluation's."""
    return split_cores(available_cores(), keep=max(EVALUATION_CORES, 2 * slots))


def split_cores(cores: set[int], keep: int = EVALUATION_CORES, least: int = MIN_CORES) -> tuple[set[int], set[int]]:
    """(the evaluation's cores, the builds'): the lowest ``keep`` for the evaluation and the rest for builds, or
    every core for the evaluation and none for builds on a host of fewer than ``least``."""
    ordered = sorted(cores)
    if len(ordered) < max(least, keep + 1):
        return set(ordered), set()
    return set(ordered[:keep]), set(ordered[keep:])


class BuildPool:
    """``builds[i]`` (None: job ``i`` has nothing to build) run on ``workers`` threads confined to ``cores``;
    with ``workers`` 0 nothing runs here (each evaluation builds its own solution)."""

    def __init__(self, builds: list[Build | None], workers: int, cores: set[int] | None = None):
        self.builds = builds
        self.cores = set(cores) if cores else None
        self.pinned: dict[str, set[int]] = {}  # thread name: the cores it confined itself to
        self.threads: set[int] = set()  # the pool's threads' idents (``cancel``)
        self._lock = threading.Lock()
        self._pool = (ThreadPoolExecutor(max_workers=workers, thread_name_prefix="solbench-build",
                                         initializer=self._confine) if workers > 0 else None)
        self.futures: list[Future | None] = [
            self._pool.submit(b) if self._pool is not None and b is not None else None for b in builds]

    def _confine(self) -> None:
        """The build thread keeps to the builds' cores at a lower priority (``build_thread``)."""
        build_thread(self.cores)
        with self._lock:
            self.pinned[threading.current_thread().name] = set(os.sched_getaffinity(0))
            self.threads.add(threading.get_ident())

    def ready(self, i: int, timeout: float | None = None) -> Any:
        """Job ``i``'s build, once it has ended: its result, None where the pool built nothing for it (an
        exception a build raised is left to the evaluation's own build, which meets it again and judges it)."""
        fut = self.futures[i] if i < len(self.futures) else None
        if fut is None:
            return None
        try:
            return fut.result(timeout=timeout)
        except Exception:  # noqa: BLE001 - the evaluation builds again and gives the verdict
            return None

    def ready_first(self) -> Iterator[int]:
        """Every job's index once, in the order to evaluate them: the first in the run's order whose build has
        ended or that has none, and while every job left waits for its build, the first whose build ends then. A
        run's Triton solutions are then evaluated while its compiled ones are still being built."""
        left = list(range(len(self.builds)))
        while left:
            done = next((i for i in left if self.futures[i] is None or self.futures[i].done()), None)
            if done is None:
                wait([self.futures[i] for i in left], return_when=FIRST_COMPLETED)
                continue
            left.remove(done)
            yield done

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def cancel(self) -> None:
        """Start no further build and kill the running ones (their compilers with them), then wait for the
        threads: what an interrupted run does, where ``close`` would wait for the compilers."""
        from solbench.evaluate.native.build import cancel, uncancel

        if self._pool is None:
            return
        for fut in self.futures:
            if fut is not None:
                fut.cancel()
        with self._lock:
            threads = set(self.threads)
        cancel(threads)
        try:
            self.close()
        finally:
            uncancel(threads)

    def __enter__(self) -> "BuildPool":
        return self

    def __exit__(self, kind: Any, *exc: Any) -> None:
        if kind is None:
            self.close()
        else:  # an interruption (Ctrl-C, SIGTERM) or a failure of the run: its builds are of no further use
            self.cancel()


def confine(cores: set[int] | None) -> None:
    """Confine the calling thread to ``cores`` (none: left as it is); the threads and processes it starts from
    here on inherit them (the runner's main thread: the trusted worker and its candidates; a build thread: its
    compilers)."""
    if cores:
        os.sched_setaffinity(0, cores)


def build_thread(cores: set[int] | None) -> None:
    """A build thread's start: confined to ``cores`` (``confine``) and niced to ``BUILD_NICE`` (where it runs at a
    higher priority), both inherited by the compilers it starts (on Linux a thread's niceness is its own, and a
    child process starts with its creator thread's)."""
    confine(cores)
    me = threading.get_native_id()
    try:
        if os.getpriority(os.PRIO_PROCESS, me) < BUILD_NICE:
            os.setpriority(os.PRIO_PROCESS, me, BUILD_NICE)
    except OSError:  # a platform without per-thread priorities: the builds run at the runner's
        pass


def pin_processes(root: int, cores: set[int]) -> int:
    """Confine a running process and every process below it, each of their threads, to ``cores`` (the trusted
    worker started before the cores were split, its zygote and candidates: what they start later inherits it). How
    many threads were confined; a process that ended meanwhile is passed over."""
    pids, moved = [root], 0
    for pid in pids:  # grows as children are found
        try:
            tasks = list(os.scandir(f"/proc/{pid}/task"))
        except OSError:
            continue
        for task in tasks:
            try:
                os.sched_setaffinity(int(task.name), cores)
                moved += 1
            except OSError:
                pass
            try:
                with open(f"{task.path}/children") as f:
                    pids += [int(c) for c in f.read().split()]
            except OSError:
                pass
    return moved


def solution_builds(jobs: list[tuple[Any, Any]], device: str, store=None) -> list[Build | None]:
    """Per (problem, solution) job, the build that fills the cache for its evaluation (``carry.warm``, in the
    build sandbox the evaluation's own build gets); None for a language that builds nothing."""
    from solbench.evaluate.isolation.view import sandbox_view

    view = sandbox_view(store, device)
    return [solution_build(solution, device, view) for _, solution in jobs]


def solution_build(solution: Any, device: str, view: dict[str, Any]) -> Build | None:
    """The build that fills the cache for ``solution``'s evaluation (``carry.warm`` in the build sandbox ``view``);
    None for a language that builds nothing."""
    from solbench.evaluate.build_cache import default_root
    from solbench.evaluate.languages import get_language
    from solbench.evaluate.native.carry import warm

    language = get_language(solution.language)
    if not hasattr(language, "build_plan"):
        return None
    return lambda: warm(language, solution, device, default_root(), view)
