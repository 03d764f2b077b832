"""A service's native builds ahead of its queued jobs (schedule/builds.py): each queued job's compiled solution is
built once, oldest first, on threads confined to the spare cores, also for jobs queued after the watch began;
a language that builds nothing and a spec that does not load get no build. A fake build stands for nvcc here;
``build_for`` is checked on the real plug-ins. Waits are on events with a generous bound."""

from __future__ import annotations

import os
import threading
import time

from solbench.problems.problem import load_problem
from solbench.problems.solution import load_solution
from solbench.schedule.builds import BuildsAhead, build_for
from solbench.schedule.jobs import Job, JobOptions, JobSpec, spec_for
from solbench.schedule.queue import JobQueue
from tests.paths import AXPY, FIXTURES

WAIT_S = 60.0


def _specs() -> dict[str, JobSpec]:
    axpy = load_problem(AXPY)
    cpp = load_solution(FIXTURES / "cuda_cpp" / "axpy_cpp.json", axpy.definition)
    torch_ok = load_solution(AXPY / "solutions" / "torch_ok.py", axpy.definition)
    return {"cpp": spec_for(axpy, cpp, JobOptions()), "torch": spec_for(axpy, torch_ok, JobOptions())}


def test_a_job_gets_the_build_of_its_compiled_solution_and_no_other():
    specs = _specs()

    def job(spec: JobSpec) -> Job:
        return Job(id=1, state="queued", created=0.0, spec=spec)

    assert build_for(job(specs["cpp"]), "cpu", None) is not None
    assert build_for(job(specs["torch"]), "cpu", None) is None
    broken = specs["cpp"].model_copy(update={"problem": "no_such_problem"})
    assert build_for(job(broken), "cpu", None) is None  # its slot says why


def test_queued_jobs_are_built_once_oldest_first_on_the_spare_cores(tmp_path):
    specs = _specs()
    queue = JobQueue(tmp_path / "r.db")
    cores = {min(os.sched_getaffinity(0))}
    log: list[tuple[int, set[int]]] = []
    two = threading.Event()
    lock = threading.Lock()

    def plan(job):
        if job.spec.solution["spec"]["language"] != "cuda_cpp":
            return None

        def build():
            with lock:
                log.append((job.id, set(os.sched_getaffinity(0))))
                if len(log) == 2:
                    two.set()
        return build

    first = queue.submit([specs["cpp"], specs["torch"]])
    ahead = BuildsAhead(queue, "cpu", 1, cores, plan=plan, poll_s=0.05).start()
    try:
        later = queue.submit([specs["cpp"]])  # queued while the watch runs: built too
        assert two.wait(WAIT_S), log
        deadline = time.monotonic() + WAIT_S
        while len(ahead.built) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)  # a few more scans: nothing is built twice
        assert [job_id for job_id, _ in log] == [first[0], later[0]]
        assert all(c == cores for _, c in log)
        assert ahead.seen >= {first[1], later[0]}  # the PyTorch job was looked at, and nothing was built for it
    finally:
        ahead.stop()
