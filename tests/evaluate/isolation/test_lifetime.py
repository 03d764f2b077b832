"""The trusted worker, its zygote and every candidate end with the runner, whatever signal ends it."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.paths import AXPY

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


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.add(pid)
    return alive


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
        deadline = time.monotonic() + 90
        family: set[int] = set()
        while time.monotonic() < deadline:
            family = _descendants(runner.pid)
            if len(family) >= 4:
                time.sleep(1.0)  # the candidate is in its spinning call by now
                family = _descendants(runner.pid)
                break
            time.sleep(0.2)
        assert len(family) >= 4, f"the evaluation did not get as far as a candidate: {family}"
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
