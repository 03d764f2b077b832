"""The runner: stage a solution, decide what its sandbox may see, run it on the trusted worker, judge, score.

``evaluate`` is the evaluator's public entry (the CLI, the benchmarks, agents and experiments call it). It
draws the run's secret seed, scans the sources statically, stages the solution in an evaluation directory of
its own, and runs one job on the device's trusted worker (``keeper``), which checks and times the candidate
in its sandbox (docs/ARCHITECTURE.md); meanwhile it computes the SOL bound. The baselines come from the cache
or a second job (``baselines``); each workload's result is judged (``decision``) and the evaluation is stored.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from solbench import caches, tempdirs
from solbench.analysis.heldout import HELDOUT_PREFIX
from solbench.analysis.roofline import Work, count_work
from solbench.evaluate import ahead_marks, build_cache, lease, triton_cache
from solbench.evaluate.baselines import default_baselines, harness_digest, measure_baselines
from solbench.evaluate.integrity import linked
from solbench.evaluate.integrity.language import profile_mode
from solbench.evaluate.isolation.namespaces import namespaces_available
from solbench.evaluate.isolation.view import sandbox_view
from solbench.evaluate.native.carry import Carry
from solbench.evaluate.phases import Phases
from solbench.evaluate.timing.rounds import TimingConfig
from solbench.evaluate.trusted import keeper, profiling
from solbench.evaluate.trusted.footprint import too_large
from solbench.evaluate.trusted.report import WorkloadReport
from solbench.evaluate.verdict.decision import judge
from solbench.evaluate.static_reject import rejected_statically, static_findings
from solbench.hardware.platform import detect_platform
from solbench.hardware.spec import Ceilings, HardwareSpec
from solbench.problems.problem import Problem
from solbench.problems.solution import Solution
from solbench.records import scoring
from solbench.records.verdict import VERDICT_ORDER, Evaluation, WorkloadResult, worst

#: the process is ending and every job has ended: its workers are killed, side by side, not asked to exit (a graceful
#: exit of one is its interpreter's teardown, about 0.6 s on the CPU machine, for nothing)
atexit.register(keeper.retire_all, 0)
#: every evaluation's directory is ``<temporary directory>/solbench-eval-XXXXXXXX`` (``tempdirs``)
EVAL_PREFIX = "solbench-eval-"


#: where an evaluation's log turns from the candidate's output to the trusted worker's
TRUSTED_LOG = "\n--- trusted worker ---\n"
#: correctness draws of a trusted baseline (a solution gets ``EvalOptions.draws``)
BASELINE_DRAWS = 1
#: the longest a run's compile baseline waits for its compile ahead (``ahead_marks``) before compiling it itself
AHEAD_WAIT_S = 120.0


@dataclass
class EvalOptions:
    device: str = "cpu"
    draws: int = 5
    seed: int | None = None
    timing: TimingConfig = field(default_factory=TimingConfig)
    startup_timeout_s: float = 180.0  # process start + import + build of the solution
    #: per workload: checks + timing, first compile included; None: the limit follows the work (``limits``)
    workload_timeout_s: float | None = None
    run_after_timeout: bool = False  # run a solution's remaining workloads after it exceeded a limit
    #: run a solution's remaining workloads after the trusted worker caught it as a reward hack on one
    run_after_reward_hack: bool = False
    baselines: tuple[str, ...] | None = None  # None: eager + baseline.py, and compile on the GPU
    use_baseline_cache: bool = True
    time_candidate: bool = True
    input_sets: int = 3  # input sets the trusted baselines cycle through while timed
    hardware: HardwareSpec | None = None
    calibrated: Ceilings | None = None
    workloads: list[str] | None = None  # uuids; None: every workload for the device
    progress: Callable[[str], None] | None = None
    #: "auto": candidates isolated (namespaces, sealed filesystem, no capabilities: ``namespaces``) where the
    #: machine allows it, else rlimits only; "none": rlimits only
    sandbox: str = "auto"
    max_file_bytes: int = 4 << 30  # RLIMIT_FSIZE for candidates
    max_address_space_bytes: int = 64 << 30  # RLIMIT_AS for CPU candidates (CUDA reserves more: not set there)
    static_checks: bool = True  # scan the sources before running anything (off only to test the dynamic layer)
    heldout: int = 0  # extra workloads per problem drawn from the axis ranges with the run's secret seed
    #: GPU language proof (integrity/language.py): profile one call of a DSL solution for its own kernels' share of
    #: the device time, on one workload the secret seed picks ("one"), on every one ("all", or True) or never ("off")
    profile_dsl: str | bool = "one"
    #: one language only (an experiment arm's rule; a problem's policy can ask it too): kernels of another
    #: language or library (Triton in a CuTe DSL solution, cuBLAS, torch.compile's) are reward hacks, not glue
    single_language: bool = False
    #: CPU threads of the trusted worker and of every candidate alike (torch.set_num_threads), so CPU times compare
    cpu_threads: int = 1


def stage_solution(solution: Solution, root: Path) -> Path:
    staged = root / "solution"
    staged.mkdir(parents=True, exist_ok=True)
    for src in solution.sources:
        p = staged / src.path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(src.content)
        p.chmod(0o444)
    return staged


def worker_job(problem: Problem, subjects: list[dict[str, Any]], pairs: list[tuple[int, str]], opts: EvalOptions,
               seed: int) -> dict[str, Any]:
    """The trusted worker's job: ``subjects`` (a solution, or baselines) judged on ``pairs`` (subject, workload)
    under ``opts``, drawing from ``seed``."""
    llc = int(opts.hardware.llc_bytes.value) if opts.hardware is not None else 64 << 20
    return {
        "problem_dir": str(problem.directory),
        "subjects": subjects,
        "pairs": [list(p) for p in pairs],
        "device": opts.device,
        "seed": seed,
        "draws": opts.draws,
        "timing": opts.timing.__dict__,
        "time": opts.time_candidate,
        "llc_bytes": llc,
        "input_sets": opts.input_sets,
        "profile_dsl": profile_mode(opts.profile_dsl),
        "single_language": single_language(problem, opts),
        "cpu_threads": opts.cpu_threads,
        "startup_timeout_s": opts.startup_timeout_s,
        "workload_timeout_s": opts.workload_timeout_s,
        "run_after_timeout": opts.run_after_timeout,
        "run_after_reward_hack": opts.run_after_reward_hack,
        # held-out workloads exist only for this run: the worker learns them from the job, not from disk
        "extra_workloads": [w.model_dump() for w in problem.workloads if w.uuid.startswith(HELDOUT_PREFIX)],
    }


def select_workloads(problem: Problem, opts: EvalOptions) -> list[str]:
    """The workloads an evaluation under ``opts`` runs: those it names, or every workload for its device."""
    if opts.workloads:
        for uuid in opts.workloads:
            problem.workload(uuid)  # raises a UserError for an unknown uuid
        return list(opts.workloads)
    return [w.uuid for w in problem.workloads_for(opts.device)]


def analyse(problem: Problem, uuids: list[str]) -> dict[str, Work | str]:
    from solbench.problems.modules import module_from_source

    module = module_from_source(problem.reference_source, f"solbench_ref_analysis_{problem.name}")
    out: dict[str, Work | str] = {}
    for uuid in uuids:
        try:
            out[uuid] = count_work(problem, problem.workload(uuid), module)
        except Exception as exc:
            out[uuid] = f"{type(exc).__name__}: {exc}"
    return out



def _baselines(problem: Problem, uuids: list[str], opts: EvalOptions, seed: int, env: dict[str, Any], workdir: Path,
               store) -> dict[str, dict[str, dict[str, Any]]]:
    """The baselines the options ask for (the problem's defaults where they ask for none), measured in the trusted
    worker where the store has none cached for this software and harness."""
    kinds = opts.baselines if opts.baselines is not None else default_baselines(problem, opts.device)

    def run(subjects, pairs):  # a trusted baseline is checked on one draw (the reference, compiled or not, or the
        # problem's own baseline.py): its timing is what it is measured for
        if {"kind": "compile"} in subjects:  # a compile ahead of these workloads still running: its caches serve
            ahead_marks.wait_compiled(opts.device, ahead_marks.problem_key(problem), [u for _, u in pairs],
                                      AHEAD_WAIT_S)
        job = worker_job(problem, subjects, pairs, dataclasses.replace(opts, draws=BASELINE_DRAWS), seed)
        return keeper.run_worker(job, opts.startup_timeout_s, opts.workload_timeout_s, workdir)

    return measure_baselines(problem, uuids, kinds, opts.device, opts.timing.hold, env, run, store,
                             opts.use_baseline_cache, opts.progress)


def _judged(problem: Problem, reports: dict[str, WorkloadReport | None], base, work: dict[str, Work | str],
            opts: EvalOptions) -> list[WorkloadResult]:
    """Each workload's result from its report, against the datasheet's ceilings (and the calibrated ones)."""
    datasheet = opts.hardware.ceilings(scale_to_max_clock=True)
    return [judge(problem, uuid, r, base, work.get(uuid), datasheet, opts.calibrated,
                  int(opts.hardware.llc_bytes.value)) for uuid, r in reports.items()]


def _unrun(uuid: str, build: Carry, unavailable: str | None, why: str) -> WorkloadReport:
    """The report of a workload nothing of the solution ran on: the trusted build's verdict (compile_error,
    reward_hack), or unsupported (a language or toolchain missing here, a workload too large for the device)."""
    if build.failed:
        return WorkloadReport.model_validate(dict(build.failed, uuid=uuid))
    return WorkloadReport.failed(uuid, "unsupported",
                                 ["language_unavailable" if unavailable else "too_large_for_device"], why)


def evaluate(problem: Problem, solution: Solution, opts: EvalOptions, store=None, run_id: int | None = None,
             record: bool = True) -> Evaluation:
    """Evaluate ``solution`` on ``problem``. ``store``: the results database, where the baselines' cache is read
    and written and, with ``record``, the evaluation is stored (without: its caller stores it, as a scheduler's
    single writer does)."""
    from solbench.evaluate.languages import get_language
    from solbench.hardware.registry import detect

    language = get_language(solution.language)  # unknown languages are a user error, raised before any work
    started_wall = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    t0 = time.perf_counter()
    # a cold trusted worker starts now (its imports take seconds), while this process scans, stages and analyses
    keeper.judge_for(opts.device)
    if opts.hardware is None:
        opts.hardware = detect(opts.device)
    seed = opts.seed if opts.seed is not None else secrets.randbits(63)
    if opts.heldout:
        problem, opts = _with_heldout(problem, opts, seed)
    uuids = select_workloads(problem, opts)
    ph = Phases()
    with ph("static_scan"):
        findings = (static_findings(problem, solution, language.name, single_language(problem, opts))
                    if opts.static_checks else [])
    if any(f.severity == "reject" for f in findings):
        return rejected_statically(problem, solution, language.name, opts, uuids, findings, seed, started_wall, t0,
                                   store if record else None, run_id)
    # a private directory locked by this process: one that a killed run left behind is swept by the next
    tempdirs.sweep(EVAL_PREFIX)
    owner = tempdirs.private_dir(EVAL_PREFIX)
    workdir = owner.path
    try:
        with ph("stage"):
            staged = stage_solution(solution, workdir)
        # the candidate's one writable directory: its cwd, TMPDIR and HOME, its Triton and Inductor caches, the
        # CPU arenas. Its Triton cache starts as a copy of this solution's own (keyed by digest) and is copied back
        private = workdir / "tmp"
        private.mkdir()
        carried = caches.root() / "triton" / solution.digest()
        with ph("stage"):
            triton_cache.carry_in(carried, private / "triton")
        with ph("build"):  # compiled languages: built, checked and hashed here before the candidate starts
            build = Carry(language, solution, opts.device, private, build_cache.default_root(),
                          view=sandbox_view(store, opts.device))
        if opts.progress:
            opts.progress(f"{problem.name}: {solution.name} on {len(uuids)} workload(s)")
        refused, unavailable = _refused(problem, uuids, opts.device, language, build)
        runnable = [u for u in uuids if u not in refused]
        cand_job = worker_job(problem, [_subject(solution, language, staged)], [(0, u) for u in runnable], opts, seed)
        cand_job["workdir"] = str(workdir)
        cand_job["sandbox"] = _sandbox(opts, store, private, build)
        # the SOL analysis (fake tensors, CPU only) runs in this process while the candidate's worker runs
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=1) as pool, contextlib.ExitStack() as leased:
            analysis = pool.submit(_timed, analyse, problem, uuids)
            with ph("lease"):  # the device's lease, to the baselines' end: timing is exclusive on its GPU
                leased.enter_context(lease.hold(opts.device, exclusive=_times(opts)))
            with ph("worker"), build:
                cand = keeper.run_worker(cand_job, opts.startup_timeout_s, opts.workload_timeout_s, workdir)
            work, analysis_s = analysis.result()
            ph.add("analysis", analysis_s)  # in a thread of its own, while the worker ran
            profiling.collect_candidates(private)  # benchmarks only: nothing unless asked for
            if carries_back(opts):
                with ph("stage"):
                    triton_cache.carry_out(private / "triton", carried, below=private)
            env = _environment(cand, build, opts)
            with ph("baselines"):
                base = _baselines(problem, runnable, opts, seed, env, workdir, store) if runnable else {}
    finally:
        owner.close()
    with ph("judge"):
        reports = {u: _unrun(u, build, unavailable, refused[u]) if u in refused else cand.results.get((0, u))
                   for u in uuids}
        results = _judged(problem, reports, base, work, opts)
        if build.linked is not None and not unavailable:  # read from the bytes the build checked and hashed
            linked.apply(results, build.linked, language.name, single_language(problem, opts))
            if build.linked:
                env["linked"] = build.linked
    ev = _evaluation(problem, solution, language, opts, results, findings, env, cand, build, unavailable)
    ev.seed, ev.started = seed, started_wall
    _phases(ev, ph, cand, results)
    ev.elapsed_s = time.perf_counter() - t0
    if store is not None and record:
        t_store = time.perf_counter()
        store.add_evaluation(ev, solution.model_dump_json(), run_id)
        ev.phases["store"] = round(time.perf_counter() - t_store, 6)
    return ev


def _subject(solution: Solution, language, staged: Path) -> dict[str, Any]:
    """The candidate's subject in the worker's job: the staged solution, its entry, the language proof's names
    (read here from the sources as submitted)."""
    return {"kind": "solution", "staged": str(staged), "language": language.name,
            "entry_file": solution.spec.entry_file, "function": solution.spec.entry_function,
            "dps": solution.spec.destination_passing_style,
            "kernel_names": sorted(language.kernel_names({f.path: f.content for f in solution.sources}))}


def _sandbox(opts: EvalOptions, store, private: Path, build: Carry) -> dict[str, Any]:
    """The candidate's sandbox: its view of the machine, its environment (every cache in its one writable
    directory ``private``), its mode and limits."""
    env = {"TMPDIR": str(private), "HOME": str(private), "TRITON_CACHE_DIR": str(private / "triton"),
           "TORCHINDUCTOR_CACHE_DIR": str(private / "inductor"), "SOLBENCH_CPU_THREADS": str(opts.cpu_threads),
           **build.env, **profiling.candidate_env(private), **keeper.pinned(opts.device)[1]}  # the worker's GPU alone
    return dict(sandbox_view(store, opts.device), env=keeper.child_env(env), private=str(private), mode=opts.sandbox,
                max_file_bytes=opts.max_file_bytes, max_address_space_bytes=opts.max_address_space_bytes)


def _refused(problem: Problem, uuids: list[str], device: str, language, build: Carry
             ) -> tuple[dict[str, str], str | None]:
    """The workloads nothing of the solution runs on, each with why, and why none can run here (or None): too
    large for the device (judged they would get the worker killed); a language, toolchain or device this machine
    lacks; the trusted build's verdict (compile_error, reward_hack)."""
    refused = too_large(problem, uuids, device)
    unavailable = build.unsupported or language.unavailable(device)
    if unavailable:
        refused = {u: unavailable for u in uuids}
    if build.failed:
        refused = {u: build.failed["message"] for u in uuids}
    return refused, unavailable


def _with_heldout(problem: Problem, opts: EvalOptions, seed: int) -> tuple[Problem, EvalOptions]:
    """The problem with ``opts.heldout`` extra workloads drawn from its axis ranges with the run's secret seed, and
    the options selecting them beside the public ones."""
    from solbench.analysis.heldout import draw_heldout

    extra = draw_heldout(problem, opts.heldout, seed ^ 0x5EED, opts.device)
    public = select_workloads(problem, opts)
    problem = dataclasses.replace(problem, workloads=list(problem.workloads) + extra)
    return problem, dataclasses.replace(opts, workloads=public + [w.uuid for w in extra])


def _environment(cand: keeper.WorkerOutcome, build: Carry, opts: EvalOptions) -> dict[str, Any]:
    """What made this evaluation, so that evaluations are compared only with ones made alike: the device, the
    candidate's isolation and filter (read from outside its process), the harness, the build, the platform."""
    env = dict(cand.environment or {"device": opts.device})
    env["sandbox"] = cand.sandbox or ("namespaces" if (opts.sandbox == "auto" and namespaces_available())
                                      else "rlimits")
    env["seccomp"] = cand.filtered
    env["worker_ready_s"] = cand.ready_s
    env["timing_hold"] = opts.timing.hold
    env["harness"] = harness_digest()
    env["profile_dsl"] = profile_mode(opts.profile_dsl)
    env["candidate_ready_s"] = cand.candidate_ready_s
    if build.report:
        env["build"] = build.report  # key, cached, published, compile_s (apart from any run time)
    env["platform"] = detect_platform(opts.device).record()  # vendor, architecture, telemetry source
    if cand.candidate_restarts:
        env["candidate_restarts"] = cand.candidate_restarts
    if cand.added_bytes or cand.retired:  # device memory its candidates never handed back (``worker._held``)
        env.update(worker_held_added_bytes=cand.added_bytes, worker_held_bytes=cand.held_bytes,
                   worker_retired=cand.retired)
    return env


def _evaluation(problem: Problem, solution: Solution, language, opts: EvalOptions, results: list[WorkloadResult],
                findings: list, env: dict[str, Any], cand: keeper.WorkerOutcome, build: Carry,
                unavailable: str | None) -> Evaluation:
    """The evaluation from its workloads' results: the worst verdict, their failing reasons, every warning (theirs,
    the static scan's, and the evaluation's own), the scores."""
    warnings = ({x for w in results for x in w.warnings} | {f"static:{f.rule}" for f in findings}
                | ({"sandbox_rlimits_only"} if env["sandbox"] != "namespaces" else set())
                | ({"seccomp_unavailable"} if env.get("seccomp") is False else set())
                # no language proof for this language (or on this device): its kernels' share of the work is
                # not checked
                | ({"language_unproven"} if not language.proven_on(opts.device) and not unavailable else set()))
    ev = Evaluation(
        problem=problem.name, problem_dir=str(problem.directory), problem_digest=problem.digest(),
        solution=solution.name, solution_digest=solution.digest(), language=language.name, author=solution.author,
        hardware=opts.hardware.id, device=opts.device, device_name=env.get("device_name"),
        verdict=worst([r.verdict for r in results]) if results else "unsupported",
        reasons=sorted({r for w in results for r in w.reasons if w.verdict != "passed"}),
        warnings=sorted(warnings),
        findings=[f"{f.severity} static:{f.rule} {f.path}:{f.line}: {f.message}" for f in findings],
        message=cand.fatal.get(0, {}).get("message") or unavailable or (build.failed or {}).get("message")
        or _why(results),
        workloads=results, environment=env,
        log=(cand.candidate_log + (TRUSTED_LOG + cand.log if cand.log.strip() else ""))[-40000:],
    )
    ev.sol_score = scoring.aggregate(results)
    ev.mean_speedup_vs_eager = scoring.geomean([r.speedup_vs_eager for r in results])
    ev.fast_p = scoring.evaluation_fast_p(results)  # an unsupported workload stays in the denominator
    return ev


def _why(results: list[WorkloadResult]) -> str | None:
    """The message of the first workload of the worst failing verdict, named by its workload."""
    failing = [w for w in results if w.verdict != "passed" and w.message]
    if not failing:
        return None
    w = min(failing, key=lambda w: VERDICT_ORDER.index(w.verdict))
    return f"{w.uuid}: {w.message}"


def _phases(ev: Evaluation, ph: Phases, cand: keeper.WorkerOutcome, results: list[WorkloadResult]) -> None:
    """Where the evaluation's time went: this process's phases, the worker's, and each workload's."""
    ph.merge(cand.phases)
    if cand.ready_s is not None:  # the trusted worker's own start, where this job started it
        ph.add("worker_start", max(0.0, cand.ready_s - cand.phases.get("candidate_start", 0.0)))
    for r in results:
        ph.merge(r.phases)
    ev.phases = ph.take()


def carries_back(opts: EvalOptions) -> bool:
    """Whether the candidate's Triton cache is kept for the next evaluation of the same sources: only from a run
    whose seed was drawn fresh and that drew no held-out workloads. A run under a given seed (an agent's
    attempt, a service's seed group, a replay) meets the same inputs again next time, and a held-out workload's
    shapes are secret: what a candidate wrote in its cache there could replay outputs or leak the shapes to the
    next run of the same code."""
    return opts.seed is None and not opts.heldout


def _times(opts: EvalOptions) -> bool:
    """Whether the evaluation times anything: the candidate, or baselines the cache may lack."""
    return opts.time_candidate or opts.baselines != ()


def _timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


def single_language(problem: Problem, opts: EvalOptions) -> bool:
    """Whether the solution must do its work in its own language alone (the options' or the problem's rule)."""
    pol = problem.definition.policy
    return bool(opts.single_language or (pol is not None and pol.single_language))
