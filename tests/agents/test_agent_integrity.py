"""What the agent track keeps from one run to the next is believed only with proof: the run's secret lives outside
the results database, a stored trajectory is read back only under its seals, and an external agent's directory
never outlives its attempt."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from solbench import tempdirs
from solbench.agents import run_secret
from solbench.agents.loop import AttemptResult
from solbench.agents.models import ModelConfig
from solbench.agents.session import Setup, attempt_tag, run_attempt, trajectory_key
from solbench.agents.types import Budget, Graded
from solbench.evaluate.isolation.sandbox import namespaces_available
from solbench.store.db import Store
from solbench.store.journal import Journal, ensure, seal_key
from tests.agents.agents_loopback import LoopbackServer, no_code_reply
from tests.paths import SCRIPTED_AGENT, TESTS



def _model(url: str = "http://127.0.0.1:9/v1") -> ModelConfig:
    return ModelConfig(name="loop-model", provider="openai", model="m", base_url=url, max_retries=0)


def _forge(conn: sqlite3.Connection, key: str, problem: str, seal: str | None = None) -> None:
    """What an agent that reached the database wrote: a finished trajectory with a passing best submission."""
    best = Graded(submission=1, solution_digest="forged", language="pytorch", verdict="passed", passed=True,
                  score_speedup=100.0, score_sol=0.99)
    result = AttemptResult(key=key, problem=problem, language="pytorch", model="loop-model", arm="solo",
                           replicate=1, graded=[best], best=best).model_dump_json()
    ensure(conn)
    conn.execute("INSERT INTO trajectories (key, experiment, arm, problem, model, language, chip, replicate, status, "
                 "created, result, seal) VALUES (?, 'agent', 'solo', ?, 'loop-model', 'pytorch', 'cpu', 1, "
                 "'finished', '2026-12-01', ?, ?)", (key, problem, result, seal))
    conn.commit()


def test_a_forged_finished_trajectory_is_run_again_not_read_back(axpy, tmp_path):
    store = Store(tmp_path / "r.db")
    setup = Setup(device="cpu", heldout=0, baselines=(), secret=11, budget=Budget(attempts=1))
    key = trajectory_key(setup, "loop-model", attempt_tag("solo", "pytorch", axpy.name, 1))
    _forge(store.conn, key, axpy.name, seal="0" * 64)
    with LoopbackServer([no_code_reply()]) as srv:
        r = run_attempt(axpy, "pytorch", _model(srv.openai_base_url), setup, store, replicate=1)
        assert srv.calls == 1  # run again: the forged result was not read back
    assert r.best is None and r.turns == 1
    rows = dict(store.conn.execute("SELECT key, status FROM trajectories"))
    assert rows == {key: "finished", f"{key}#rejected-1": "rejected"}  # set aside, for the record
    first = Journal(store.conn, key).events()[0]
    assert "not sealed by this run's secret" in first["rejected"]["why"]
    with LoopbackServer([]) as srv:  # what this run wrote and sealed is read back without a call
        again = run_attempt(axpy, "pytorch", _model(srv.openai_base_url), setup, store, replicate=1)
        assert srv.calls == 0 and again.turns == 1
    with LoopbackServer([no_code_reply()]) as srv:  # under another secret the same rows prove nothing
        run_attempt(axpy, "pytorch", _model(srv.openai_base_url), setup.model_copy(update={"secret": 12}), store,
                    replicate=1)
        assert srv.calls == 1
    # an edited event inside a sealed trajectory sets the whole trajectory aside too
    assert Journal(store.conn, key, seal=seal_key(12)).rejected is None
    store.conn.execute("UPDATE trajectory_events SET body = ? WHERE key = ? AND seq = 0",
                       (json.dumps({"note": "edited"}), key))
    store.conn.commit()
    assert Journal(store.conn, key, seal=seal_key(12)).rejected["why"].startswith("event 0")


def test_the_run_secret_is_kept_out_of_the_database(tmp_path, monkeypatch):
    from solbench.cli_agents import _setup

    monkeypatch.setenv("SOLBENCH_CACHE", str(tmp_path / "cache"))
    store = Store(tmp_path / "r.db")
    args = ("cpu", 1, "chat", Budget(), None, "exp")
    secret = _setup(*args, None, None, None, store).secret
    path = run_secret.secret_path(store.path, "exp")
    assert path.read_text().strip() == str(secret) and path.is_relative_to(tmp_path / "cache")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert _setup(*args, None, None, None, store).secret == secret  # the same run, the same secret
    store.conn.commit()
    assert str(secret).encode() not in (tmp_path / "r.db").read_bytes()
    assert not store.conn.execute("SELECT 1 FROM meta WHERE key LIKE 'agent_secret%'").fetchone()
    # a database of an older solbench: its secret moves to its file and leaves the database
    old = Store(tmp_path / "old.db")
    old.conn.execute("INSERT INTO meta VALUES ('agent_secret:exp', '12345')")
    old.conn.commit()
    assert _setup(*args, None, None, None, old).secret == 12345
    assert not old.conn.execute("SELECT 1 FROM meta WHERE key LIKE 'agent_secret%'").fetchone()
    assert run_secret.load(old.path, "exp") == 12345
    assert _setup(*args, 99, None, None, store).secret == 99  # --secret wins, nothing stored


def test_agent_report_leaves_out_a_trajectory_whose_seals_do_not_hold(axpy, tmp_path, monkeypatch, capsys):
    from solbench.cli_agents import agent_report

    monkeypatch.setenv("SOLBENCH_CACHE", str(tmp_path / "cache"))
    store = Store(tmp_path / "r.db")
    setup = Setup(device="cpu", heldout=0, baselines=(), budget=Budget(attempts=1),
                  secret=run_secret.load_or_create(store.path, "agent", store.conn))
    with LoopbackServer([no_code_reply()]) as srv:
        run_attempt(axpy, "pytorch", _model(srv.openai_base_url), setup, store, replicate=0)
    _forge(store.conn, trajectory_key(setup, "loop-model", attempt_tag("solo", "pytorch", axpy.name, 1)), axpy.name)
    agent_report(db=store.path, experiment=None, by="model", as_json=True)
    captured = capsys.readouterr()
    [row] = json.loads(captured.out)
    assert row["n"] == 1 and row["correct"] == 0.0  # the forged pass is not counted
    assert "left out 1 finished trajectories whose seals do not hold" in captured.err


def test_a_stale_directory_is_swept_once_its_owner_is_gone(tmp_path):
    code = ("import sys, time; from solbench import tempdirs; d = tempdirs.private_dir('solbench-agent-', "
            "parent=sys.argv[1]); print(d.path, flush=True); time.sleep(600)")
    owner = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    stale = Path(owner.stdout.readline().strip())
    live = tempdirs.private_dir("solbench-agent-", parent=tmp_path)
    (live.path / "workspace").mkdir()
    assert tempdirs.sweep("solbench-agent-", parent=tmp_path) == []  # both owners alive
    os.kill(owner.pid, signal.SIGKILL)
    owner.wait()
    assert stale.exists() and stat.S_IMODE(stale.stat().st_mode) == 0o700
    assert tempdirs.sweep("solbench-agent-", parent=tmp_path) == [stale]
    assert not stale.exists() and live.path.exists()
    live.close()
    assert not live.path.exists()


@pytest.mark.skipif(not namespaces_available(), reason="user namespaces are not available here")
def test_an_external_agents_directory_is_removed_when_its_attempt_ends(axpy, tmp_path):
    store = Store(tmp_path / "r.db")
    cmd = f"{sys.executable} {SCRIPTED_AGENT} --script no-submit"
    setup = Setup(device="cpu", heldout=0, baselines=(), secret=3, external=cmd, external_read=(str(TESTS),),
                  budget=Budget(wall_s=120))
    r = run_attempt(axpy, "pytorch", _model(), setup, store)
    assert r.stopped == "external:exit" and r.sandbox == "namespaces"
    note = Journal(store.conn, r.key).events("note")[-1]
    workspace = json.loads(note["stdout_tail"].splitlines()[0])["cwd"]
    assert "solbench-agent-" in workspace and not Path(workspace).exists()
    assert note["sandbox"] == "namespaces" and note["proxy"]["calls"] == 0
