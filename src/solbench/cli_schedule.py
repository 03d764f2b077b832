"""``solbench run`` through the host's scheduler: the jobs go into the database's queue and the slots (a process
per GPU of this host, or Ray actors) evaluate them, a progress bar per slot. Where a ``solbench serve`` already
schedules this database, the jobs are queued for it and this command waits for their results."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import Any, Iterator

from solbench.cli_options import err


def executor_for(mode: str, where: dict[str, Any], db: Path):
    """The executor of ``--executor`` (local or ray) with its slots."""
    if mode == "ray":
        from solbench.schedule.ray_executor import RayExecutor

        gpus = where.get("gpus")
        return RayExecutor(where.get("address"), cpu_slots=where.get("slots") or 1,
                           gpus=int(gpus) if gpus and gpus.isdigit() else None)
    from solbench.schedule.devices import discover
    from solbench.schedule.local import LocalExecutor

    slots = discover(where.get("device") or "auto", where.get("gpus"), where.get("slots") or 1)
    return LocalExecutor(slots, db, Path(tempfile.gettempdir()) / "solbench-slots")


def job_options(options: dict[str, Any]):
    """``run``'s evaluation options as a job's."""
    from solbench.schedule.jobs import JobOptions

    check_only = not options["time_candidate"]
    return JobOptions(check_only=check_only, draws=options["draws"], heldout=options["heldout"],
                      baselines=None if options["baselines"] is None or check_only else list(options["baselines"]),
                      profile_dsl=options["profile_dsl"], hold=options["timing"].hold,
                      fresh_baselines=not options["use_baseline_cache"])


def scheduled(selected: list[tuple], options: dict[str, Any], store, run_id: int, mode: str, where: dict[str, Any],
              build_jobs: int | None, progress, task) -> list:
    """The evaluations of ``selected`` (problem, example path) through the scheduler, in their order."""
    from solbench.evaluate import admission
    from solbench.problems.solution import load_solution
    from solbench.schedule.jobs import spec_for
    from solbench.schedule.queue import JobQueue
    from solbench.schedule.scheduler import Busy, Scheduler, wait_for

    queue = JobQueue(store.path)
    batch = f"run-{run_id}"
    opts = job_options(options)
    jobs = [(prob, load_solution(path, prob.definition)) for prob, path in selected]
    specs = [spec_for(prob, sol, opts, run_id, inline=mode == "ray") for prob, sol in jobs]
    peaks = [admission.peak_bytes(prob, options["device"]) for prob, _ in jobs]
    ids = queue.submit(specs, peaks=peaks, batch=batch)

    def ended(job) -> None:
        progress.advance(task)
        if job.state != "done":
            err.print(f"[red]job {job.id} ({job.spec.problem}) {job.state}: {(job.error or '').splitlines()[0]}")

    executor = executor_for(mode, where, store.path)
    bars = {s.name: progress.add_task(s.name, total=None) for s in executor.slots}
    sched = Scheduler(queue, executor, batch=batch, on_start=lambda slot, job: progress.update(
        bars[slot.name], description=f"{slot.name}: {job.spec.problem}"),
        on_end=lambda slot, job, out: progress.update(bars[slot.name], advance=1,
                                                     description=f"{slot.name}: idle"))
    ahead = build_jobs if mode == "local" else 0  # a Ray node builds in its own cache
    try:
        with _builds_ahead(jobs, options, store, ahead, len(executor.slots), progress):
            try:
                sched.start()
            except Busy as busy:  # a `solbench serve` schedules this database: it runs them
                executor.close()
                sched = None
                if busy.serves != "all":
                    raise
                err.print(f"the jobs are queued for the `solbench serve` scheduling {store.path}")
            done = wait_for(queue, ids, progress=ended)
    finally:  # interrupted: what has not ended is cancelled, not left for a later scheduler
        for job_id in ids:
            queue.cancel(job_id)
        if sched is not None:
            sched.stop()
    return [store.evaluation(j.evaluation_id)[0] for j in done if j.evaluation_id is not None]


@contextlib.contextmanager
def _builds_ahead(jobs: list[tuple], options: dict, store, build_jobs: int | None, slots: int,
                  progress) -> Iterator[None]:
    """The native builds of the jobs and the run's torch.compile baselines (``start_compiles``), on the cores the
    slots leave them (two per slot, at least four are the slots'; ``evaluate.native.pool``), beside the block;
    the slots' processes, started in the block, keep to the others."""
    from solbench.evaluate.native import pool as build_pool

    before = build_pool.available_cores()
    mine, theirs = build_pool.slot_split(slots)
    workers = len(theirs) if build_jobs is None else build_jobs
    builds = build_pool.solution_builds(jobs, options["device"], store) if workers and theirs else []
    compiles = None
    try:
        if workers and theirs:
            build_pool.confine(mine)
        with build_pool.BuildPool(builds, min(workers, sum(b is not None for b in builds)), theirs):
            compiles = start_compiles([p for p, _ in jobs], options, store, workers, theirs, progress)
            yield
    finally:
        if compiles is not None:
            compiles.stop()  # the run has ended (or was interrupted): none starts, running ones are killed
        build_pool.confine(before)


def start_compiles(problems: list, options: dict, store, workers: int, cores: set[int], progress):
    """The run's torch.compile baselines compiled beside its evaluations, ``workers`` at once on ``cores``, in the
    run's order (``evaluate.compile_ahead``: the caches they fill make the run's own compiles hits, and a compile
    baseline reached while its compile ahead runs waits for it; one reached before it began compiles itself);
    returns them under way (``Running``), or None without spare cores or where the run compiles nothing new."""
    from solbench.evaluate import compile_ahead
    from solbench.evaluate.runner import EvalOptions

    opts = EvalOptions(**options)
    aheads = compile_ahead.plan(problems, opts, store) if workers and cores else []
    if not aheads:
        return None
    task = progress.add_task("torch.compile baselines ahead", total=sum(len(a.uuids) for a in aheads))
    return compile_ahead.start(aheads, opts, workers, cores, done=lambda unit, _: progress.update(
        task, advance=1, ended=f"{unit.problem.name} / {unit.uuids[0]} in {unit.seconds:.0f} s"))
