"""``run``'s work ahead of its evaluations (cli_schedule.py): the torch.compile baselines compiled first, with the
run's own options, on the spare cores, a progress bar counting them and naming each with its time; nothing where
there are no spare cores."""

from __future__ import annotations

from solbench.cli_schedule import start_compiles
from solbench.evaluate import compile_ahead
from solbench.problems.problem import load_problem
from tests.paths import AXPY


class Progress:
    def __init__(self):
        self.tasks, self.advanced, self.ended = {}, 0, []

    def add_task(self, name, total=None):
        self.tasks[name] = total
        return name

    def advance(self, task, n=1):
        self.advanced += n

    def update(self, task, advance=0, ended=None):
        self.advanced += advance
        self.ended.append(ended)


def test_the_runs_compile_baselines_are_compiled_ahead_on_the_spare_cores(monkeypatch):
    calls = []

    def fake(aheads, opts, workers, cores=None, done=None, one=None):
        calls.append(([(a.problem.name, a.uuids) for a in aheads], opts.device, opts.baselines, workers, cores))
        for a in aheads:
            for uuid in a.uuids:  # one workload at a time, its time known once it ended
                done(compile_ahead.Ahead(a.problem, [uuid], seconds=2.4), {uuid: "passed"})
        return "under way"

    monkeypatch.setattr(compile_ahead, "start", fake)
    axpy = load_problem(AXPY)
    uuids = [w.uuid for w in axpy.workloads_for("cpu")]
    progress = Progress()
    options = dict(device="cpu", baselines=("eager", "compile"), use_baseline_cache=True)
    assert start_compiles([axpy, axpy], options, None, 3, {5, 6, 7}, progress) == "under way"  # not waited for
    assert calls == [([(axpy.name, uuids)], "cpu", ("eager", "compile"), 3, {5, 6, 7})]
    assert progress.tasks == {"torch.compile baselines ahead": 2} and progress.advanced == 2
    assert progress.ended == [f"{axpy.name} / {u} in 2 s" for u in uuids]  # each named with its time

    calls.clear()
    assert start_compiles([axpy], options, None, 0, set(), Progress()) is None  # no spare cores: each compiles its own
    assert start_compiles([axpy], dict(options, baselines=("eager",)), None, 3, {5}, Progress()) is None  # nothing
    assert calls == []
