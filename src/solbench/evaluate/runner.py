"""The runner: stage, keep the trusted worker, enforce time limits, judge, score.

Jobs (a candidate solution, or a problem's baselines) go to one persistent
trusted worker per device (``solbench.evaluate.worker --serve``), which makes
the inputs, computes the references, compares and times, and runs each
candidate in a sandboxed process of its own (docs/ARCHITECTURE.md). Results come
back per workload as JSON lines on a dedicated pipe; this side validates them,
computes statistics and the SOL score, and stores the evaluation. A trusted
worker that crashes, hangs or loses its CUDA context is replaced; the workload
in progress gets the verdict and the fresh worker takes the remaining ones.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import os
import secrets
import select
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from solbench import scoring
from solbench.analysis.roofline import Work, count_work, sol_time
from solbench.evaluate.sandbox import end_process, namespaces_available  # noqa: F401  (re-exported)
from solbench.evaluate.stats import summarize
from solbench.evaluate.timing import TimingConfig
from solbench.evaluate.verdict import INCORRECT, VERDICT_ORDER, Evaluation, WorkloadResult, worst
from solbench.hardware.spec import Ceilings, HardwareSpec
from solbench.hardware.telemetry import SLOWDOWN_REASONS
from solbench.problems.problem import Problem
from solbench.problems.solution import Solution

PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])
HELDOUT_PREFIX = "heldout-"
_KEEP_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "LD_LIBRARY_PATH",
             "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
             "NVSHMEM_DISABLE_NVLS", "SOLBENCH_ZYGOTE", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "VIRTUAL_ENV", "SOLBENCH_EXTRA_PATH")


@dataclass
class EvalOptions:
    device: str = "cpu"
    draws: int = 5
    seed: int | None = None
    timing: TimingConfig = field(default_factory=TimingConfig)
    startup_timeout_s: float = 180.0  # process start + import + build of the solution
    workload_timeout_s: float = 120.0  # per workload: checks + timing (first compile included)
    baselines: tuple[str, ...] | None = None  # None: eager + baseline.py, and compile on the GPU
    use_baseline_cache: bool = True
    time_candidate: bool = True
    input_sets: int = 3
    hardware: HardwareSpec | None = None
    calibrated: Ceilings | None = None
    workloads: list[str] | None = None  # uuids; None: every workload for the device
    progress: Callable[[str], None] | None = None
    #: "auto": user, PID and network namespaces for candidates where `unshare` works, else rlimits only;
    #: "none": no namespaces (rlimits still apply)
    sandbox: str = "auto"
    max_file_bytes: int = 4 << 30  # RLIMIT_FSIZE for candidates
    max_address_space_bytes: int = 64 << 30  # RLIMIT_AS for CPU candidates (CUDA reserves more: not set there)
    static_checks: bool = True  # scan the sources before running anything (off only to test the dynamic layer)
    heldout: int = 0  # extra workloads per problem drawn from the axis ranges with the run's secret seed
    #: GPU language proof (integrity/language.py): profile one call of a DSL solution for its own kernels' share of
    #: the device time, on one workload the secret seed picks ("one"), on every one ("all", or True) or never ("off")
    profile_dsl: str | bool = "one"


@dataclass
class WorkerOutcome:
    environment: dict[str, Any] = field(default_factory=dict)
    #: (subject index, workload uuid) -> the worker's result message
    results: dict[tuple[int, str], dict[str, Any]] = field(default_factory=dict)
    fatal: dict[int, dict[str, Any]] = field(default_factory=dict)  # subject index -> compile error
    log: str = ""
    elapsed_s: float = 0.0
    ready_s: float | None = None  # trusted worker's start to "ready" (its candidate loaded), first worker
    candidate_ready_s: float | None = None  # the candidate's process: start to solution imported
    sandbox: str | None = None  # the isolation the candidate's process got: "namespaces" or "rlimits"
    candidate_log: str = ""
    candidate_restarts: int = 0

    def for_subject(self, index: int) -> dict[str, dict[str, Any]]:
        return {uuid: r for (i, uuid), r in self.results.items() if i == index}


class _WorkerResult(BaseModel):
    """The shape a worker's per-workload message must have; anything else is treated as forged."""

    model_config = ConfigDict(extra="allow")
    uuid: str
    subject: int = 0
    verdict: str
    reasons: list[str] = Field(default_factory=list)
    samples_ms: list[float] | None = None
    wall_ms: list[float] | None = None
    wall_event_ms: list[float] | None = None
    graph_ms: float | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    peak_memory_bytes: int | None = None

    @field_validator("verdict")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in VERDICT_ORDER:
            raise ValueError(f"unknown verdict {v!r}")
        return v

    @field_validator("samples_ms", "wall_ms", "wall_event_ms")
    @classmethod
    def _plausible(cls, v: list[float] | None) -> list[float] | None:
        if v is not None and any(not (x >= 0) or x != x for x in v):
            raise ValueError("negative or NaN time")
        return v


def _checked(msg: dict[str, Any]) -> dict[str, Any]:
    try:
        _WorkerResult.model_validate(msg)
        return msg
    except ValidationError as exc:
        return {"uuid": str(msg.get("uuid")), "verdict": "reward_hack", "reasons": ["result_forgery"],
                "message": f"malformed result message from the worker: {exc.errors()[0]['msg']}"}


def _child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in _KEEP_ENV}
    paths = [PACKAGE_PARENT]
    if os.environ.get("SOLBENCH_EXTRA_PATH"):
        paths.append(os.environ["SOLBENCH_EXTRA_PATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if extra:
        env.update(extra)
    return env


class Judge:
    """The persistent trusted worker of one device (``python -m solbench.evaluate.worker --serve``).

    It is started once per device and process, takes one job at a time, and is
    replaced when it crashes, hangs or loses its CUDA context. Candidates never
    run in it: it forks each one's sandboxed process from its zygote.
    """

    def __init__(self, device: str):
        self.device = device
        self.dir = Path(tempfile.mkdtemp(prefix="solbench-judge-"))
        self.log_path = self.dir / "worker.log"
        cmd_r, cmd_w = os.pipe()
        res_r, res_w = os.pipe()
        argv = [sys.executable, "-m", "solbench.evaluate.worker", "--serve", str(cmd_r), str(res_w)]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, pass_fds=(cmd_r, res_w),
                cwd=str(self.dir), env=_child_env({"SOLBENCH_WORKER_DEVICE": device}), start_new_session=True)
        os.close(cmd_r)
        os.close(res_w)
        self.cmd = os.fdopen(cmd_w, "w", buffering=1)
        self.res_fd = res_r
        self.jobs = 0

    def alive(self) -> bool:
        return self.proc.poll() is None

    def submit(self, job_path: Path) -> int:
        """Send a job; returns the log offset where its output starts."""
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        self.cmd.write(f"{job_path}\n")
        self.cmd.flush()
        self.jobs += 1
        return offset

    def log_since(self, offset: int) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                return f.read()[-20000:].decode(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        end_process(self.proc, 5, self.cmd.close, lambda: os.close(self.res_fd))
        shutil.rmtree(self.dir, ignore_errors=True)


_JUDGES: dict[str, Judge] = {}


def judge_for(device: str) -> Judge:
    judge = _JUDGES.get(device)
    if judge is None or not judge.alive():
        if judge is not None:
            judge.stop()
        judge = _JUDGES[device] = Judge(device)
    return judge


def retire_judge(device: str) -> None:
    judge = _JUDGES.pop(device, None)
    if judge is not None:
        judge.stop()


@atexit.register
def _retire_all() -> None:
    for device in list(_JUDGES):
        retire_judge(device)


def run_worker(job: dict[str, Any], opts: EvalOptions, workdir: Path) -> WorkerOutcome:
    """Run ``job`` on the device's trusted worker until every (subject, workload) pair has a result.

    A worker that crashes, loses its CUDA context or exceeds a time limit is killed
    with its whole session; the pair in progress gets the verdict and a fresh
    worker takes the rest.
    """
    outcome = WorkerOutcome()
    pending: list[tuple[int, str]] = [tuple(p) for p in job["pairs"]]
    attempts = 0
    started = time.perf_counter()
    # the trusted worker waits on a candidate with the candidate's own limits, so its own limit per workload
    # allows for one such wait and one restart of the candidate's process
    untrusted = any(sub["kind"] == "solution" for sub in job["subjects"])
    per_workload = opts.workload_timeout_s + (opts.startup_timeout_s + 60 if untrusted else 0)
    job = dict(job, workdir=job.get("workdir") or str(workdir))
    while pending and attempts <= len(job["pairs"]):
        attempts += 1
        job_path = workdir / f"job-{attempts}.json"
        job_path.write_text(json.dumps(dict(job, pairs=pending)))
        spawned = time.perf_counter()
        judge = judge_for(job["device"])
        try:
            offset = judge.submit(job_path)
        except OSError:  # it died after the health check: once more, with a fresh one
            retire_judge(job["device"])
            judge = judge_for(job["device"])
            offset = judge.submit(job_path)
        read_fd = judge.res_fd
        deadline = time.monotonic() + opts.startup_timeout_s * (2 if untrusted else 1) + (0 if judge.jobs > 1 else 60)
        ended = None  # "done" | "lost" | "timeout" | "crash"
        buf = b""
        eof = False
        while ended is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                ended = "timeout"
                break
            ready, _, _ = select.select([read_fd], [], [], min(remaining, 0.5))
            if ready:
                chunk = os.read(read_fd, 1 << 16)
                if chunk:
                    buf += chunk
                else:
                    eof = True
            elif not judge.alive():
                eof = True
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                try:
                    msg = json.loads(line.decode(errors="replace"))
                except json.JSONDecodeError:
                    continue
                kind = msg.get("type")
                if kind == "env":
                    outcome.environment = {k: v for k, v in msg.items() if k != "type"}
                elif kind == "ready":
                    deadline = time.monotonic() + per_workload
                    if outcome.ready_s is None:
                        outcome.ready_s = time.perf_counter() - spawned
                        outcome.candidate_ready_s = msg.get("candidate_ready_s")
                        outcome.sandbox = msg.get("sandbox")
                elif kind == "candidate":
                    outcome.candidate_log += str(msg.get("log") or "")[-20000:]
                    outcome.candidate_restarts += int(msg.get("restarts") or 0)
                elif kind == "workload":
                    key = (msg.get("subject"), msg.get("uuid"))
                    if key in pending:
                        outcome.results[key] = _checked(msg)
                        pending.remove(key)
                    deadline = time.monotonic() + per_workload
                elif kind == "fatal":
                    index = msg.get("subject")
                    outcome.fatal[index] = msg
                    for key in [k for k in pending if k[0] == index]:
                        outcome.results[key] = {"uuid": key[1], "verdict": msg.get("verdict", "compile_error"),
                                                "reasons": ["compile_error"], "message": msg.get("message")}
                        pending.remove(key)
                elif kind == "lost":
                    ended = "lost"
                elif kind == "done":
                    ended = "done"
            if eof and ended is None:
                ended = "crash"
        log_tail = judge.log_since(offset)
        outcome.log += log_tail
        if ended != "done":
            retire_judge(job["device"])  # a fresh trusted worker (and CUDA context) for whatever follows
        if ended in ("done", "lost") or not pending:
            continue
        key = pending.pop(0)
        if ended == "timeout":
            outcome.results[key] = {"uuid": key[1], "verdict": "timeout", "reasons": ["timeout"],
                                    "message": f"no result within {per_workload:.0f} s"}
        else:
            outcome.results[key] = {"uuid": key[1], "verdict": "runtime_error", "reasons": ["crash"],
                                    "message": f"the trusted worker ended during this workload; log tail: "
                                               f"{log_tail[-800:]}"}
    outcome.elapsed_s = time.perf_counter() - started
    return outcome


def stage_solution(solution: Solution, root: Path) -> Path:
    staged = root / "solution"
    staged.mkdir(parents=True, exist_ok=True)
    for src in solution.sources:
        p = staged / src.path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(src.content)
        p.chmod(0o444)
    return staged


def _median(samples: list[float] | None) -> float | None:
    s = summarize(samples or [])
    return s.median if s else None


def default_baselines(problem: Problem, device: str) -> tuple[str, ...]:
    kinds = ["eager"]
    if device != "cpu":
        kinds.append("compile")
    if problem.baseline_source:
        kinds.append("baseline_file")
    return tuple(kinds)


PROFILE_MODES = {True: "all", False: "off"}  # the older boolean form of EvalOptions.profile_dsl


def profile_mode(mode: str | bool) -> str:
    """EvalOptions.profile_dsl as the worker reads it: "one", "all" or "off" (ValueError for anything else)."""
    mode = PROFILE_MODES.get(mode, mode)
    if mode not in ("one", "all", "off"):
        raise ValueError(f"EvalOptions.profile_dsl must be one, all or off, not {mode!r}")
    return mode


BASELINE_LABEL = {"eager": "eager", "compile": "compile", "baseline_file": "baseline.py"}


def harness_digest() -> str:
    """Changes whenever the code that judges or times a baseline changes, so stale cached verdicts are not reused."""
    import hashlib

    here = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for name in ("worker.py", "correctness.py", "timing.py", "stats.py"):
        h.update((here / name).read_bytes())
    h.update((here.parent / "problems" / "inputs.py").read_bytes())
    return h.hexdigest()[:12]


def software_key(env: dict[str, Any]) -> str:
    return (f"torch={env.get('torch')};triton={env.get('triton')};cuda={env.get('cuda')};driver={env.get('driver')};"
            f"harness={harness_digest()}")


def measure_baselines(problem: Problem, uuids: list[str], opts: EvalOptions, env: dict[str, Any], seed: int,
                      workdir: Path, store=None) -> dict[str, dict[str, dict[str, Any]]]:
    """kind -> uuid -> {verdict, time_ms}; cached per device and software versions; one worker for all kinds."""
    kinds = [k for k in (opts.baselines if opts.baselines is not None else default_baselines(problem, opts.device))
             if k != "baseline_file" or problem.baseline_source]
    device_name = env.get("device_name") or opts.device
    soft = software_key(env) + (";hold" if opts.timing.hold else "")
    digest = problem.digest()
    out: dict[str, dict[str, dict[str, Any]]] = {k: {} for k in kinds}
    pairs = []
    for i, kind in enumerate(kinds):
        for uuid in uuids:
            cached = store.get_baseline(digest, uuid, device_name, soft, kind) if (store and opts.use_baseline_cache) else None
            if cached is not None:
                out[kind][uuid] = dict(cached, cached=True)
            else:
                pairs.append((i, uuid))
    if pairs:
        if opts.progress:
            opts.progress(f"{problem.name}: baselines ({', '.join(BASELINE_LABEL[k] for k in kinds)}) "
                          f"on {len({u for _, u in pairs})} workload(s)")
        job = _job(problem, [{"kind": k} for k in kinds], pairs, opts, seed)
        outcome = run_worker(job, opts, workdir)
        for i, uuid in pairs:
            r = outcome.results.get((i, uuid), {"verdict": "runtime_error"})
            t = _median(r.get("samples_ms"))
            out[kinds[i]][uuid] = {"verdict": r.get("verdict"), "time_ms": t, "message": r.get("message")}
            if store is not None:
                store.put_baseline(digest, uuid, device_name, soft, kinds[i], r.get("verdict", "runtime_error"), t,
                                   r.get("samples_ms") or [], r.get("message"))
    return out


def _job(problem: Problem, subjects: list[dict[str, Any]], pairs: list[tuple[int, str]], opts: EvalOptions,
         seed: int) -> dict[str, Any]:
    llc = int(opts.hardware.llc_bytes.value) if opts.hardware is not None else 64 << 20
    job = {
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
        "startup_timeout_s": opts.startup_timeout_s,
        "workload_timeout_s": opts.workload_timeout_s,
        # held-out workloads exist only for this run: the worker learns them from the job, not from disk
        "extra_workloads": [w.model_dump() for w in problem.workloads if w.uuid.startswith(HELDOUT_PREFIX)],
    }
    return job


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
    if opts.hardware is None:
        opts.hardware = detect(opts.device)
    seed = opts.seed if opts.seed is not None else secrets.randbits(63)
    if opts.heldout:
        from solbench.problems.heldout import draw_heldout

        extra = draw_heldout(problem, opts.heldout, seed ^ 0x5EED, opts.device)
        public = _select_workloads(problem, opts)
        problem = dataclasses.replace(problem, workloads=list(problem.workloads) + extra)
        opts = dataclasses.replace(opts, workloads=public + [w.uuid for w in extra])
    uuids = _select_workloads(problem, opts)
    findings = static_findings(problem, solution, language.name) if opts.static_checks else []
    if any(f.severity == "reject" for f in findings):
        return _rejected_statically(problem, solution, language.name, opts, uuids, findings, seed, started_wall, t0,
                                    store, run_id)
    workdir = Path(tempfile.mkdtemp(prefix="solbench-"))
    try:
        staged = stage_solution(solution, workdir)
        subject = {"kind": "solution", "staged": str(staged), "language": language.name,
                   "entry_file": solution.spec.entry_file, "function": solution.spec.entry_function,
                   "dps": solution.spec.destination_passing_style}
        private_tmp = workdir / "tmp"
        private_tmp.mkdir()
        # a Triton cache of this solution's own: a candidate can never plant a kernel another one loads
        cache = Path(os.environ.get("SOLBENCH_CACHE", Path.home() / ".cache" / "solbench")) / "triton" / solution.digest()
        cache.mkdir(parents=True, exist_ok=True)
        candidate_env = {"TMPDIR": str(private_tmp), "TRITON_CACHE_DIR": str(cache)}
        if opts.progress:
            opts.progress(f"{problem.name}: {solution.name} on {len(uuids)} workload(s)")
        cand_job = _job(problem, [subject], [(0, u) for u in uuids], opts, seed)
        cand_job["workdir"] = str(workdir)
        cand_job["sandbox"] = {"env": _child_env(candidate_env), "mode": opts.sandbox,
                               "max_file_bytes": opts.max_file_bytes,
                               "max_address_space_bytes": opts.max_address_space_bytes}
        # the SOL analysis (fake tensors, CPU only) runs in this process while the candidate's worker runs
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=1) as pool:
            analysis = pool.submit(analyse, problem, uuids)
            cand = run_worker(cand_job, opts, workdir)
            work = analysis.result()
        env = dict(cand.environment or {"device": opts.device})
        env["sandbox"] = cand.sandbox or ("namespaces" if (opts.sandbox == "auto" and namespaces_available())
                                          else "rlimits")
        env["worker_ready_s"] = cand.ready_s
        env["timing_hold"] = opts.timing.hold
        # what made this evaluation, so that evaluations are compared only with ones made alike
        env["harness"] = harness_digest()
        env["profile_dsl"] = profile_mode(opts.profile_dsl)
        env["candidate_ready_s"] = cand.candidate_ready_s
        if cand.candidate_restarts:
            env["candidate_restarts"] = cand.candidate_restarts
        base = measure_baselines(problem, uuids, opts, env, seed, workdir, store) if uuids else {}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    datasheet = opts.hardware.ceilings(scale_to_max_clock=True)
    results: list[WorkloadResult] = []
    for uuid in uuids:
        results.append(_judge(problem, uuid, cand.results.get((0, uuid)), base, work.get(uuid), datasheet,
                              opts.calibrated))
    verdicts = [r.verdict for r in results]
    ev = Evaluation(
        problem=problem.name, problem_dir=str(problem.directory), problem_digest=problem.digest(),
        solution=solution.name, solution_digest=solution.digest(), language=language.name, author=solution.author,
        hardware=opts.hardware.id, device=opts.device, device_name=env.get("device_name"),
        verdict=worst(verdicts) if results else "unsupported",
        reasons=sorted({r for w in results for r in w.reasons if w.verdict != "passed"}),
        warnings=sorted({x for w in results for x in w.warnings} | {f"static:{f.rule}" for f in findings}),
        findings=[f"{f.severity} static:{f.rule} {f.path}:{f.line}: {f.message}" for f in findings],
        message=cand.fatal.get(0, {}).get("message"),
        workloads=results, environment=env, seed=seed, started=started_wall,
        log=(cand.candidate_log + ("\n--- trusted worker ---\n" + cand.log if cand.log.strip() else ""))[-40000:],
    )
    scores = [r.sol_score for r in results]
    ev.sol_score = scoring.mean(scores)
    ev.mean_speedup_vs_eager = scoring.geomean([r.speedup_vs_eager for r in results])
    timed = [r for r in results if not r.interpreted and r.verdict != "unsupported"]
    if any(r.speedup_vs_baseline is not None for r in timed):
        correct = [r.verdict == "passed" for r in timed]
        for p in (0.0, 1.0, 1.5, 2.0):
            v = scoring.fast_p([r.speedup_vs_baseline for r in timed], correct, p)
            if v is not None:
                ev.fast_p[f"fast_{p:g}"] = v
    ev.elapsed_s = time.perf_counter() - t0
    if store is not None:
        store.add_evaluation(ev, solution.model_dump_json(), run_id)
    return ev


def static_findings(problem: Problem, solution: Solution, language: str) -> list:
    from solbench.evaluate.integrity.static import Policy, scan_sources

    pol = problem.definition.policy
    policy = Policy(allow=frozenset(pol.allow), forbid_calls=frozenset(pol.forbid_calls)) if pol else Policy()
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
        elapsed_s=time.perf_counter() - t0)
    if store is not None:
        store.add_evaluation(ev, solution.model_dump_json(), run_id)
    return ev


def _hack(res: WorkloadResult, code: str, message: str) -> None:
    """Make the verdict reward_hack with one more reason code; the first detection's message is kept."""
    if res.verdict != "reward_hack":
        res.verdict = "reward_hack"
        res.message = message
    if code not in res.reasons:
        res.reasons.append(code)


def _judge(problem: Problem, uuid: str, r: dict[str, Any] | None, base: dict[str, dict[str, dict[str, Any]]],
           work: Work | str | None, datasheet: Ceilings, calibrated: Ceilings | None) -> WorkloadResult:
    w = problem.workload(uuid)
    r = r or {"verdict": "runtime_error", "reasons": ["no_result"]}
    res = WorkloadResult(uuid=uuid, label=w.label, axes=problem.definition.resolve_axes(w.axes),
                         verdict=r.get("verdict", "runtime_error"), reasons=list(r.get("reasons") or []),
                         message=r.get("message"), interpreted=bool(r.get("interpreted")),
                         max_abs_err=r.get("max_abs_err"), max_rel_err=r.get("max_rel_err"),
                         failure=r.get("failure"), peak_memory_bytes=r.get("peak_memory_bytes"),
                         graph_ms=r.get("graph_ms"), timing_method=r.get("timing_method"),
                         clocks=r.get("clocks") or [], wall_ms=r.get("wall_ms") or [],
                         wall_event_ms=r.get("wall_event_ms") or [],
                         dsl_share=r.get("dsl_share"))
    if res.verdict == "passed" and not res.reasons:
        res.reasons = []
    samples = [x for x in (r.get("samples_ms") or []) if x is not None]
    if samples:
        s = summarize(samples)
        res.samples_ms = samples
        res.time_ms, res.iqr_ms, res.n_samples = s.median, s.iqr, s.n
        if s.median > 0 and s.iqr / s.median > 0.10:
            res.warnings.append("noisy_timing")
        # every timing defence adds its reason code, also to a verdict another defence already made reward_hack,
        # so a result names each pattern detected
        judged = res.verdict in ("passed", "reward_hack")
        if res.wall_ms and judged and r.get("timing_method") == "cuda_events":
            # synchronised wall time far above the event time of the same calls: work ran where the events did
            # not see it (0 of 164 honest suite measurements on the H200 came near this threshold). The samples
            # are taken with the stream held, so they leave out the host's launch time, which wall time keeps:
            # compare with the events of the wall-time calls themselves, which wait for the host as it does.
            pairs = list(zip(res.wall_ms, res.wall_event_ms)) or [(w, s.median) for w in res.wall_ms]
            # every call must show the unexplained time, so one slow host moment is not an accusation
            if all(w > 1.5 * e + 0.2 for w, e in pairs):
                wall, seen = min(pairs)
                _hack(res, "unaccounted_device_work",
                      f"event time {seen:.4f} ms but synchronised wall time {wall:.4f} ms: "
                      "work on another stream or thread")
        unjoined = summarize([x for x in (r.get("unjoined_ms") or []) if isinstance(x, (int, float))])
        if unjoined and judged and unjoined.median > 0.1 * s.median + 0.005:
            # the end event was recorded before work the call started on its own streams had finished
            _hack(res, "unaccounted_device_work",
                  f"work on other streams ran {unjoined.median:.4f} ms past the end of the timed call "
                  f"({s.median:.4f} ms): the call returned before its work was done")
        low_clock = [c for c in res.clocks if c.get("sm_clock_mhz") and c.get("max_sm_clock_mhz")
                     and c["sm_clock_mhz"] < 0.75 * c["max_sm_clock_mhz"]]
        if low_clock:
            res.warnings.append("low_sm_clock")
        if any(set(c.get("throttle_reasons") or ()) & SLOWDOWN_REASONS for c in res.clocks):
            # a power cap or heat slowed the clocks while this was timed (a 3.3 ms bf16 GEMM ran 12% slower on
            # an H200 at its power cap): the time is real but not repeatable on a cooler chip
            res.warnings.append("clocks_throttled")
    if res.interpreted:
        res.warnings.append("interpreted")
    if res.dsl_share is not None and res.dsl_share < 0.5:
        res.warnings.append("dsl_share_low")  # most device time went to kernels that are not the solution's own
    if r.get("profiled") and res.verdict == "passed" and res.dsl_share is None:
        # the profiled call ran but gave no device work: the profiler could not run (its error is in the
        # candidate's log), the call launched nothing, or it replaced the harness's session; the language proof
        # rests on the ghost replay alone
        res.warnings.append("language_proof_unavailable")
    # baselines
    for kind, field_name in (("eager", "eager_ms"), ("compile", "compile_ms"), ("baseline_file", "baseline_file_ms")):
        b = base.get(kind, {}).get(uuid)
        if b and b.get("verdict") == "passed" and b.get("time_ms"):
            setattr(res, field_name, b["time_ms"])
    options = [(k, getattr(res, f)) for k, f in (("eager", "eager_ms"), ("compile", "compile_ms"),
                                                   ("baseline_file", "baseline_file_ms")) if getattr(res, f)]
    if options:
        kind, t = min(options, key=lambda kv: kv[1])
        res.baseline_ms, res.baseline = t, BASELINE_LABEL[kind]
    for kind in ("eager", "compile", "baseline_file"):
        b = base.get(kind, {}).get(uuid)
        if b and b.get("verdict") not in (None, "passed", "unsupported"):
            name = "reference" if kind == "eager" else BASELINE_LABEL[kind].replace(".py", "_file")
            res.warnings.append(f"{name}_{b.get('verdict')}")
    # speed of light
    if isinstance(work, Work):
        sol = sol_time(work, datasheet)
        res.sol_ms, res.bound, res.flops, res.bytes = sol.sol_ms, sol.bound, work.flops, work.bytes
        if calibrated is not None:
            res.calibrated_sol_ms = sol_time(work, calibrated).sol_ms
    elif isinstance(work, str):
        res.warnings.append("no_sol_bound")
    # physics floor: under a true lower bound, a faster time means the measurement was fooled
    if res.verdict in ("passed", "reward_hack") and res.time_ms is not None and res.sol_ms and res.time_ms < res.sol_ms:
        _hack(res, "below_sol", f"{res.time_ms:.4g} ms is below the speed-of-light bound {res.sol_ms:.4g} ms")
    # scores
    correct = res.verdict == "passed"
    if res.verdict in INCORRECT:
        res.sol_score = 0.0
    elif correct and not res.interpreted:
        score = scoring.sol_score(res.time_ms, res.baseline_ms, res.sol_ms, True)
        res.sol_score = score.value
        res.warnings.extend(score.flags)
    if res.time_ms and res.eager_ms:
        res.speedup_vs_eager = res.eager_ms / res.time_ms
    if res.time_ms and res.baseline_ms:
        res.speedup_vs_baseline = res.baseline_ms / res.time_ms
    return res
