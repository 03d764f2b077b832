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
