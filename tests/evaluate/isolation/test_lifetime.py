"""The trusted worker, its zygote and every candidate end with the runner, whatever signal ends it; a worker or a
slot process starts with no Python run in a forked copy of its threaded starter, and a process whose starter
ended before it set its parent-death signal ends at once."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.paths import AXPY
from tests.procs import running

SPIN = "def run(x, y, alpha):\n    while True:\n        alpha = alpha + 0.0\n"


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] == "Z":
            continue
        kids.setdefault(int(fields[1]), []).append(int(name))
    return kids


def _descendants(pid: int) -> set[int]:
    kids = _children()
    out, todo = set(), [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            if k not in out:
                out.add(k)
                todo.append(k)
    return out


def _described(pids: set[int]) -> dict[int, str]:
    """Each process's command line and what its threads wait in (a failure's message: where a start got stuck)."""
    out = {}
    for pid in sorted(pids):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:160]
            waits = sorted({(t / "wchan").read_text() for t in Path(f"/proc/{pid}/task").iterdir()})
        except OSError:
            continue
        out[pid] = f"{cmd} (threads waiting in: {', '.join(waits)})"
    return out


def _alive(pids: set[int]) -> set[int]:
    return {pid for pid in pids if running(pid)}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_workers_and_candidates_die_with_the_runner(tmp_path, sig):
    sol = tmp_path / "spin.py"
    sol.write_text(SPIN)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    runner = subprocess.Popen([sys.executable, "-m", "solbench.cli", "eval", "--problem", str(AXPY), "--solution",
                               str(sol), "--db", str(tmp_path / "r.db"), "--device", "cpu"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              env=env)
    try:
        # the trusted worker, its zygote, the candidate's parent and the candidate itself (process 1 of its namespace)
        # (processes of the evaluation's that end by themselves come and go first: the family counts once it has
        # kept four members through a second, the candidate in its spinning call by then)
        deadline = time.monotonic() + 90
        family: set[int] = set()
        while time.monotonic() < deadline:
            family = _descendants(runner.pid)
            if len(family) >= 4:
                time.sleep(1.0)
                again = _descendants(runner.pid)
                if len(again) >= 4 and family <= again:
                    family = again
                    break
            time.sleep(0.2)
        assert len(family) >= 4, f"the evaluation did not get as far as a candidate: {_described(family)}"
        os.kill(runner.pid, sig)
        _, err = runner.communicate(timeout=30)
        if sig == signal.SIGTERM:  # taken as Ctrl-C is: said in one line, and the signal's status
            assert runner.returncode == 143 and err.strip().endswith("interrupted (SIGTERM)"), err[-2000:]
        deadline = time.monotonic() + 15
        while _alive(family) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(family), f"processes outlived the runner after {sig.name}: {_alive(family)}"
    finally:
        if runner.poll() is None:
            runner.kill()
        for pid in _alive(_descendants(runner.pid)):
            os.kill(pid, signal.SIGKILL)


# ---- starting a process from a threaded one ----------------------------------------------------------------
_WATCHED: set[int] = set()  # the threads whose forks are counted
_FORKS: list[int] = []


def _note_fork() -> None:
    if threading.get_ident() in _WATCHED:
        _FORKS.append(threading.get_ident())


os.register_at_fork(before=_note_fork)


def _forks_while(start):
    """How many forks of this thread ran the interpreter's at-fork handlers while ``start()`` ran: a
    ``preexec_fn`` (Python in the forked copy of a threaded process) runs them, and they take locks other
    threads may hold (a run's compiles ahead deadlocked so, 14 threads starting workers beside an import)."""
    _FORKS.clear()
    _WATCHED.add(threading.get_ident())
    try:
        return start(), len(_FORKS)
    finally:
        _WATCHED.discard(threading.get_ident())


def test_a_trusted_worker_starts_with_no_python_in_a_forked_copy_of_the_runner():
    from solbench.evaluate.trusted.keeper import Judge

    judge, forks = _forks_while(lambda: Judge("cpu"))
    try:
        assert judge.alive()
        assert forks == 0
    finally:
        judge.kill()
        judge.stop(0)


def test_a_slot_process_starts_with_no_python_in_a_forked_copy_of_the_scheduler(tmp_path):
    from solbench.schedule.devices import Slot
    from solbench.schedule.local import _Process

    proc, forks = _forks_while(lambda: _Process(Slot("cpu:0", "cpu"), None, tmp_path / "slot.log"))
    try:
        assert forks == 0
    finally:
        proc.kill()


def test_a_process_whose_starter_already_ended_ends_at_once():
    """die_with_parent's signal comes only for a parent that ends after the call: one that ended before (the
    process id the child was told is no longer its parent) ends the child there."""
    code = ("from solbench.evaluate.isolation.namespaces import die_with_parent; die_with_parent({}); "
            "print('alive')")
    mine = subprocess.run([sys.executable, "-c", code.format(os.getpid())], capture_output=True, text=True,
                          timeout=60)
    assert mine.returncode == 0 and mine.stdout.strip() == "alive", mine.stderr
    gone = subprocess.run([sys.executable, "-c", code.format(-1)], capture_output=True, text=True, timeout=60)
    assert gone.returncode == 1 and gone.stdout == "", gone.stderr


def test_a_candidate_from_a_fresh_interpreter_whose_starter_already_ended_ends_before_its_sandbox():
    spec = json.dumps({"parent": -1})  # not this interpreter's parent: its starter ended before it began
    done = subprocess.run([sys.executable, "-m", "solbench.evaluate.isolation.sandbox", spec, "0", "1"],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 1 and done.stderr == "", done.stderr[-2000:]
