"""The native build's sandbox (evaluate/native/jail.py) as the build pool starts it, without namespaces: it runs
its command where the process that started it is still its parent, and nothing where that starter has ended."""

import json
import os
import subprocess
import sys

from tests.paths import SRC


def _jail(tmp_path, parent: int) -> subprocess.CompletedProcess:
    spec = {"argv": ["/bin/sh", "-c", "echo ran"], "cwd": str(tmp_path), "env": {"PATH": "/usr/bin:/bin"},
            "cpu_s": 30, "namespaces": False, "parent": parent}
    return subprocess.run([sys.executable, "-m", "solbench.evaluate.native.jail", json.dumps(spec)],
                          capture_output=True, text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(SRC)))


def test_the_build_runs_while_its_starter_lives(tmp_path):
    done = _jail(tmp_path, os.getpid())
    assert done.returncode == 0 and done.stdout.strip() == "ran", done.stderr


def test_a_build_whose_starter_already_ended_runs_nothing(tmp_path):
    done = _jail(tmp_path, -1)  # not this process's parent: as if the runner had ended before the jail began
    assert done.returncode == 1 and "ran" not in done.stdout, done.stderr
