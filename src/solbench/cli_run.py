"""``solbench run``: the main job, every selected problem's example solutions evaluated against baselines and SOL.

Selection by suite, problem, family and language; ``--baselines`` picks which baselines are measured.
``--check-only`` judges correctness and the integrity checks without timing or baselines, and only then may
evaluations run side by side (``--jobs``): timed ones never share a device, but checks and builds can (a CUDA
C++ example's first build is most of its check), as many at once as their estimated device memory allows
(``evaluate.admission``). Timed evaluations run one after another while the native builds of later ones run on
the cores the evaluation leaves (``--build-jobs``, ``evaluate.native.pool``); the run's torch.compile baselines
are compiled on those cores too, side by side and beside the evaluations, running none of their graphs on the
device (``evaluate.compile_ahead``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from solbench.cli_options import DbOption, HoldOption, ProfileOption, WideOption
from solbench.errors import UserError


def run(
    suite: str = typer.Option("starter", help="suite name"),
    problem: Optional[List[str]] = typer.Option(None, help="only these problems (names or directories)"),
    family: Optional[str] = typer.Option(None, help="only this family"),
    language: Optional[List[str]] = typer.Option(None, help="only example solutions in these languages"),
    baselines: Optional[str] = typer.Option(None, help="baselines to measure, comma-separated (eager, compile, "
                                            "baseline_file) or 'none'; default: all the device has"),
    check_only: bool = typer.Option(False, "--check-only", help="correctness and integrity only: no timing, "
                                    "no baselines"),
    jobs: int = typer.Option(1, min=1, help="evaluations side by side at most (with --check-only only; fewer "
                             "while their estimated device memory would not fit)"),
    build_jobs: Optional[int] = typer.Option(None, min=0, help="native builds and torch.compile baselines ahead of "
                                             "their evaluations, on the cores the evaluation leaves (default: one "
                                             "per such core; 0: none; none on a host of fewer than 8 cores, where "
                                             "builds asked for share the evaluation's cores and no compile runs "
                                             "ahead)"),
    device: str = typer.Option("auto", help="auto, cpu or cuda"),
    executor: str = typer.Option("auto", help="auto: this process on one device, a slot per GPU where the host "
                                 "has several; local: a slot process per device of this host; ray: Ray actors "
                                 "across a cluster (docs/SERVICE.md)"),
    gpus: Optional[str] = typer.Option(None, help="the GPUs the slots use: all (default), a count, or indices "
                                       "such as 0,2"),
    slots: int = typer.Option(1, min=1, help="CPU slots where the slots evaluate on the CPU"),
    address: Optional[str] = typer.Option(None, help="--executor ray: the cluster to join (auto, ray://host:port); "
                                          "default: a local Ray instance"),
    db: Path = DbOption,
    as_json: bool = typer.Option(False, "--json"),
    draws: int = typer.Option(5, min=1),
    no_cache: bool = typer.Option(False, "--no-cache", help="re-measure baselines"),
    heldout: int = typer.Option(0, min=0, help="also draw this many held-out shapes per problem"),
    profile_dsl: str = ProfileOption,
    hold: bool = HoldOption,
    quiet: bool = typer.Option(False),
    wide: bool = WideOption,
) -> None:
    """The main job: evaluate every problem's example solutions against baselines and SOL.

    Examples: `solbench run` (the starter suite), `solbench run --family norm --language triton`,
    `solbench run --check-only --jobs 4`, `solbench run --executor local --gpus 0,1`."""
    from solbench.cli_options import err, out, prestart_worker, profile_mode, resolve_device, stored_calibration
    from solbench.problems.problem import load_problem

    mode = executor_mode(executor, device, gpus, slots, jobs)
    if jobs > 1 and not check_only:
        raise UserError("--jobs needs --check-only: timed evaluations never share a device")
    named = [load_problem(p) for p in problem or []]  # a mistake in a name is said before any worker starts
    if jobs == 1 and mode == "inline":  # evaluations one after another in this process: its worker starts now
        prestart_worker(device)
    from solbench.evaluate.timing.rounds import TimingConfig
    from solbench.hardware.registry import detect
    from solbench.problems.suite import select_problems
    from solbench.store.db import Store

    dev = resolve_device(device)
    problems = named or select_problems(suite=suite, family=family)
    selected = select_examples(problems, language)
    if not selected:
        raise UserError("no example solutions to run in the selected problems")
    kinds = () if check_only else baseline_kinds(baselines)
    store = Store(db)
    hw = detect(dev)
    calibrated = stored_calibration(db, hw)
    run_id = store.start_run(" ".join(["solbench", *sys.argv[1:]]), dev, hw.id)

    options = dict(device=dev, draws=draws, hardware=hw, calibrated=calibrated, baselines=kinds,
                   use_baseline_cache=not no_cache, heldout=heldout, profile_dsl=profile_mode(profile_dsl),
                   timing=TimingConfig(hold=hold), time_candidate=not check_only)
    try:
        evaluations = _evaluate_all(selected, options, store, run_id, mode, dict(
            device=device, gpus=gpus, slots=slots, address=address), dev, hw, jobs, db, build_jobs,
            quiet or as_json)
    except KeyboardInterrupt as stop:  # Ctrl-C (or SIGTERM): the run is marked interrupted, what it did is shown
        store.conn.rollback()  # an evaluation half written when the signal came is not kept
        store.finish_run(run_id, "interrupted")
        done = [store.evaluation(i)[0] for i in store.evaluation_ids(run_id=run_id)]
        if not as_json:
            from solbench.cli_options import print_evaluations

            print_evaluations(done, wide)
        from solbench.evaluate.trusted.keeper import exit_status, interrupted

        err.print(f"{interrupted(stop)}: {len(done)} of {len(selected)} evaluations done; run {run_id} in {db} is "
                  "marked interrupted")
        raise typer.Exit(exit_status(stop)) from None
    store.finish_run(run_id)
    if as_json:
        print(json.dumps([e.public() for e in evaluations], indent=2, default=str))
        return
    from solbench.cli_options import print_evaluations
    from solbench.report.table import run_summary

    print_evaluations(evaluations, wide)
    out.print(run_summary(evaluations, run_id, db))


def _evaluate_all(selected: list[tuple], options: dict, store, run_id: int, mode: str, where: dict, dev: str, hw,
                  jobs: int, db: Path, build_jobs: int | None, quiet: bool) -> list:
    """The run's evaluations: through the scheduler, one after another in this process, or side by side."""
    from solbench.cli_options import err
    from solbench.cli_progress import run_progress

    with run_progress(err, quiet) as progress:
        task = progress.add_task(f"solbench run on {dev} ({hw.id})", total=len(selected))
        if mode != "inline":
            from solbench.cli_schedule import scheduled

            return scheduled(selected, options, store, run_id, mode, where, build_jobs, progress, task)
        if jobs == 1:
            return _in_turn(selected, options, store, run_id, dev, build_jobs, progress, task)
        # processes of their own (an evaluation's worker and sandbox are per process), spawned clean, side by side
        # while their device memory fits (evaluate/admission.py)
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        from solbench.evaluate import admission

        sizes = [admission.peak_bytes(prob, dev) for prob, _ in selected]
        with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            return admission.run_side_by_side(
                selected, sizes, lambda job: pool.submit(evaluate_file, str(job[0].directory), str(job[1]),
                                                         options, str(db), run_id),
                jobs, admission.budget_bytes(dev), done=lambda i, ev: progress.advance(task))


def executor_mode(executor: str, device: str, gpus: str | None, slots: int, jobs: int) -> str:
    """``--executor`` resolved: inline (this process), local or ray."""
    if executor not in ("auto", "local", "ray"):
        raise UserError(f"unknown executor {executor!r}: use auto, local or ray")
    if executor != "auto":
        if jobs > 1:
            raise UserError("--jobs runs check-only evaluations side by side in this process: not with --executor")
        return executor
    if jobs > 1 or device == "cpu" and slots == 1 and gpus is None:
        return "inline"
    from solbench.schedule.devices import visible_gpus

    several = (slots > 1 if device == "cpu" or not visible_gpus() else
               (gpus is None and len(visible_gpus()) > 1) or (gpus is not None and gpus not in ("1", "0")))
    return "local" if several else "inline"


def _in_turn(selected: list[tuple], options: dict, store, run_id: int, dev: str, build_jobs: int | None,
             progress, task) -> list:
    """The evaluations one after another, the native builds of later ones running meanwhile on the cores the
    evaluation leaves (``evaluate.native.pool``), a job still building passed over for one ready
    (``BuildPool.ready_first``); a second bar counts the builds. Returned in the run's order."""
    from solbench.cli_schedule import start_compiles
    from solbench.evaluate.native import pool as build_pool
    from solbench.evaluate.runner import EvalOptions, evaluate
    from solbench.evaluate.trusted import keeper
    from solbench.problems.solution import load_solution

    jobs = [(prob, load_solution(path, prob.definition)) for prob, path in selected]
    before = build_pool.available_cores()
    mine, theirs = build_pool.slot_split()
    spare = len(theirs) if build_jobs is None else build_jobs
    builds = build_pool.solution_builds(jobs, dev, store) if spare else [None] * len(jobs)
    workers = min(spare, sum(b is not None for b in builds))
    evaluations = []
    compiles = None
    try:
        if spare and theirs:
            build_pool.confine(mine)
            for pid in keeper.worker_pids():  # started before the split (``prestart_worker``): confined now
                build_pool.pin_processes(pid, mine)
        with build_pool.BuildPool(builds, workers, theirs) as pool:
            built = progress.add_task("native builds", total=sum(f is not None for f in pool.futures)) \
                if workers else None
            for f in pool.futures if workers else []:
                if f is not None:
                    f.add_done_callback(lambda _: progress.advance(built))
            compiles = start_compiles([p for p, _ in jobs], options, store, spare, theirs, progress)
            for i in pool.ready_first():
                prob, sol = jobs[i]
                progress.update(task, description=f"{prob.name} / {sol.name}")
                pool.ready(i)
                evaluations.append((i, evaluate(prob, sol, EvalOptions(**options), store=store, run_id=run_id)))
                progress.advance(task)
    finally:
        if compiles is not None:
            compiles.stop()  # the run has ended (or was interrupted): none starts, running ones are killed
        build_pool.confine(before)
    return [ev for _, ev in sorted(evaluations, key=lambda pair: pair[0])]  # the run's order, for its table


def evaluate_file(problem_dir: str, solution_path: str, options: dict, db: str | None = None,
                  run_id: int | None = None):
    """One evaluation, by paths and plain options, as a process of a pool runs it (``--jobs``); stored through a
    connection of its own where ``db`` is given."""
    from solbench.evaluate.runner import EvalOptions, evaluate
    from solbench.problems.problem import load_problem
    from solbench.problems.solution import load_solution
    from solbench.store.db import Store

    prob = load_problem(problem_dir)
    return evaluate(prob, load_solution(solution_path, prob.definition), EvalOptions(**options),
                    store=Store(db) if db else None, run_id=run_id)


def select_examples(problems: list, languages: list[str] | None) -> list[tuple]:
    """(problem, example path) pairs, only those in ``languages`` where given (a UserError for an unknown one)."""
    from solbench.evaluate.languages import get_language
    from solbench.problems.solution import load_solution

    jobs = [(p, s) for p in problems for s in p.example_solutions]
    if not languages:
        return jobs
    wanted = {get_language(x).name for x in languages}
    return [(p, s) for p, s in jobs if get_language(load_solution(s, p.definition).language).name in wanted]


def baseline_kinds(text: str | None) -> tuple[str, ...] | None:
    """``--baselines``: None for the device's default set, () for none."""
    if text is None:
        return None
    kinds = tuple(k.strip() for k in text.split(",") if k.strip() and k.strip() != "none")
    unknown = [k for k in kinds if k not in ("eager", "compile", "baseline_file")]
    if unknown:
        raise UserError(f"unknown baseline {unknown[0]!r}: use eager, compile, baseline_file or none")
    return kinds
