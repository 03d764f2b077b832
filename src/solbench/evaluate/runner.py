"""The runner: stage a solution, decide what its sandbox may see, run it on the trusted worker, judge, score.

``evaluate`` is the evaluator's public entry (the CLI, the benchmarks, agents and experiments call it). It
draws the run's secret seed, scans the sources statically, stages the solution in an evaluation directory of
its own, and runs one job on the device's trusted worker (``keeper``), which checks and times the candidate
in its sandbox (docs/ARCHITECTURE.md); meanwhile it computes the SOL bound. The baselines come from the cache
or a second job (``baselines``); each workload's result is judged (``decision``) and the evaluation is stored.
"""

from __future__ import annotations

import atexit
import dataclasses
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from solbench import tempdirs
from solbench.analysis.heldout import HELDOUT_PREFIX
from solbench.analysis.roofline import Work, count_work
from solbench.evaluate import build_cache
from solbench.evaluate.baselines import default_baselines, harness_digest, measure_baselines
from solbench.evaluate.integrity import linked
from solbench.evaluate.isolation.sandbox import namespaces_available  # noqa: F401  (re-exported)
from solbench.evaluate.isolation.view import cache_root, sandbox_view
from solbench.evaluate.native.carry import Carry
from solbench.evaluate.phases import Phases
from solbench.evaluate.timing.rounds import TimingConfig
from solbench.evaluate.trusted import keeper
from solbench.evaluate.trusted.footprint import too_large
from solbench.evaluate.verdict.decision import judge
from solbench.hardware.platform import detect_platform
from solbench.hardware.spec import Ceilings, HardwareSpec
from solbench.problems.problem import Problem
from solbench.problems.solution import Solution
from solbench.records import scoring
from solbench.records.verdict import Evaluation, WorkloadResult, worst

atexit.register(keeper.retire_all)
#: every evaluation's directory is ``<temporary directory>/solbench-eval-XXXXXXXX`` (``tempdirs``)
EVAL_PREFIX = "solbench-eval-"
#: bytes of Triton cache carried from one evaluation of a solution to the next (regular files only)
MAX_CACHE_BYTES = 256 << 20


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


PROFILE_MODES = {True: "all", False: "off"}  # the older boolean form of EvalOptions.profile_dsl


def profile_mode(mode: str | bool) -> str:
    """EvalOptions.profile_dsl as the worker reads it: "one", "all" or "off" (ValueError for anything else)."""
    mode = PROFILE_MODES.get(mode, mode)
    if mode not in ("one", "all", "off"):
        raise ValueError(f"EvalOptions.profile_dsl must be one, all or off, not {mode!r}")
    return mode


def stage_solution(solution: Solution, root: Path) -> Path:
    staged = root / "solution"
    staged.mkdir(parents=True, exist_ok=True)
    for src in solution.sources:
        p = staged / src.path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(src.content)
        p.chmod(0o444)
    return staged


def _carry_cache(src: Path, dst: Path, below: Path | None = None) -> None:
    """Copy regular files (at most ``MAX_CACHE_BYTES``, none already there) from one Triton cache to another:
    the trusted side only moves bytes, and only the same solution (by digest) ever reads them. Under ``below``
    (the candidate's directory) no link is followed, the cache's own path included (``build_cache``)."""
    try:
        build_cache.copy_files(src, dst, MAX_CACHE_BYTES, skip=(), replace=False, below=below)
    except OSError:
        pass


def _job(problem: Problem, subjects: list[dict[str, Any]], pairs: list[tuple[int, str]], opts: EvalOptions,
         seed: int) -> dict[str, Any]:
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
        # held-out workloads exist only for this run: the worker learns them from the job, not from disk
        "extra_workloads": [w.model_dump() for w in problem.workloads if w.uuid.startswith(HELDOUT_PREFIX)],
    }


def _select_workloads(problem: Problem, opts: EvalOptions) -> list[str]:
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


def evaluate(problem: Problem, solution: Solution, opts: EvalOptions, store=None, run_id: int | None = None) -> Evaluation:
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
        from solbench.analysis.heldout import draw_heldout

        extra = draw_heldout(problem, opts.heldout, seed ^ 0x5EED, opts.device)
        public = _select_workloads(problem, opts)
        problem = dataclasses.replace(problem, workloads=list(problem.workloads) + extra)
        opts = dataclasses.replace(opts, workloads=public + [w.uuid for w in extra])
    uuids = _select_workloads(problem, opts)
    ph = Phases()
    with ph("static_scan"):
        findings = (static_findings(problem, solution, language.name, single_language(problem, opts))
                    if opts.static_checks else [])
    if any(f.severity == "reject" for f in findings):
        return _rejected_statically(problem, solution, language.name, opts, uuids, findings, seed, started_wall, t0,
                                    store, run_id)
    # a private directory locked by this process: one that a killed run left behind is swept by the next
    tempdirs.sweep(EVAL_PREFIX)
    owner = tempdirs.private_dir(EVAL_PREFIX)
    workdir = owner.path
    try:
        with ph("stage"):
            staged = stage_solution(solution, workdir)
        subject = {"kind": "solution", "staged": str(staged), "language": language.name,
                   "entry_file": solution.spec.entry_file, "function": solution.spec.entry_function,
                   "dps": solution.spec.destination_passing_style,
                   # the language proof's names, read here from the sources as submitted
                   "kernel_names": sorted(language.kernel_names({f.path: f.content for f in solution.sources}))}
        # the candidate's one writable directory: its cwd, TMPDIR and HOME, its Triton and Inductor caches, the
        # CPU arenas. Its Triton cache starts as a copy of this solution's own (keyed by digest) and is copied back
        private = workdir / "tmp"
        private.mkdir()
        carried = cache_root() / "triton" / solution.digest()
        with ph("stage"):
            _carry_cache(carried, private / "triton")
        with ph("build"):  # compiled languages: built, checked and hashed here before the candidate starts
            build = Carry(language, solution, opts.device, private, cache_root() / "build",
                                      view=sandbox_view(store, opts.device))
        candidate_env = {"TMPDIR": str(private), "HOME": str(private), "TRITON_CACHE_DIR": str(private / "triton"),
                         "TORCHINDUCTOR_CACHE_DIR": str(private / "inductor"),
                         "SOLBENCH_CPU_THREADS": str(opts.cpu_threads), **build.env}
        if opts.progress:
            opts.progress(f"{problem.name}: {solution.name} on {len(uuids)} workload(s)")
        refused = too_large(problem, uuids, opts.device)  # judged here they would get the worker killed
        # a language, toolchain or device this machine lacks: decided here, and nothing of the solution runs
        unavailable = build.unsupported or language.unavailable(opts.device)
        if unavailable:
            refused = {u: unavailable for u in uuids}
        if build.failed:  # the trusted build's verdict (compile_error, reward_hack): nothing of the solution runs
            refused = {u: build.failed["message"] for u in uuids}
        runnable = [u for u in uuids if u not in refused]
        cand_job = _job(problem, [subject], [(0, u) for u in runnable], opts, seed)
        cand_job["workdir"] = str(workdir)
        cand_job["sandbox"] = dict(sandbox_view(store, opts.device), env=keeper.child_env(candidate_env), private=str(private),
                                   mode=opts.sandbox, max_file_bytes=opts.max_file_bytes,
                                   max_address_space_bytes=opts.max_address_space_bytes)
        # the SOL analysis (fake tensors, CPU only) runs in this process while the candidate's worker runs
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=1) as pool:
            analysis = pool.submit(_timed, analyse, problem, uuids)
            with ph("worker"), build:
                cand = keeper.run_worker(cand_job, opts.startup_timeout_s, opts.workload_timeout_s, workdir)
            work, analysis_s = analysis.result()
        ph.add("analysis", analysis_s)  # in a thread of its own, while the worker ran
        with ph("stage"):
            _carry_cache(private / "triton", carried, below=private)
        env = dict(cand.environment or {"device": opts.device})
        env["sandbox"] = cand.sandbox or ("namespaces" if (opts.sandbox == "auto" and namespaces_available())
                                          else "rlimits")
        env["seccomp"] = cand.filtered  # the candidate's system-call filter, read from outside its process
        env["worker_ready_s"] = cand.ready_s
        env["timing_hold"] = opts.timing.hold
        # what made this evaluation, so that evaluations are compared only with ones made alike
        env["harness"] = harness_digest()
        env["profile_dsl"] = profile_mode(opts.profile_dsl)
        env["candidate_ready_s"] = cand.candidate_ready_s
        if build.report:
            env["build"] = build.report  # key, cached, published, compile_s (apart from any run time)
        env["platform"] = detect_platform(opts.device).record()  # vendor, architecture, telemetry source
        if cand.candidate_restarts:
            env["candidate_restarts"] = cand.candidate_restarts
        kinds = opts.baselines if opts.baselines is not None else default_baselines(problem, opts.device)

        def run_baselines(subjects, pairs):
            return keeper.run_worker(_job(problem, subjects, pairs, opts, seed), opts.startup_timeout_s,
                                      opts.workload_timeout_s, workdir)

        with ph("baselines"):
            base = measure_baselines(problem, runnable, kinds, opts.device, opts.timing.hold, env, run_baselines,
                                     store, opts.use_baseline_cache, opts.progress) if runnable else {}
    finally:
        owner.close()
    datasheet = opts.hardware.ceilings(scale_to_max_clock=True)
    results: list[WorkloadResult] = []
    with ph("judge"):
        for uuid in uuids:
            r = cand.results.get((0, uuid)) if uuid not in refused else build.failed or {
                "verdict": "unsupported", "message": refused[uuid],
                "reasons": ["language_unavailable" if unavailable else "too_large_for_device"]}
            results.append(judge(problem, uuid, r, base, work.get(uuid), datasheet,
                                 opts.calibrated, int(opts.hardware.llc_bytes.value)))
        if build.linked is not None and not unavailable:  # read from the bytes the build checked and hashed
            used = build.linked
            linked.apply(results, used, language.name, single_language(problem, opts))
            if used:
                env["linked"] = used
    verdicts = [r.verdict for r in results]
    ev = Evaluation(
        problem=problem.name, problem_dir=str(problem.directory), problem_digest=problem.digest(),
        solution=solution.name, solution_digest=solution.digest(), language=language.name, author=solution.author,
        hardware=opts.hardware.id, device=opts.device, device_name=env.get("device_name"),
        verdict=worst(verdicts) if results else "unsupported",
        reasons=sorted({r for w in results for r in w.reasons if w.verdict != "passed"}),
        warnings=sorted({x for w in results for x in w.warnings} | {f"static:{f.rule}" for f in findings}
                        | ({"sandbox_rlimits_only"} if env["sandbox"] != "namespaces" else set())
                        | ({"seccomp_unavailable"} if env.get("seccomp") is False else set())
                        # no language proof for this language (or on this device): its kernels' share of the
                        # work is not checked
                        | ({"language_unproven"} if not language.proven_on(opts.device) and not unavailable
                           else set())),
        findings=[f"{f.severity} static:{f.rule} {f.path}:{f.line}: {f.message}" for f in findings],
        message=cand.fatal.get(0, {}).get("message") or unavailable or (build.failed or {}).get("message"),
        workloads=results, environment=env, seed=seed, started=started_wall,
        log=(cand.candidate_log + ("\n--- trusted worker ---\n" + cand.log if cand.log.strip() else ""))[-40000:],
    )
    ev.sol_score = scoring.aggregate(results)
    ev.mean_speedup_vs_eager = scoring.geomean([r.speedup_vs_eager for r in results])
    ev.fast_p = scoring.evaluation_fast_p(results)  # an unsupported workload stays in the denominator
    ph.merge(cand.phases)
    if cand.ready_s is not None:  # the trusted worker's own start, where this job started it
        ph.add("worker_start", max(0.0, cand.ready_s - cand.phases.get("candidate_start", 0.0)))
    for r in results:
        ph.merge(r.phases)
    ev.phases = ph.take()
    ev.elapsed_s = time.perf_counter() - t0
    if store is not None:
        t_store = time.perf_counter()
        store.add_evaluation(ev, solution.model_dump_json(), run_id)
        ev.phases["store"] = round(time.perf_counter() - t_store, 6)
    return ev


def _timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


def single_language(problem: Problem, opts: EvalOptions) -> bool:
    """Whether the solution must do its work in its own language alone (the options' or the problem's rule)."""
    pol = problem.definition.policy
    return bool(opts.single_language or (pol is not None and pol.single_language))


def static_findings(problem: Problem, solution: Solution, language: str, single: bool = False) -> list:
    from solbench.evaluate.integrity.static import Policy, scan_sources

    pol = problem.definition.policy
    policy = Policy(allow=frozenset(pol.allow) if pol else frozenset(),
                    forbid_calls=frozenset(pol.forbid_calls) if pol else frozenset(), single_language=single)
    return scan_sources([(s.path, s.content) for s in solution.sources], language, policy)


def _rejected_statically(problem: Problem, solution: Solution, language: str, opts: EvalOptions, uuids: list[str],
                         findings: list, seed: int, started: str, t0: float, store, run_id) -> Evaluation:
    """A static reject: nothing of the solution runs; every workload gets the verdict."""
    reasons = sorted({f"static:{f.rule}" for f in findings if f.severity == "reject"})
    first = next(f for f in findings if f.severity == "reject")
    message = f"{first.path}:{first.line}: {first.message}"
    results = [WorkloadResult(uuid=u, label=problem.workload(u).label, axes=problem.definition.resolve_axes(
        problem.workload(u).axes), verdict="reward_hack", reasons=reasons, message=message, sol_score=0.0)
        for u in uuids]
    ev = Evaluation(
        problem=problem.name, problem_dir=str(problem.directory), problem_digest=problem.digest(),
        solution=solution.name, solution_digest=solution.digest(), language=language, author=solution.author,
        hardware=opts.hardware.id, device=opts.device, verdict="reward_hack", reasons=reasons,
        warnings=sorted({f"static:{f.rule}" for f in findings if f.severity != "reject"}),
        findings=[f"{f.severity} static:{f.rule} {f.path}:{f.line}: {f.message}" for f in findings],
        message=message, workloads=results, seed=seed, started=started, sol_score=0.0,
        environment={"device": opts.device, "platform": detect_platform(opts.device).record()},
        elapsed_s=time.perf_counter() - t0)
    if store is not None:
        store.add_evaluation(ev, solution.model_dump_json(), run_id)
    return ev

