"""The trusted worker's process, as the runner keeps it: started once per device, health-checked, replaced after a
crash, hang or lost CUDA context, and ended with the runner whatever ends the runner.

``run_worker`` sends one job and collects its results (one JSON line per finished workload), enforcing the
time limits; a worker that fails mid-job is replaced and the fresh one takes the remaining workloads.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from solbench import tempdirs
from solbench.evaluate.isolation.namespaces import PARENT_ENV
from solbench.evaluate.isolation.sandbox import end_process
from solbench.evaluate.trusted.profiling import WORKER_VAR
from solbench.evaluate.trusted.report import WorkloadReport
from solbench.evaluate.verdict import limits

PACKAGE_PARENT = str(Path(__file__).resolve().parents[3])
_KEEP_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "LD_LIBRARY_PATH",
             "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
             "NVSHMEM_DISABLE_NVLS", "SOLBENCH_ZYGOTE", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "VIRTUAL_ENV",
             "SOLBENCH_EXTRA_PATH", "SOLBENCH_CPU_THREADS", "SOLBENCH_LANG_ROOT")
#: the worker's entry, run with ``python -I`` (no environment variables, no user site, no script directory on
#: the path): the module path comes from the runner's own
_BOOT = ("import sys; sys.path[:0] = [p for p in sys.argv.pop(1).split(chr(10)) if p]; "
         "from solbench.evaluate.trusted.worker import cli; cli()")


def module_paths() -> list[str]:
    paths = [PACKAGE_PARENT]
    extra = os.environ.get("SOLBENCH_EXTRA_PATH")
    if extra:
        paths += [p for p in extra.split(os.pathsep) if p]
    return paths


def gpu_index(device: str) -> int | None:
    """N for a device named ``cuda:N``, else None (``cpu``, ``cuda``, or not a device's name)."""
    return int(device[5:]) if device.startswith("cuda:") and device[5:].isdigit() else None


def pinned(device: str) -> tuple[str, dict[str, str]]:
    """``device`` as its trusted worker sees it, and what the worker's environment needs for that: ``cuda:N`` is
    ``cuda`` in a worker that sees that GPU alone (CUDA_VISIBLE_DEVICES its entry), as a scheduler's slots are
    pinned, so that everything the worker and its candidates do on the current device (synchronisations, streams,
    events, Triton's launches) is done on the evaluation's GPU, not on the first one."""
    index = gpu_index(device)
    if index is None:
        return device, {}
    from solbench.hardware.telemetry import visible_entry

    entry = visible_entry(index)
    return "cuda", {"CUDA_VISIBLE_DEVICES": entry if entry is not None else str(index)}


def _worker_env(device: str) -> dict[str, str]:
    """What the worker's environment holds besides the scrubbed one: its device (``pinned``), and where a profiling
    run (``SOLBENCH_WORKER_PROFILE``, benchmarks only) wants its jobs' profiles; a candidate gets neither."""
    inner, pin = pinned(device)
    env = {"SOLBENCH_WORKER_DEVICE": inner, PARENT_ENV: str(os.getpid()), **pin}
    if os.environ.get(WORKER_VAR):
        env[WORKER_VAR] = os.environ[WORKER_VAR]
    return env


def child_env(extra: dict[str, str] | None = None, bytecode: bool = False) -> dict[str, str]:
    """The scrubbed environment of the worker and of candidates. ``bytecode``: the process may cache the modules it
    compiles (the trusted worker, whose imports of torch's compiler and of solbench then cost their compilation
    once per installation, not once per process); a candidate writes nothing outside its private directory."""
    env = {k: v for k, v in os.environ.items() if k in _KEEP_ENV}
    env["PYTHONPATH"] = os.pathsep.join(module_paths())
    env["PYTHONUNBUFFERED"] = "1"
    if not bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.setdefault("SOLBENCH_CPU_THREADS", "1")
    # OpenMP's workers sleep when a parallel region ends, where by default they spin for milliseconds: a candidate's
    # CPU time read from outside (the CPU audit) is then its work, not its pool's wait (a 0.2 ms softmax on two
    # threads read 5.9 ms, `thread_injection` for an honest solution), and no process burns a core another needs
    env["OMP_WAIT_POLICY"] = "PASSIVE"
    # BLAS thread pools made in the worker do not survive the fork into a zygote's child, and a sealed candidate
    # (``seccomp``) cannot make new ones: OpenBLAS then spins for ever on workers that do not exist
    for var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(var, "1")
    if extra:
        env.update(extra)
    return env


@dataclass
class WorkerOutcome:
    environment: dict[str, Any] = field(default_factory=dict)
    #: (subject index, workload uuid) -> the worker's report
    results: dict[tuple[int, str], WorkloadReport] = field(default_factory=dict)
    fatal: dict[int, dict[str, Any]] = field(default_factory=dict)  # subject index -> compile error
    log: str = ""
    elapsed_s: float = 0.0
    ready_s: float | None = None  # trusted worker's start to "ready" (its candidate loaded), first worker
    candidate_ready_s: float | None = None  # the candidate's process: start to solution imported
    sandbox: str | None = None  # the isolation the candidate's process got: "namespaces" or "rlimits"
    filtered: bool | None = None  # whether its system-call filter was in place (read from outside)
    candidate_log: str = ""
    candidate_restarts: int = 0
    phases: dict[str, float] = field(default_factory=dict)  # the worker's own before its first workload
    #: the device memory the worker was left holding at the job's end, never handed back by candidates
    #: (``worker._held``), what of it this job's added, and whether the worker retired for it after the job (the
    #: next job gets a fresh one)
    held_bytes: int = 0
    added_bytes: int = 0
    retired: bool = False


def _checked(msg: dict[str, Any]) -> WorkloadReport:
    """A workload message as a report; one that does not validate is a forged one."""
    try:
        return WorkloadReport.model_validate(msg)
    except ValidationError as exc:
        return WorkloadReport.failed(str(msg.get("uuid")), "reward_hack", ["result_forgery"],
                                     f"malformed result message from the worker: {exc.errors()[0]['msg']}")


#: every trusted worker's directory (its log, its job files) is ``<temporary directory>/solbench-judge-XXXXXXXX``
JUDGE_PREFIX = "solbench-judge-"


class Judge:
    """The persistent trusted worker of one device."""

    def __init__(self, device: str, env: dict[str, str] | None = None):
        self.device = device
        tempdirs.sweep(JUDGE_PREFIX)  # the directories of workers whose runner was killed
        self._owner = tempdirs.private_dir(JUDGE_PREFIX)
        self.dir = self._owner.path
        self.log_path = self.dir / "worker.log"
        cmd_r, cmd_w = os.pipe()
        res_r, res_w = os.pipe()
        argv = [sys.executable, "-I", "-c", _BOOT, "\n".join(module_paths()), "--serve", str(cmd_r), str(res_w)]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, pass_fds=(cmd_r, res_w),
                cwd=str(self.dir), env=child_env({**_worker_env(device), **(env or {})}, bytecode=True),
                start_new_session=True)  # killed when the runner ends: it calls die_with_parent itself
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

    def kill(self) -> None:
        """Kill its session now (``stop`` then waits for it)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def stop(self, grace_s: float = 5.0) -> None:
        """Close its pipes, give it ``grace_s`` to exit, then kill its session (0: a worker that hangs, failed, or
        is ended by a signal the user sent: the grace would only delay the end)."""
        end_process(self.proc, grace_s, self.cmd.close, lambda: os.close(self.res_fd))
        self._owner.close()


#: the persistent workers by key: a device's own (its name), or another of the same device beside it (a key of
#: the caller's, ``run_worker``'s ``key``: the compiles ahead of a run, ``compile_ahead``)
_JUDGES: dict[str, Judge] = {}
#: re-entrant: the signal handler (``end_with_signals``) retires every worker in the main thread, which may hold it
_JUDGES_LOCK = threading.RLock()


def judge_for(device: str, key: str | None = None, env: dict[str, str] | None = None) -> Judge:
    key = key or device
    with _JUDGES_LOCK:
        judge = _JUDGES.get(key)
        if judge is not None and judge.alive():
            return judge
        _JUDGES.pop(key, None)
    if judge is not None:
        judge.stop()
    judge = Judge(device, env)
    with _JUDGES_LOCK:
        _JUDGES[key] = judge
    return judge


def retire_judge(key: str, grace_s: float = 5.0) -> None:
    with _JUDGES_LOCK:
        judge = _JUDGES.pop(key, None)
    if judge is not None:
        judge.stop(grace_s)


def worker_pids() -> list[int]:
    """The process ids of the workers kept now (``native.pool.pin_processes``)."""
    with _JUDGES_LOCK:
        return [j.proc.pid for j in _JUDGES.values() if j.alive()]


def retire_all(grace_s: float = 5.0) -> None:
    """Retire every kept worker; with no grace (the user asked for the end), every worker's session is killed
    before any is waited for, so that their CUDA contexts are torn down side by side, not one after another (a
    run's compiles ahead keep a worker per core)."""
    with _JUDGES_LOCK:
        judges = list(_JUDGES.values())
        _JUDGES.clear()
    if grace_s <= 0:
        for judge in judges:
            judge.kill()
    for judge in judges:
        judge.stop(grace_s)


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP taken as Ctrl-C is (``end_with_signals``): the command says what it had done and the
    process ends with the signal's status, 128 + its number."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def exit_status(stop: BaseException) -> int:
    """The status a process stopped by ``stop`` (a ``KeyboardInterrupt``, or ``Stopped``) ends with: 130 for
    Ctrl-C, 143 for SIGTERM, 129 for SIGHUP."""
    return 128 + int(getattr(stop, "signum", signal.SIGINT))


def interrupted(stop: BaseException) -> str:
    """How a command stopped by ``stop`` says so: "interrupted", or "interrupted (SIGTERM)"."""
    return "interrupted" + (f" ({stop})" if isinstance(stop, Stopped) else "")


def end_with_signals(gently: tuple[int, ...] = (signal.SIGINT,)) -> None:
    """On SIGTERM, SIGHUP or SIGINT, retire every trusted worker (their candidates die with them), then end: a
    signal in ``gently`` as Python's KeyboardInterrupt (SIGINT) or ``Stopped`` (the others), so that a command
    can still say what it had done (``run`` marks its run interrupted and shows its evaluations so far), and a
    second of it ends the process at once; any other as the signal would have. A SIGKILL cannot be caught: then
    each worker's parent-death signal ends it."""

    def handler(signum, frame):
        retire_all(grace_s=0)  # the user asked for the end: a worker in a candidate's call would spend the grace
        if signum in gently:
            signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)
            raise KeyboardInterrupt if signum == signal.SIGINT else Stopped(signum)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, handler)


def run_worker(job: dict[str, Any], startup_timeout_s: float, workload_timeout_s: float | None,
               workdir: Path, key: str | None = None, env: dict[str, str] | None = None) -> WorkerOutcome:
    """Run ``job`` on the device's trusted worker until every (subject, workload) pair has a result. ``key``: a
    worker of the caller's beside the device's own (started with ``env`` added to its environment).

    A worker that crashes, loses its CUDA context or exceeds a time limit is killed with its whole session; the
    pair in progress gets the verdict and a fresh worker takes the rest.
    """
    worker = key or job["device"]
    outcome = WorkerOutcome()
    pending: list[tuple[int, str]] = [tuple(p) for p in job["pairs"]]
    attempts = 0
    started = time.perf_counter()
    # the trusted worker waits on a candidate with the candidate's own limits, so its own limit per workload
    # allows for one such wait and one restart of the candidate's process
    untrusted = any(sub["kind"] == "solution" for sub in job["subjects"])
    per_workload = (workload_timeout_s if workload_timeout_s is not None else limits.OUTER_CEILING_S) + \
        (startup_timeout_s + 60 if untrusted else 0)
    job = dict(job, workdir=job.get("workdir") or str(workdir))
    while pending and attempts <= len(job["pairs"]):
        attempts += 1
        job_path = workdir / f"job-{attempts}.json"
        job_path.write_text(json.dumps(dict(job, pairs=pending, device=pinned(job["device"])[0])))
        spawned = time.perf_counter()
        judge = judge_for(job["device"], worker, env)
        try:
            offset = judge.submit(job_path)
        except OSError:  # it died after the health check: once more, with a fresh one
            retire_judge(worker)
            judge = judge_for(job["device"], worker, env)
            offset = judge.submit(job_path)
        deadline = time.monotonic() + startup_timeout_s * (2 if untrusted else 1) + (0 if judge.jobs > 1 else 60)
        ended, deadline = _collect(judge, outcome, pending, deadline, per_workload, spawned)
        log_tail = judge.log_since(offset)
        outcome.log += log_tail
        killed = ended == "crash" and _exit_status(judge) == -signal.SIGKILL  # none sent here: the OOM killer
        if ended != "done":  # a fresh trusted worker (and CUDA context) for whatever follows
            retire_judge(worker, grace_s=0)
        elif outcome.retired:  # it ends by itself, its memory with it, and the next job starts a fresh one
            retire_judge(worker)
        if ended in ("done", "lost") or not pending:
            continue
        key = pending.pop(0)
        if ended == "timeout":
            outcome.results[key] = WorkloadReport.failed(key[1], "timeout", ["timeout"],
                                                         f"no result within {per_workload:.0f} s")
        elif killed:
            outcome.results[key] = WorkloadReport.failed(
                key[1], "runtime_error", ["out_of_memory", "trusted_worker_killed"],
                f"the trusted worker was killed (SIGKILL) during this workload, most likely for memory"
                f"{_footprint_of(job, key[1])}")
        else:
            outcome.results[key] = WorkloadReport.failed(
                key[1], "runtime_error", ["crash"],
                f"the trusted worker ended during this workload; log tail: {log_tail[-800:]}")
    outcome.elapsed_s = time.perf_counter() - started
    if outcome.environment.get("device") == pinned(job["device"])[0]:
        outcome.environment["device"] = job["device"]  # the run's name for it, not the pinned worker's
    return outcome


def _exit_status(judge: Judge) -> int | None:
    try:
        return judge.proc.wait(timeout=2)
    except subprocess.TimeoutExpired:
        return None


def _footprint_of(job: dict[str, Any], uuid: str) -> str:
    """The workload's memory estimate, as a clause for a message ("" where it cannot be had)."""
    try:
        from solbench.evaluate.trusted.footprint import available_bytes, footprint
        from solbench.problems.problem import load_problem

        fp = footprint(load_problem(job["problem_dir"]), uuid)
        free = available_bytes(job["device"])
        return f": judging it needs {fp.describe()}" + (f", {free / 1e9:.2f} GB free now" if free else "")
    except Exception:
        return ""


def _collect(judge: Judge, outcome: WorkerOutcome, pending: list, deadline: float, per_workload: float,
             spawned: float) -> tuple[str, float]:
    """Read the worker's messages until the job ends: "done", "lost", "timeout" or "crash"."""
    buf = b""
    eof = False
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "timeout", deadline
        ready, _, _ = select.select([judge.res_fd], [], [], min(remaining, 0.5))
        if ready:
            chunk = os.read(judge.res_fd, 1 << 16)
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
                    outcome.filtered = msg.get("seccomp")
                    outcome.phases = {k: v for k, v in (msg.get("phases") or {}).items()
                                      if isinstance(v, (int, float))}
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
                    outcome.results[key] = _checked({"uuid": key[1], "verdict": msg.get("verdict", "compile_error"),
                                                      "reasons": ["compile_error"], "message": msg.get("message")})
                    pending.remove(key)
            elif kind in ("lost", "done"):
                if kind == "done":
                    outcome.held_bytes = int(msg.get("held_bytes") or 0)
                    outcome.added_bytes = int(msg.get("added_bytes") or 0)
                    outcome.retired = bool(msg.get("retire"))
                return kind, deadline
        if eof:
            return "crash", deadline
