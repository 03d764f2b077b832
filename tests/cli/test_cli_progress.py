"""``solbench run``'s progress in a log (cli_progress.py): a line per step where the bars would not show."""

import io
import itertools

import pytest
from rich.console import Console

from solbench.cli_progress import LogProgress, run_progress


@pytest.fixture
def ticks(monkeypatch):
    """A clock that moves 10 s at each reading."""
    clock = itertools.count(0, 10)
    monkeypatch.setattr(LogProgress, "clock", staticmethod(lambda: next(clock)))


def test_a_log_gets_a_line_per_step_with_what_it_works_on(ticks):
    buf = io.StringIO()
    console = Console(file=buf, width=200)
    assert not console.is_interactive
    with run_progress(console, quiet=False) as progress:
        assert isinstance(progress, LogProgress)
        run = progress.add_task("solbench run on cuda (h100)", total=2)
        builds = progress.add_task("native builds", total=3)
        progress.update(run, description="rmsnorm / triton")
        progress.advance(builds)
        progress.advance(run)
    lines = [line.split("] ", 1)[1] for line in buf.getvalue().splitlines()]
    # readings: start 0, the bars' starts 10 and 20, the run's first step named at 30 (line at 40), the build's
    # step at 50 (30 s since its bar began: 60 s for the two left), the run's step at 60 (30 s since its first)
    assert lines == ["solbench run on cuda (h100) 0/2 (now: rmsnorm / triton)", "native builds 1/3, about 60 s left",
                     "solbench run on cuda (h100) 1/2 (ended: rmsnorm / triton), about 30 s left"]


def test_quiet_prints_nothing_and_a_terminal_gets_bars():
    buf = io.StringIO()
    with run_progress(Console(file=buf), quiet=True) as progress:
        progress.advance(progress.add_task("x", total=1))
    assert buf.getvalue() == ""
    assert not isinstance(run_progress(Console(file=io.StringIO(), force_interactive=True, force_terminal=True),
                                       quiet=False), LogProgress)


def test_a_step_run_beside_others_is_named_with_its_time_where_it_ends(ticks):
    buf = io.StringIO()
    with run_progress(Console(file=buf, width=200), quiet=False) as progress:
        ahead = progress.add_task("torch.compile baselines ahead", total=2)
        progress.update(ahead, advance=1, ended="rmsnorm / rmsnorm-t1 in 12 s")
        progress.advance(ahead)  # a step that names nothing does not repeat the name of the one before
    lines = [line.split("] ", 1)[1] for line in buf.getvalue().splitlines()]
    assert lines == ["torch.compile baselines ahead 1/2 (ended: rmsnorm / rmsnorm-t1 in 12 s), about 10 s left",
                     "torch.compile baselines ahead 2/2"]
