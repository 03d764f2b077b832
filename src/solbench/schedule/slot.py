"""A slot: the process that evaluates a scheduler's jobs on one device, its trusted worker kept warm between them.

``evaluate_spec`` turns a ``JobSpec`` into an evaluation: the problem (bundled, a directory of this host, or files
carried in the job, written once under the cache), the solution, the options the submitter may choose and those
the trusted side sets. The evaluation is returned, not stored: the scheduler stores it (one writer). A slot reads
and writes only the baselines' cache, in its own database connection (``Store``, WAL).

``main`` is a local slot's process (``LocalExecutor``): pinned to its GPU by CUDA_VISIBLE_DEVICES, it reads one
JSON line per job on a pipe and answers each with one line on another; stdout and stderr go to its log.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import traceback
from pathlib import Path
from typing import Any

from solbench.errors import UserError
from solbench.schedule.jobs import MAX_FILES, MAX_FILES_BYTES, JobSpec

#: how a job's error starts when solbench itself failed on it (its text stays in the slot's log)
INTERNAL = "solbench failed on the trusted side"
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


def problem_root() -> Path:
    """Where problems carried in jobs are written (by digest), apart from every candidate's view."""
    from solbench import caches

    return caches.root() / "problems"


def check_files(files: dict[str, str], what: str, plain: bool = True) -> None:
    """A UserError for carried files a job may not hold: too many, too large, or (``plain``) a name that is not a
    plain file name."""
    if len(files) > MAX_FILES:
        raise UserError(f"{what}: {len(files)} files, at most {MAX_FILES}")
    size = sum(len(k) + len(v.encode()) for k, v in files.items())
    if size > MAX_FILES_BYTES:
        raise UserError(f"{what}: {size} bytes, at most {MAX_FILES_BYTES}")
    bad = next((name for name in files if plain and not _NAME.match(name)), None)
    if bad is not None:
        raise UserError(f"{what}: file name {bad[:80]!r} is not a plain file name")


def materialize(files: dict[str, str]) -> Path:
    """The directory holding ``files`` (written once, by their digest)."""
    check_files(files, "problem")
    digest = hashlib.sha256(json.dumps(sorted(files.items())).encode()).hexdigest()[:24]
    folder = problem_root() / digest
    if not (folder / ".complete").exists():
        import tempfile

        problem_root().mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{digest}-", dir=problem_root()))  # one per writer, threads too
        for name, text in files.items():
            (staging / name).write_text(text)
        (staging / ".complete").write_text("")
        try:
            staging.rename(folder)
        except OSError:  # another slot wrote it first
            import shutil

            shutil.rmtree(staging, ignore_errors=True)
    return folder


def load_spec_problem(spec: JobSpec):
    from solbench.problems.problem import load_problem

    return load_problem(materialize(spec.problem_files) if spec.problem_files else spec.problem)


def load_spec_solution(spec: JobSpec, problem):
    from pydantic import ValidationError

    from solbench.problems.solution import Solution

    try:
        solution = Solution.model_validate(spec.solution)
    except ValidationError as exc:
        raise UserError(f"solution: {exc.errors()[0]['msg']}") from None
    check_files({f.path: f.content for f in solution.sources}, "solution", plain=False)
    return solution


def options_for(spec: JobSpec, device: str, store: Any):
    """The evaluation's options: the submitter's choices, and the trusted side's for the rest."""
    from solbench.evaluate.runner import EvalOptions
    from solbench.hardware.registry import detect

    o = spec.options
    hw = detect(device)
    calibrated = None
    if store is not None:
        from solbench.hardware.calibrate import Calibration

        data = store.latest_calibration(hw.id)
        try:
            calibrated = Calibration.model_validate(data).to_ceilings(hw) if data else None
        except Exception:
            calibrated = None
    from solbench.evaluate.timing.rounds import TimingConfig

    return EvalOptions(device=device, draws=o.draws, hardware=hw, calibrated=calibrated,
                       baselines=() if o.check_only else (tuple(o.baselines) if o.baselines is not None else None),
                       heldout=o.heldout, profile_dsl=o.profile_dsl, time_candidate=not o.check_only,
                       workloads=o.workloads, single_language=o.single_language, timing=TimingConfig(hold=o.hold),
                       use_baseline_cache=not o.fresh_baselines, seed=spec.seed)


def evaluate_spec(spec: JobSpec, device: str, store: Any = None):
    """(the evaluation, the solution's JSON) of one job; not stored."""
    from solbench.evaluate.runner import evaluate

    problem = load_spec_problem(spec)
    solution = load_spec_solution(spec, problem)
    ev = evaluate(problem, solution, options_for(spec, device, store), store=store, record=False)
    return ev, solution.model_dump_json()


def answer(spec_json: str, device: str, store: Any) -> dict[str, Any]:
    """The slot's answer to one job: its evaluation, or why it cannot be evaluated (``error``)."""
    try:
        ev, solution_json = evaluate_spec(JobSpec.model_validate_json(spec_json), device, store)
    except UserError as exc:
        return {"type": "error", "message": str(exc)}
    except Exception as exc:  # a fault of solbench's, not a verdict: its text goes to the log, not to the job
        traceback.print_exc()  # the slot's log (its stdout and stderr)
        return {"type": "error", "message": f"{INTERNAL}: {type(exc).__name__} (the slot's log has the traceback)"}
    return {"type": "result", "evaluation": ev.model_dump_json(), "solution": solution_json}


def main(argv: list[str]) -> None:
    """``python -m solbench.schedule.slot CMD_FD RESULT_FD DEVICE [DB]``."""
    cmd_fd, res_fd, device = int(argv[0]), int(argv[1]), argv[2]
    from solbench.evaluate.isolation import namespaces
    from solbench.evaluate.trusted import keeper

    namespaces.die_with_parent(namespaces.parent_from_env())  # the scheduler's end is this slot's

    keeper.end_with_signals()
    keeper.judge_for(device)  # the trusted worker starts now and stays warm between jobs
    store = None
    if len(argv) > 3 and argv[3]:
        from solbench.store.db import Store

        store = Store(argv[3])
    out = os.fdopen(res_fd, "w", buffering=1)

    def send(msg: dict[str, Any]) -> None:
        out.write(json.dumps(msg) + "\n")
        out.flush()

    send({"type": "ready", "pid": os.getpid()})
    with os.fdopen(cmd_fd) as commands:
        for line in commands:
            msg = json.loads(line)
            if msg.get("type") == "ping":
                send({"type": "pong"})
            elif msg.get("type") == "job":
                send(dict(answer(msg["spec"], device, store), job=msg["job"]))


if __name__ == "__main__":
    main(sys.argv[1:])
