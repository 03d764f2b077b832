"""`solbench run` through the scheduler (two CPU slots), `solbench token`, and `solbench serve`'s refusals: one
line and exit 2."""

import json
import sqlite3

import pytest

from tests.cli.test_cli import invoke, one_line, solbench

pytestmark = pytest.mark.slow


def test_run_through_two_slots_stores_each_evaluation_once(tmp_path):
    db = tmp_path / "r.db"
    res = solbench("run", "--problem", "rmsnorm", "--problem", "silu_and_mul", "--language", "triton",
                   "--executor", "local", "--slots", "2", "--device", "cpu", "--db", str(db), "--json")
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-2000:]
    evs = json.loads(res.stdout[res.stdout.index("["):])
    assert sorted((e["problem"], e["verdict"]) for e in evs) == [("rmsnorm", "passed"), ("silu_and_mul", "passed")]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0] == 2
        assert conn.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall() == [("done", 2)]
        assert {r[0] for r in conn.execute("SELECT run_id FROM evaluations")} == {1}


def test_tokens_are_shown_once_and_stored_hashed(tmp_path):
    db = tmp_path / "s.db"
    made = invoke("token", "add", "trainer", "--quota", "5", "--db", db)
    secret = made.stdout.strip()
    assert made.exit_code == 0 and secret.startswith("sb_")
    listed = invoke("token", "list", "--db", db)
    assert "trainer" in listed.stdout and secret not in listed.stdout
    with sqlite3.connect(db) as conn:
        assert secret not in repr(conn.execute("SELECT * FROM api_tokens").fetchall())
    assert invoke("token", "add", "trainer", "--db", db).exit_code == 2
    assert invoke("token", "revoke", "trainer", "--db", db).exit_code == 0
    assert invoke("token", "revoke", "trainer", "--db", db).exit_code == 2


@pytest.mark.parametrize("args, words", [
    (["--open", "--host", "0.0.0.0"], "loopback"),
    ([], "no API token"),
    (["--executor", "slurm"], "unknown executor"),
])
def test_serve_refuses_in_one_line(tmp_path, args, words):
    res = solbench("serve", "--db", str(tmp_path / "s.db"), "--device", "cpu", *args)
    assert res.returncode == 2 and words in one_line(res.stderr)


def test_a_second_service_on_one_database_is_refused(tmp_path):
    from solbench.schedule.queue import JobQueue
    from solbench.schedule.scheduler import Scheduler
    from tests.schedule.helpers import FakeExecutor
    from solbench.schedule.devices import Slot

    db = tmp_path / "s.db"
    with Scheduler(JobQueue(db), FakeExecutor([Slot("fake:0", "cpu")])):
        res = solbench("serve", "--db", str(db), "--device", "cpu", "--open")
    assert res.returncode == 2 and "schedules" in one_line(res.stderr)


def test_a_run_on_a_database_a_service_schedules_is_run_by_the_service(tmp_path):
    from solbench.schedule.devices import Slot
    from solbench.schedule.local import LocalExecutor
    from solbench.schedule.queue import JobQueue
    from solbench.schedule.scheduler import Scheduler

    db = tmp_path / "s.db"
    with Scheduler(JobQueue(db), LocalExecutor([Slot("cpu:0", "cpu")], db, tmp_path / "logs"), tick_s=0.2):
        res = solbench("run", "--problem", "silu_and_mul", "--language", "triton", "--executor", "local",
                       "--device", "cpu", "--db", str(db), "--json")
    assert res.returncode == 0 and "queued for the `solbench serve`" in res.stderr, res.stderr[-2000:]
    evs = json.loads(res.stdout[res.stdout.index("["):])
    assert [(e["problem"], e["verdict"]) for e in evs] == [("silu_and_mul", "passed")]


def test_a_second_run_scheduling_one_database_is_refused(tmp_path):
    from solbench.schedule.devices import Slot
    from solbench.schedule.queue import JobQueue
    from solbench.schedule.scheduler import Scheduler
    from tests.schedule.helpers import FakeExecutor

    db = tmp_path / "s.db"
    with Scheduler(JobQueue(db), FakeExecutor([Slot("fake:0", "cpu")]), batch="run-1"):
        res = solbench("run", "--problem", "silu_and_mul", "--executor", "local", "--device", "cpu", "--db",
                       str(db))
    last = res.stderr.strip().splitlines()[-1]  # after the progress bars' last state
    assert res.returncode == 2 and "another `solbench run` (run-1)" in last and "Traceback" not in res.stderr
    with sqlite3.connect(db) as conn:  # its jobs were cancelled, not left for a later scheduler
        assert {r[0] for r in conn.execute("SELECT state FROM jobs")} == {"cancelled"}


def test_serve_answers_on_loopback_and_ends_on_sigterm(tmp_path):
    import os
    import signal
    import subprocess
    import sys

    import httpx

    from tests.service.live import free_port, wait_up

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "solbench", "serve", "--open", "--device", "cpu", "--port",
                             str(port), "--db", str(tmp_path / "s.db")], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        wait_up(f"http://127.0.0.1:{port}", timeout_s=120)
        health = httpx.get(f"http://127.0.0.1:{port}/health").json()
        assert health["slots"]["cpu:0"]["state"] in ("starting", "idle") and health["hardware"] == "cpu"
        assert httpx.get(f"http://127.0.0.1:{port}/openapi.json").json()["info"]["title"] == "solbench"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert "solbench serve: 1 slot(s) (cpu:0)" in out and "Traceback" not in err


def test_the_services_start_up_objects_are_left_out_of_later_collections():
    """A full collection scans what the requests made, not the 200,000 objects of torch and the service (their
    collection held a request for 0.1 s)."""
    import subprocess
    import sys

    code = ("import gc, torch, solbench.service.app\nfrom solbench.cli_serve import quiet_collector\n"
            "before = len(gc.get_objects())\nquiet_collector()\n"
            "print(before, gc.get_freeze_count(), len(gc.get_objects()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         stdin=subprocess.DEVNULL, check=True).stdout.split()
    before, frozen, scanned = map(int, out)
    assert before > 100_000 and frozen >= before * 0.9 and scanned < 1_000


def test_the_server_answers_from_a_core_of_its_own_the_slots_keep_theirs(monkeypatch):
    """On a host of 16 cores: the slots (and the processes they start) keep the lowest four, the HTTP server moves
    to one of the rest, and builds ahead get the others; on a small host nothing is split."""
    import os
    import threading

    from solbench import cli_serve
    from solbench.evaluate.native import pool

    asked: list[tuple[str, set[int]]] = []
    monkeypatch.setattr(os, "sched_setaffinity", lambda pid, cores: asked.append((threading.current_thread().name,
                                                                                 set(cores))))
    monkeypatch.setattr(pool, "available_cores", lambda: set(range(16)))
    own, builds = cli_serve._split_cores(1)
    pool.confine(own)
    me = threading.current_thread().name
    assert asked == [(me, {0, 1, 2, 3}), (me, {15})]
    assert own == {15} and builds == set(range(4, 15))
    monkeypatch.setattr(pool, "available_cores", lambda: {0, 1})
    asked.clear()
    assert cli_serve._split_cores(1) == (set(), set())
    pool.confine(set())
    assert asked == []
