"""A trusted worker's jobs under cProfile (evaluate/trusted/profiling.py): the profile is whole on disk before the
job's last message leaves, since the runner may kill the worker as soon as it has that message."""

import pstats

from solbench.evaluate.trusted.profiling import profiled


class Chan:
    def __init__(self, where):
        self.where, self.seen = where, []

    def send(self, **msg):
        self.seen.append((msg["type"], sorted(p.name for p in self.where.iterdir())))


def _job(job_path, chan, zygote):
    chan.send(type="env")
    sum(i * i for i in range(10_000))
    chan.send(type="done")
    return 0


def test_the_profile_is_written_before_the_jobs_last_message(tmp_path, monkeypatch):
    monkeypatch.setenv("SOLBENCH_WORKER_PROFILE", str(tmp_path))
    chan = Chan(tmp_path)
    assert profiled(_job, "job.json", chan, None) == 0
    (env, before), (done, at_done) = chan.seen
    assert (env, before, done) == ("env", [], "done")
    assert len(at_done) == 1 and at_done[0].endswith(".prof")
    assert "_job" in str(pstats.Stats(str(tmp_path / at_done[0])).stats)


def test_without_the_variable_nothing_is_profiled(tmp_path, monkeypatch):
    monkeypatch.delenv("SOLBENCH_WORKER_PROFILE", raising=False)
    chan = Chan(tmp_path)
    assert profiled(_job, "job.json", chan, None) == 0
    assert chan.seen == [("env", []), ("done", [])]


def test_a_candidate_profiles_itself_only_where_the_runner_is_asked_and_only_its_files_come_out(tmp_path,
                                                                                                monkeypatch):
    from solbench.evaluate.candidate import profiling as candidate
    from solbench.evaluate.trusted.profiling import candidate_env, collect_candidates

    private, into = tmp_path / "private", tmp_path / "into"
    private.mkdir()
    into.mkdir()
    monkeypatch.delenv(candidate.VAR, raising=False)
    assert candidate_env(private) == {} and collect_candidates(private) == 0
    monkeypatch.setenv(candidate.VAR, str(into))
    env = candidate_env(private)
    assert env == {candidate.VAR: str(private / "profiles")}
    monkeypatch.setenv(candidate.VAR, env[candidate.VAR])  # as the candidate's sandbox sees it
    prof = candidate.start()
    sum(i * i for i in range(1000))
    candidate.finish(prof)
    (written,) = (private / "profiles").iterdir()
    (private / "profiles" / "link.prof").symlink_to(tmp_path / "elsewhere.prof")  # a link is not followed
    (tmp_path / "elsewhere.prof").write_text("secret")
    monkeypatch.setenv(candidate.VAR, str(into))  # the runner's own
    assert collect_candidates(private) == 1
    assert [p.name for p in into.iterdir()] == [written.name]
    assert "<genexpr>" in str(pstats.Stats(str(into / written.name)).stats)


def test_a_profiled_candidate_is_judged_as_any_other_and_its_profile_comes_out(tmp_path, monkeypatch):
    """The candidate's profiler starts before its harness's first snapshot: the hook it installs is not tampering."""
    from solbench.evaluate.candidate.profiling import VAR
    from solbench.evaluate.runner import EvalOptions, evaluate
    from solbench.problems.problem import load_problem
    from solbench.problems.solution import load_solution
    from tests.paths import AXPY as axpy

    problem = load_problem(axpy)
    monkeypatch.setenv(VAR, str(tmp_path))
    ev = evaluate(problem, load_solution(axpy / "solutions" / "torch_ok.py", problem.definition),
                  EvalOptions(device="cpu", baselines=()))
    assert ev.verdict == "passed", (ev.verdict, ev.reasons, ev.message)
    assert [p.suffix for p in tmp_path.iterdir()] and all(p.suffix == ".prof" for p in tmp_path.iterdir())
