"""No traceback reaches a user: the guard every command of the command line runs under.

A mistake the user can make (``UserError``, a path that cannot be read or written, a results database that is
not one) is one line and exit 2; anything else is solbench's own failure, also one line (the exception and
where it was raised) and exit 2. ``SOLBENCH_TRACEBACK=1`` prints the traceback as well.
"""

from __future__ import annotations

import functools
import os
import sys
import traceback
from pathlib import Path
from typing import Optional

import typer

from solbench.errors import UserError

try:  # typer 0.29 and later carry click within
    from typer._click.exceptions import NoArgsIsHelpError, UsageError
except ImportError:  # pragma: no cover - typer on click
    from click.exceptions import NoArgsIsHelpError, UsageError


def one_line(text: str, limit: int = 600) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def where(exc: BaseException) -> str:
    """Where the exception was raised, outside installed packages (torch's internals): ``file:line in fn``."""
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if "site-packages" not in f.filename and "dist-packages" not in f.filename]
    if not (own or frames):
        return "?"
    f = (own or frames)[-1]
    parts = Path(f.filename).parts
    short = "/".join(parts[parts.index("solbench"):]) if "solbench" in parts else f.filename
    return f"{short}:{f.lineno} in {f.name}"


def failure_line(exc: BaseException, command: str) -> str:
    """The one line a failure of ``command`` prints."""
    import sqlite3

    if isinstance(exc, UserError):
        return f"error: {one_line(exc)}"
    if isinstance(exc, OSError) and getattr(exc, "filename", None):
        return f"error: {exc.filename}: {exc.strerror or one_line(exc)}"
    if isinstance(exc, sqlite3.DatabaseError):
        return f"error: the results database: {one_line(exc)} (is --db a solbench database?)"
    return (f"error: solbench {command} failed: {type(exc).__name__}: {one_line(exc, 400)} "
            f"(at {where(exc)}; SOLBENCH_TRACEBACK=1 prints the traceback)")


def _quiet_tracing() -> None:
    """Tracing a reference on fake tensors may fail (a Triton kernel, data-dependent code); the analysis reports
    that as ``no_sol_bound``, so torch's own log of the attempt (a traceback) is not shown."""
    import logging
    import warnings

    logger = logging.getLogger("torch._subclasses.fake_tensor")
    if not any(getattr(f, "_solbench", False) for f in logger.filters):  # a filter: torch's import resets levels
        def drop(record) -> bool:
            return False
        drop._solbench = True
        logger.addFilter(drop)
    warnings.filterwarnings("ignore", message="Accessing the data pointer of FakeTensor")


def guard(fn, command: str):
    @functools.wraps(fn)
    def guarded(*args, **kwargs):
        _quiet_tracing()
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except KeyboardInterrupt as stop:  # Ctrl-C, or SIGTERM or SIGHUP taken as it: typer would end with 130, mute
            from solbench.evaluate.trusted.keeper import exit_status, interrupted

            sys.stderr.write(interrupted(stop) + "\n")
            raise typer.Exit(exit_status(stop)) from None
        except BrokenPipeError:  # the reader went away (`| head`): nothing more to say
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(0) from None
        except Exception as exc:
            if os.environ.get("SOLBENCH_TRACEBACK") == "1":
                traceback.print_exc()
            sys.stderr.write(failure_line(exc, command) + "\n")
            raise typer.Exit(2) from None
    return guarded


#: what an option's value is, in words, for --help (by the parameter's name; else by its type)
METAVARS = {"problem": "PROBLEM", "problems": "NAMES", "solution": "FILE", "db": "FILE", "device": "DEVICE",
            "hardware": "CHIP", "language": "LANGUAGE", "workload": "UUID", "suite": "SUITE", "family": "FAMILY",
            "model": "MODEL", "models": "FILE", "out": "FILE", "output": "FILE", "baselines": "KINDS",
            "experiment": "NAME", "executor": "EXECUTOR", "gpus": "GPUS", "address": "ADDRESS", "host": "HOST",
            "port": "PORT", "replay": "ID", "profile_dsl": "WHICH", "templates": "DIR", "by": "KEYS"}
_BY_TYPE = {int: "N", float: "NUMBER", Path: "PATH", str: "TEXT"}
#: help for the options many commands share, where a command gives none
HELP = {"as_json": "print JSON instead of the table", "db": "results database (SQLite)",
        "device": "auto (a GPU where there is one), cpu or cuda", "language": "the kernel language",
        "tokens": "the attempt's token budget", "usd": "the attempt's budget in US dollars",
        "replicate": "which replicate of the attempt this is (its held-out workloads follow it)",
        "replicates": "attempts per problem and arm", "experiment": "the experiment's name",
        "model": "a model named in --models", "mode": "chat (code in replies) or tools (evaluate as a function)",
        "attempts": "model turns", "submissions": "graded submissions", "wall_s": "the attempt's wall-clock budget",
        "heldout": "held-out workloads that score (no feedback shows them)", "baselines": "comma-separated baseline "
        "kinds (eager, compile, baseline_file) or none", "seed": "the run's secret seed (default: random, stored)",
        "draws": "correctness draws per workload", "quiet": "no progress bars", "port": "the port to listen on"}


def plain_metavars(fn) -> None:
    """Name each option's value in words (``--db FILE``, ``--draws N``) and give the shared options their help,
    where the command did not."""
    import inspect
    import typing

    from typer.models import OptionInfo, ParameterInfo

    hints = typing.get_type_hints(fn)
    for name, param in inspect.signature(fn).parameters.items():
        info = param.default
        if not isinstance(info, ParameterInfo):
            continue
        if not info.help and name in HELP:
            info.help = HELP[name]
        kind = hints.get(name)
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        while args and typing.get_origin(kind) is not None:  # Optional[X], List[X]: X
            kind, args = args[0], [a for a in typing.get_args(args[0]) if a is not type(None)]
        if kind is bool:
            continue
        if isinstance(info, OptionInfo) and not info.param_decls:
            # the option's name said outright (``--build-jobs``): typer 0.27 with click 8.5 (the GPU machine's)
            # derived ``--DEVICE`` from ``device`` otherwise
            info.param_decls = ("--" + name.replace("_", "-"),)
        if info.metavar is not None:
            continue
        words = METAVARS.get(name) or _BY_TYPE.get(kind)
        if words:
            info.metavar = words


class GuardedTyper(typer.Typer):
    """A Typer whose commands run under ``guard`` (``prefix``: the command group's name, for the message), with
    plain help: no markup boxes, options' values named in words."""

    prefix = ""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("rich_markup_mode", None)
        super().__init__(*args, **kwargs)

    def command(self, name: Optional[str] = None, *args, **kwargs):
        register = super().command(name, *args, **kwargs)

        def decorator(fn):
            command = (self.prefix + " " if self.prefix else "") + (name or fn.__name__.removesuffix("_cmd"))
            plain_metavars(fn)
            register(guard(fn, command))
            return fn
        return decorator
