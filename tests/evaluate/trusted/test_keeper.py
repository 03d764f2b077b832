"""The runner's keeping of trusted workers (evaluate/trusted/keeper.py) with a fake worker process: a worker that
ends under a job is replaced under the same key, the job's remaining workloads go to its successor, and workers
kept under a caller's key live beside the device's own."""

from __future__ import annotations

import json
import os

from solbench.evaluate.trusted import keeper


class FakeJudge:
    """A worker whose first process ends without a word (a crash) and whose later ones answer every workload."""

    started: list[tuple[str, dict | None]] = []

    def __init__(self, device: str, env: dict | None = None):
        FakeJudge.started.append((device, env))
        self.first = len(FakeJudge.started) == 1
        self.res_fd, self._w = os.pipe()
        self.jobs, self._alive = 0, True

    def alive(self) -> bool:
        return self._alive

    def submit(self, job_path) -> int:
        self.jobs += 1
        job = json.loads(job_path.read_text())
        if self.first:
            self._alive = False
            os.close(self._w)  # end of file: the worker ended
            return 0
        for subject, uuid in job["pairs"]:
            os.write(self._w, json.dumps({"type": "workload", "subject": subject, "uuid": uuid,
                                          "verdict": "passed"}).encode() + b"\n")
        os.write(self._w, b'{"type": "done"}\n')
        return 0

    def log_since(self, offset: int) -> str:
        return ""

    def stop(self, grace_s: float = 5.0) -> None:
        FakeJudge.stops.append(grace_s)
        self._alive = False

    class proc:  # noqa: N801 - the attribute the keeper reads of a real worker's process
        @staticmethod
        def wait(timeout=None):
            return 1


def test_a_worker_that_ends_under_a_job_is_replaced_under_its_key(monkeypatch, tmp_path):
    monkeypatch.setattr(keeper, "Judge", FakeJudge)
    monkeypatch.setattr(keeper, "_JUDGES", {})
    FakeJudge.started, FakeJudge.stops = [], []
    job = {"device": "cpu", "subjects": [{"kind": "eager"}], "pairs": [[0, "w1"], [0, "w2"], [0, "w3"]]}
    out = keeper.run_worker(job, 30, 30, tmp_path, key="cpu#mine", env={"X": "1"})
    assert out.results[(0, "w1")].verdict == "runtime_error" and "crash" in out.results[(0, "w1")].reasons
    assert [out.results[(0, u)].verdict for u in ("w2", "w3")] == ["passed", "passed"]
    assert FakeJudge.started == [("cpu", {"X": "1"}), ("cpu", {"X": "1"})]
    assert FakeJudge.stops == [0]  # the worker that failed is killed, not given the grace of a clean exit
    assert list(keeper._JUDGES) == ["cpu#mine"]  # the successor under the caller's key, the device's own untouched
    keeper.run_worker(dict(job, pairs=[[0, "w4"]]), 30, 30, tmp_path)
    assert sorted(keeper._JUDGES) == ["cpu", "cpu#mine"]


def test_the_signal_handler_can_retire_workers_while_the_main_thread_keeps_them():
    """Ctrl-C lands in the main thread, perhaps inside ``judge_for``'s critical section: retiring every worker from
    there must not wait for itself (in a child process, so that a deadlock fails the test instead of hanging it)."""
    import signal
    import subprocess
    import sys

    code = ("import os, signal\nfrom solbench.evaluate.trusted import keeper\n"
            "worker = type('Worker', (), {'stop': lambda self, grace_s=5.0: print('stopped', grace_s, flush=True),\n"
            "                             'kill': lambda self: print('killed', flush=True)})\n"
            "keeper._JUDGES['cpu'] = worker()\n"
            "with keeper._JUDGES_LOCK:\n    keeper.retire_all()\nprint('retired', list(keeper._JUDGES), flush=True)\n"
            "keeper._JUDGES['cpu'] = worker()\nkeeper.end_with_signals()\nos.kill(os.getpid(), signal.SIGTERM)\n"
            "print('outlived the signal')")
    try:
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                             stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise AssertionError("retiring the workers waited for the lock its own thread held") from None
    # the user's signal kills at once: a worker waiting on a candidate's call would spend the grace
    assert res.stdout.split() == ["stopped", "5.0", "retired", "[]", "killed", "stopped", "0"], res.stderr[-2000:]
    assert res.returncode == -signal.SIGTERM


def test_the_users_end_kills_every_worker_before_waiting_for_any(monkeypatch):
    """Retiring with no grace (Ctrl-C, SIGTERM): each worker's session is killed first, then each is waited for,
    so that a run with a worker per core (its compiles ahead) ends in one teardown's time, not in their sum."""
    events = []

    class Worker:
        def __init__(self, name):
            self.name = name

        def kill(self):
            events.append(("kill", self.name))

        def stop(self, grace_s=5.0):
            events.append(("stop", self.name, grace_s))

    names = ("cuda", "cuda#compile-ahead-0", "cuda#compile-ahead-1")
    monkeypatch.setattr(keeper, "_JUDGES", {k: Worker(k) for k in names})
    keeper.retire_all(grace_s=0)
    assert [e[0] for e in events] == ["kill"] * 3 + ["stop"] * 3
    assert {e[1] for e in events if e[0] == "stop"} == set(names)
    assert keeper._JUDGES == {}
    events.clear()
    monkeypatch.setattr(keeper, "_JUDGES", {"cpu": Worker("cpu")})
    keeper.retire_all()  # with its grace (the end of a command): asked to stop, not killed first
    assert events == [("stop", "cpu", 5.0)]


def test_a_worker_is_ended_even_when_closing_its_pipe_fails():
    """A write to the worker's pipe interrupted by the signal handler makes closing it a re-entrant call (a
    RuntimeError): the process is killed all the same."""
    import subprocess
    import sys

    from solbench.evaluate.isolation.sandbox import end_process

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True,
                            stdin=subprocess.DEVNULL)

    def reentrant():
        raise RuntimeError("reentrant call inside <_io.BufferedWriter name=5>")

    end_process(proc, 0.1, reentrant)
    assert proc.poll() is not None


class RetiringJudge(FakeJudge):
    """A worker that answers every workload, then says its candidates left it holding memory: it retires."""

    def submit(self, job_path) -> int:
        self.jobs += 1
        for subject, uuid in json.loads(job_path.read_text())["pairs"]:
            os.write(self._w, json.dumps({"type": "workload", "subject": subject, "uuid": uuid,
                                          "verdict": "runtime_error", "reasons": ["crash"]}).encode() + b"\n")
        os.write(self._w, b'{"type": "done", "held_bytes": 4294967296, "added_bytes": 536870912, "retire": true}\n')
        return 0


def test_a_worker_left_holding_memory_retires_after_its_job_and_the_next_job_gets_a_fresh_one(monkeypatch, tmp_path):
    """Device memory lent to candidates that died is never freed in the worker's process (``worker._held``): a
    worker that says so at its job's end is ended with the grace of a clean exit once the job's results are in, and
    the next job starts a fresh one; no result of the job is lost."""
    monkeypatch.setattr(keeper, "Judge", RetiringJudge)
    monkeypatch.setattr(keeper, "_JUDGES", {})
    FakeJudge.started, FakeJudge.stops = [], []
    job = {"device": "cuda", "subjects": [{"kind": "solution"}], "pairs": [[0, "w1"], [0, "w2"]]}
    out = keeper.run_worker(job, 30, 30, tmp_path)
    assert sorted(u for _, u in out.results) == ["w1", "w2"]
    assert out.retired and out.held_bytes == 1 << 32 and out.added_bytes == 1 << 29
    assert FakeJudge.stops == [5.0] and keeper._JUDGES == {}  # the clean exit's grace, not a kill
    again = keeper.run_worker(dict(job, pairs=[[0, "w3"]]), 30, 30, tmp_path)
    assert list(again.results) == [(0, "w3")] and len(FakeJudge.started) == 2


def test_a_worker_holding_nothing_is_kept(monkeypatch, tmp_path):
    monkeypatch.setattr(keeper, "Judge", FakeJudge)
    monkeypatch.setattr(keeper, "_JUDGES", {})
    FakeJudge.started, FakeJudge.stops = [None], []  # not the first: this one answers every workload
    out = keeper.run_worker({"device": "cuda", "subjects": [{"kind": "solution"}], "pairs": [[0, "w1"]]}, 30, 30,
                            tmp_path)
    assert not out.retired and out.held_bytes == 0 and out.added_bytes == 0
    assert FakeJudge.stops == [] and list(keeper._JUDGES) == ["cuda"]


def test_a_named_gpu_is_the_only_one_its_worker_sees(monkeypatch):
    """``--device cuda:N``: the worker and its candidates see that GPU alone, as device 0 (``pinned``), so that what
    they do on the current device (synchronisations, streams, events) is done on it; the run keeps its own name."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert keeper.pinned("cuda:1") == ("cuda", {"CUDA_VISIBLE_DEVICES": "1"})
    assert keeper.pinned("cuda") == ("cuda", {}) and keeper.pinned("cpu") == ("cpu", {})
    assert keeper.pinned("cuda:x") == ("cuda:x", {})  # not a device name: ``resolve_device`` says so
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,GPU-abc")
    assert keeper.pinned("cuda:1") == ("cuda", {"CUDA_VISIBLE_DEVICES": "GPU-abc"})  # this process's device 1
    env = keeper._worker_env("cuda:1")
    assert env["CUDA_VISIBLE_DEVICES"] == "GPU-abc" and env["SOLBENCH_WORKER_DEVICE"] == "cuda"


class EnvJudge(FakeJudge):
    """A worker that says which device its job named, and answers every workload."""

    jobs_seen: list[dict] = []

    def submit(self, job_path) -> int:
        job = json.loads(job_path.read_text())
        EnvJudge.jobs_seen.append(job)
        os.write(self._w, json.dumps({"type": "env", "device": job["device"]}).encode() + b"\n")
        for subject, uuid in job["pairs"]:
            os.write(self._w, json.dumps({"type": "workload", "subject": subject, "uuid": uuid,
                                          "verdict": "passed"}).encode() + b"\n")
        os.write(self._w, b'{"type": "done"}\n')
        return 0


def test_a_job_on_a_named_gpu_reaches_its_pinned_worker_as_the_first_device(monkeypatch, tmp_path):
    monkeypatch.setattr(keeper, "Judge", EnvJudge)
    monkeypatch.setattr(keeper, "_JUDGES", {})
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    FakeJudge.started, FakeJudge.stops, EnvJudge.jobs_seen = [None], [], []
    out = keeper.run_worker({"device": "cuda:1", "subjects": [{"kind": "eager"}], "pairs": [[0, "w1"]]}, 30, 30,
                            tmp_path)
    assert [j["device"] for j in EnvJudge.jobs_seen] == ["cuda"]  # the worker's own view of it
    assert FakeJudge.started[-1][0] == "cuda:1" and list(keeper._JUDGES) == ["cuda:1"]  # started pinned to it
    assert out.environment["device"] == "cuda:1" and out.results[(0, "w1")].verdict == "passed"
