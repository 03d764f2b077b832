"""The command line: parse, call the library, render. No measurement logic lives here.

No traceback reaches a user: every command runs under solbench.guard (one line and exit 2 for any failure;
``SOLBENCH_TRACEBACK=1`` prints the traceback as well). A solution that fails is a verdict, not an error (exit 0).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback
from pathlib import Path
from typing import List, Optional

import typer

from solbench.cli_options import (DbOption, HoldOption, ProfileOption, WideOption, err, out, prestart_worker,
                                  print_evaluations, profile_mode, resolve_device, stored_calibration)
from solbench.errors import UserError
from solbench.guard import GuardedTyper as _Typer
from solbench.guard import NoArgsIsHelpError, UsageError
from solbench.guard import failure_line
from solbench.guard import one_line as _one_line
from solbench.guard import where as _where

app = _Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
             help="solbench: GPU kernels against the hardware's speed of light.\n\n"
                  "Start with `solbench list`, `solbench show rmsnorm`, `solbench eval --problem rmsnorm --solution "
                  "k.py` and `solbench run`; `solbench COMMAND --help` for each.")


def _version(value: bool) -> None:
    if value:
        from solbench import version

        print(f"solbench {version()}")
        raise typer.Exit()


@app.callback()
def _main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="print solbench's version and exit")) -> None:
    """solbench: GPU kernels against the hardware's speed of light."""


def _progress_printer(enabled: bool):
    if not enabled:
        return None
    return lambda msg: err.print(f"[dim]{msg}[/dim]")


@app.command("list")
def list_cmd(
    as_json: bool = typer.Option(False, "--json", help="print a JSON list"),
    family: Optional[str] = typer.Option(None, help="only this family"),
    suite: str = typer.Option("starter", help="suite: starter, full, a family name, or a tag such as source:aten"),
    source: Optional[str] = typer.Option(None, help="only this source: aten, serving, blas"),
    model: Optional[str] = typer.Option(None, help="only problems whose sizes come from this model"),
    precision: Optional[str] = typer.Option(None, help="only this precision: bf16, fp16, fp32, fp8"),
    tag: Optional[List[str]] = typer.Option(None, help="only problems with this tag (repeatable)"),
) -> None:
    """List bundled problems."""
    from solbench.problems.suite import select_problems

    tags = list(tag or [])
    tags += [f"{k}:{v}" for k, v in (("source", source), ("model", model), ("precision", precision)) if v]
    problems = select_problems(suite=suite, family=family, tags=tags)
    rows = [{"name": p.name, "family": p.family, "tags": p.definition.tags, "workloads": len(p.workloads),
             "path": str(p.directory), "description": p.definition.description} for p in problems]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    from solbench.report.table import problems_table

    out.print(problems_table(rows, out.width))


@app.command()
def show(
    problem: str = typer.Argument(..., help="bundled problem name or path to a problem directory"),
    hardware: Optional[str] = typer.Option(None, help="hardware id (see `solbench hardware`); default: this machine"),
    as_json: bool = typer.Option(False, "--json"),
    language: Optional[str] = typer.Option(None, "--language", help="print this language's starter files for the "
                                           "problem instead (triton, pytorch, cuda_cpp, cute_dsl, tilelang, "
                                           "tvm_tirx)"),
    db: Path = DbOption,
) -> None:
    """Show a problem: what it computes (description, signature, the reference's run) and its workloads' work
    counts and speed-of-light times on a chip; or a language's starter files for it.

    Examples: `solbench show rmsnorm`, `solbench show rmsnorm --hardware h200`, `solbench show rmsnorm --language
    triton`."""
    from solbench.analysis.report import analyse_problem
    from solbench.hardware.registry import detect, get_hardware
    from solbench.problems.problem import load_problem

    prob = load_problem(problem)
    if language:
        from solbench.agents.starters import starter_files

        files = starter_files(language, prob)
        if as_json:
            print(json.dumps(files, indent=2))
            return
        for path, text in files.items():
            sys.stdout.write(f"# ---- {path}\n{text.rstrip()}\n")
        return
    hw = get_hardware(hardware) if hardware else detect(resolve_device("auto"))
    calibrated = stored_calibration(db, hw) if db.exists() else None
    report = analyse_problem(prob, hw, calibrated)
    if as_json:
        print(json.dumps(report, indent=2))
        return
    from solbench.report.problem_view import problem_lines

    where = "--hardware" if hardware else "this machine"
    for line in problem_lines(prob, report, out.width, where):
        out.print(line, overflow="fold")


@app.command()
def check(
    problem: Optional[List[str]] = typer.Argument(None, help="problem names or directories (default: the suite)"),
    suite: str = typer.Option("full", help="suite to check when no problem is named"),
    device: str = typer.Option("cpu", help="cpu or cuda: which workloads to check"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """The degenerate-task filter: no problem may be passable by zeros, a constant, an input or ignoring an input."""
    from solbench.evaluate.degenerate import Finding, check_problem
    from solbench.problems.problem import load_problem
    from solbench.problems.suite import select_problems

    dev = resolve_device(device)
    problems = [load_problem(p) for p in problem] if problem else select_problems(suite=suite)
    findings = []
    for p in problems:
        try:
            findings += check_problem(p, "cpu" if dev == "cpu" else dev)
        except Exception as exc:  # the problem's own reference fails: a finding about it, and on to the next
            detail = _one_line(exc) if isinstance(exc, UserError) else \
                f"the reference fails: {type(exc).__name__}: {_one_line(exc, 300)} (at {_where(exc)})"
            findings.append(Finding(p.name, "*", "reference_error", detail))
    if as_json:
        print(json.dumps([f.__dict__ for f in findings], indent=2))
    else:
        for f in findings:
            out.print(f"{f.problem} / {f.workload}: {f.code}: {f.detail}", markup=False, soft_wrap=True)
        out.print(f"{len(problems)} problems checked, {len(findings)} findings")
    if findings:
        raise typer.Exit(1)


@app.command("hardware")
def hardware_cmd(as_json: bool = typer.Option(False, "--json")) -> None:
    """List the hardware registry (datasheet ceilings)."""
    from solbench.hardware.registry import list_hardware

    specs = list_hardware()
    rows = []
    for s in specs:
        c = s.ceilings()
        rows.append({"id": s.id, "name": s.name, "dram_tbps": c.dram_bytes_per_s / 1e12,
                     "bf16_tflops": c.rates.get("tensor_bf16", 0) / 1e12, "fp8_tflops": c.rates.get("tensor_fp8", 0) / 1e12,
                     "fp32_tflops": c.rates.get("vector_fp32", 0) / 1e12, "llc_mb": s.llc_bytes.value / 2**20,
                     "clock_scale": c.clock_scale})
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    from solbench.report.table import hardware_table

    out.print(hardware_table(rows))


@app.command()
def calibrate(
    device: str = typer.Option("auto", help="auto, cpu or cuda"),
    quick: bool = typer.Option(False, help="small sizes, a few seconds"),
    db: Path = DbOption,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Measure this device's achievable ceilings and store them."""
    from solbench.hardware.calibrate import calibrate as run_calibration
    from solbench.store.db import Store

    dev = resolve_device(device)
    cal = run_calibration(dev, quick=quick)
    store = Store(db)
    data = json.loads(cal.model_dump_json())
    store.add_calibration(cal.hardware, getattr(cal, "device_name", None), data)
    if as_json:
        print(json.dumps(data, indent=2))
        return
    from solbench.report.table import calibration_table

    out.print(calibration_table(data))


@app.command("eval")
def eval_cmd(
    problem: Optional[str] = typer.Option(None, "--problem", help="bundled problem name or problem directory"),
    solution: Optional[Path] = typer.Option(None, "--solution", help="Solution JSON or a .py file with run(*inputs)"),
    device: str = typer.Option("auto", help="auto, cpu or cuda"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    db: Path = DbOption,
    workload: Optional[List[str]] = typer.Option(None, help="only these workload uuids (repeatable)"),
    hardware: Optional[str] = typer.Option(None, help="score against this hardware id instead of the detected one"),
    draws: int = typer.Option(5, min=1, help="correctness draws per workload"),
    replay: Optional[int] = typer.Option(None, help="re-run a stored evaluation's first failure with its seed"),
    no_cache: bool = typer.Option(False, "--no-cache", help="re-measure baselines"),
    heldout: int = typer.Option(0, min=0, help="also draw this many held-out shapes from the axis ranges"),
    profile_dsl: str = ProfileOption,
    hold: bool = HoldOption,
    single_language: bool = typer.Option(False, "--single-language", help="the solution's own language alone may "
                                         "do the work: another language's or a library's kernels are reward hacks"),
    quiet: bool = typer.Option(False, help="no progress lines"),
    wide: bool = WideOption,
) -> None:
    """Evaluate one solution on one problem: correctness, timing, baselines, SOL score.

    Examples: `solbench eval --problem rmsnorm --solution my_kernel.py`, `solbench eval --problem rmsnorm
    --solution sol.json --device cuda --json`, `solbench eval --replay 12`."""
    from solbench.problems.problem import load_problem
    from solbench.problems.solution import Solution, load_solution

    if replay is None:  # a mistake in the problem or the solution is said before any worker starts
        if problem is None or solution is None:
            raise UserError("eval needs --problem and --solution (or --replay ID)")
        prob = load_problem(problem)
        sol = load_solution(solution, prob.definition)
    mode = profile_mode(profile_dsl)
    from solbench.store.db import Store

    store = Store(db)  # a database it cannot open is said before a worker starts too
    prestart_worker(device, sol.language if replay is None else None)
    from solbench.evaluate.runner import EvalOptions, evaluate
    from solbench.evaluate.timing.rounds import TimingConfig
    from solbench.hardware.registry import get_hardware

    if replay is not None:
        ev, solution_json = store.evaluation(replay)
        failing = [w for w in ev.workloads if w.failure or w.verdict != "passed"]
        if not failing:
            raise UserError(f"evaluation {replay} has no failing workload to replay")
        prob = load_problem(ev.problem_dir)
        sol = Solution.model_validate_json(solution_json)
        from solbench.analysis.heldout import HELDOUT_PREFIX

        # held-out shapes are redrawn from the stored seed (the draw is deterministic given seed and count)
        n_heldout = sum(1 for w in ev.workloads if w.uuid.startswith(HELDOUT_PREFIX))
        opts = EvalOptions(device=resolve_device(device if device != "auto" else ev.device), seed=ev.seed, draws=draws,
                           workloads=[failing[0].uuid] if not failing[0].uuid.startswith(HELDOUT_PREFIX) else None,
                           baselines=(), time_candidate=False, heldout=n_heldout,
                           progress=_progress_printer(not quiet and not as_json))
    else:
        opts = EvalOptions(device=resolve_device(device), draws=draws, workloads=list(workload) if workload else None,
                           use_baseline_cache=not no_cache, heldout=heldout, profile_dsl=mode,
                           timing=TimingConfig(hold=hold), progress=_progress_printer(not quiet and not as_json),
                           single_language=single_language)
    if hardware:
        opts.hardware = get_hardware(hardware)
    ev = evaluate(prob, sol, opts, store=store if replay is None else None)
    if replay is not None:
        original = failing[0]
        again = next((w for w in ev.workloads if w.uuid == original.uuid), ev.workloads[0])
        reproduced = again.verdict == original.verdict
        if as_json:
            print(json.dumps({"replayed": replay, "reproduced": reproduced, **ev.public()}, indent=2, default=str))
        else:
            out.print(f"replay of evaluation {replay}, workload {again.uuid}: {again.verdict}"
                      f" (stored: {original.verdict}; {'reproduced' if reproduced else 'NOT reproduced'})")
            if again.message:
                out.print(again.message)
        return
    if as_json:
        print(json.dumps(ev.public(), indent=2, default=str))
        return
    print_evaluations([ev], wide)
    out.print(f"evaluation id {ev.id} in {db}; verdict {ev.verdict}"
              + (f"; SOL score {ev.sol_score:.3f}" if ev.sol_score is not None else ""))


def _groups() -> None:
    """The commands of their own modules: importers and export, agents and experiments, compare."""
    from solbench.cli_agents import agent_app, experiment_app
    from solbench.cli_compare import compare
    from solbench.cli_data import export, import_app
    from solbench.cli_run import run
    from solbench.cli_report import report
    from solbench.cli_results import runs, show_run
    from solbench.cli_serve import serve, token_app

    app.add_typer(import_app, name="import")
    app.command("export")(export)
    app.add_typer(agent_app, name="agent")
    app.add_typer(experiment_app, name="experiment")
    app.command("compare")(compare)
    app.command("run")(run)
    app.command("report")(report)
    app.command("runs")(runs)
    app.command("show-run")(show_run)
    app.command("serve")(serve)
    app.add_typer(token_app, name="token")


_groups()


def _stacks_later() -> None:
    """``SOLBENCH_STACKS_AFTER=S``: every thread's stack to stderr once the command has run S seconds (a
    diagnosis of a run that a time limit will stop: the log then says where it was)."""
    import faulthandler

    try:
        after = float(os.environ.get("SOLBENCH_STACKS_AFTER") or 0)
    except ValueError:
        return
    if after > 0:
        faulthandler.dump_traceback_later(after)


def _exit_now(code: int) -> None:
    """End the process once its command is done: the exit handlers run (the trusted workers are ended, logs are
    flushed), the interpreter's teardown of every module does not (with torch loaded, about 0.6 s of a cold
    `eval` on the CPU machine, for a process that ends anyway). Where a thread of the command still runs, the
    usual exit, which waits for it."""
    import atexit
    import threading

    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said there
            pass
    os._exit(code)


def main() -> None:
    _stacks_later()
    try:
        from solbench.evaluate.trusted.keeper import end_with_signals

        # trusted workers and their candidates end with this process, whatever ends it; a batch system's SIGTERM
        # (or a closed terminal's SIGHUP) is taken as Ctrl-C is: the command says what it had done
        end_with_signals(gently=(signal.SIGINT, signal.SIGTERM, signal.SIGHUP))
        code = app(standalone_mode=False)
        _exit_now(code if isinstance(code, int) else 0)
    except typer.Exit as done:  # --help, --version, a command's exit status
        sys.exit(getattr(done, "exit_code", 0))
    except NoArgsIsHelpError as exc:  # `solbench` alone: its help
        print(exc.format_message())
        sys.exit(0)
    except UsageError as exc:  # a mistake on the command line: one line, and where help is
        where = exc.ctx.command_path if exc.ctx is not None else "solbench"
        if where == "solbench" and len(sys.argv) > 1 and sys.argv[1] in typer.main.get_command(app).commands:
            where += " " + sys.argv[1]  # the command whose options were at fault
        sys.stderr.write(f"error: {exc.format_message()} (`{where} --help` lists the options)\n")
        sys.exit(2)
    except (KeyboardInterrupt, typer.Abort) as stop:  # Ctrl-C, or SIGTERM or SIGHUP (``Stopped``)
        from solbench.evaluate.trusted.keeper import exit_status, interrupted

        err.print(interrupted(stop))
        sys.exit(exit_status(stop))
    except Exception as exc:  # outside any command (parsing, start-up): still one line
        if os.environ.get("SOLBENCH_TRACEBACK") == "1":
            traceback.print_exc()
        sys.stderr.write(failure_line(exc, " ".join(sys.argv[1:2]) or "start-up") + "\n")
        sys.exit(2)


if __name__ == "__main__":
    main()
