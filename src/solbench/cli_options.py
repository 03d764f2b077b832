"""Options and helpers several commands share (their modules import them from here, not from one another)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer
from rich.console import Console

from solbench.errors import UserError

DbOption = typer.Option("solbench.db", "--db", help="results database (SQLite)")
ProfileOption = typer.Option("one", "--profile-dsl", help="GPU language proof: profile a kernel-language solution's "
                             "call for its own kernels' share on one workload the run's seed picks (one), all, or "
                             "off")
HoldOption = typer.Option(True, "--hold/--no-hold", help="GPU: hold the stream with a spin kernel so samples time "
                          "the device, not the host's launches (--no-hold counts host-bound launch latency)")

def _width() -> int | None:
    """The output's width: the terminal's; piped, COLUMNS where set, else 80."""
    if sys.stdout.isatty():
        return None
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) >= 40 else 80


out = Console(width=_width())
#: messages to stderr are never broken into lines (``soft_wrap``): each stays one line for a terminal to fold
err = Console(stderr=True, soft_wrap=True)
WideOption = typer.Option(False, "--wide", help="every column, as wide as it needs (the output may then be wider "
                          "than the terminal)")


def print_evaluations(evaluations: list, wide: bool = False) -> None:
    """Evaluations as a listing that fits the output's width (``report.results``)."""
    from solbench.report.results import listing

    for line in listing(evaluations, width=out.width, wide=wide):
        out.print(line, no_wrap=wide, crop=not wide, overflow="ignore" if wide else "fold")


def prestart_worker(device: str, language: str | None = None) -> None:
    """``--device`` named outright (cpu, cuda, cuda:N): that device's trusted worker starts before this process
    imports torch, so that the two imports overlap (a cold `eval` or `run` waits for the later one, not both). The
    worker reads no job before one is sent, and a device that turns out unavailable ends it with this process.
    ``auto`` needs torch to resolve: no early start; nor for a solution whose ``language`` cannot run on the device
    here (its evaluation is ``unsupported`` before any worker would be used)."""
    from solbench.evaluate.trusted import keeper

    if device not in ("cpu", "cuda") and keeper.gpu_index(device) is None:
        return  # auto, or a name ``resolve_device`` refuses
    if language is not None:
        from solbench.evaluate.languages import get_language

        if get_language(language).unavailable(device):
            return
    keeper.judge_for(device)


def profile_mode(mode: str) -> str:
    """``--profile-dsl``'s value, checked."""
    from solbench.evaluate.integrity.language import profile_mode as checked

    try:
        return checked(mode)
    except ValueError:
        raise UserError(f"--profile-dsl must be one, all or off, not {mode!r}") from None


def resolve_device(device: str) -> str:
    """``--device``: auto, cpu, cuda or cuda:N, checked against what this machine has."""
    from solbench.evaluate.trusted.keeper import gpu_index

    index = gpu_index(device)
    if device not in ("auto", "cpu", "cuda") and index is None:
        raise UserError(f"unknown device {device!r}; use auto, cpu, cuda or cuda:N")
    if device == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise UserError("--device cuda asked for, but no CUDA GPU is visible")
        if index is not None and index >= torch.cuda.device_count():
            raise UserError(f"--device {device}: this machine shows {torch.cuda.device_count()} CUDA GPU(s)")
    return device


def stored_calibration(db: Path, hw):
    """The latest stored calibration of ``hw`` as ceilings, or None."""
    from solbench.hardware.calibrate import Calibration
    from solbench.store.db import Store

    try:
        data = Store(db).latest_calibration(hw.id)
    except UserError:
        return None
    if not data:
        return None
    try:
        return Calibration.model_validate(data).to_ceilings(hw)
    except Exception:
        return None
