"""Faults of the service itself: a queue of 1,000 jobs survives the server's kill -9 and restart, and every job
finishes exactly once."""

import os
import signal
import sqlite3
import time

import httpx
import pytest

from tests.service.live import free_port, server_process, wait_up
from tests.service.test_app import body

pytestmark = pytest.mark.slow


def test_a_thousand_jobs_survive_a_kill_and_a_restart_and_finish_once(tmp_path):
    db = tmp_path / "s.db"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = server_process(db, port, delay_s=0.005)
    try:
        wait_up(url)
        ids = []
        with httpx.Client(base_url=url, timeout=60) as c:
            for _ in range(4):
                r = c.post("/v1/evaluations/batch", json={"evaluations": [body()] * 250})
                assert r.status_code == 202, r.text
                ids += r.json()["ids"]
            deadline = time.monotonic() + 300
            while httpx.get(f"{url}/health").json()["queue"].get("done", 0) < 50:
                assert time.monotonic() < deadline, "the service finished nothing"
                time.sleep(0.02)  # some done, most still queued, two running
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
        with sqlite3.connect(db) as conn:
            states = dict(conn.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall())
        assert states.get("queued", 0) > 0 and sum(states.values()) == 1000

        server = server_process(db, port, delay_s=0.0)
        wait_up(url)
        with httpx.Client(base_url=url, timeout=60) as c:
            deadline = time.monotonic() + 300
            while httpx.get(f"{url}/health").json()["queue"].get("done", 0) < 1000:
                assert time.monotonic() < deadline, "the restarted service did not finish the queue"
                time.sleep(0.1)
            jobs = [c.get(f"/v1/evaluations/{i}").json() for i in (ids[0], ids[499], ids[-1])]
        assert all(j["state"] == "done" and j["result"]["verdict"] == "passed" for j in jobs)
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*), COUNT(DISTINCT evaluation_id) FROM jobs WHERE state='done'"
                            ).fetchone() == (1000, 1000)
        # every stored evaluation is one job's, and none is stored twice
        assert conn.execute("SELECT COUNT(*), COUNT(DISTINCT solution) FROM evaluations").fetchone() == (1000, 1000)
        assert conn.execute("SELECT COUNT(*) FROM evaluations e JOIN jobs j ON j.evaluation_id = e.id AND "
                            "e.solution = 'job-' || j.id").fetchone()[0] == 1000
