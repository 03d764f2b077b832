"""The candidate's process sandbox: children die with it, no network, limits hold."""

import socket
import subprocess
import threading

import pytest

from solbench.evaluate.isolation.namespaces import namespaces_available
from solbench.evaluate.runner import EvalOptions, evaluate
from solbench.problems.solution import SourceFile, load_solution
from tests.conftest import inline_solution
from tests.paths import AXPY, SOLUTIONS

needs_ns = pytest.mark.skipif(not namespaces_available(), reason="user/PID/network namespaces unavailable here")


def _alive(marker: str, wait_s: float = 3.0) -> list[str]:
    """Processes whose command line holds ``marker``, after giving the kernel time to tear a namespace down."""
    import time

    deadline = time.monotonic() + wait_s
    while True:
        out = subprocess.run(["ps", "-eo", "stat,args"], capture_output=True, text=True).stdout
        found = [line for line in out.splitlines() if marker in line and "ps -eo" not in line
                 and not line.lstrip().startswith("Z")]
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def _eval(problem, sol, **kw):
    kw.setdefault("static_checks", False)  # these test the sandbox itself, behind the static scan
    return evaluate(problem, sol, EvalOptions(device="cpu", baselines=(), time_candidate=False,
                                              workloads=["axpy-small"], **kw))


@pytest.mark.parametrize("name,marker", [("leave_child.py", "987654"), ("fork_bomb.py", "876543")])
def test_processes_the_candidate_starts_die_with_it(axpy, name, marker):
    ev = _eval(axpy, load_solution(SOLUTIONS / name, axpy.name))
    w = ev.workloads[0]
    # a sealed CPU candidate cannot fork at all (its system-call filter); where the filter is unavailable, the
    # child it leaves is found (process_spawn)
    assert (w.verdict == "reward_hack" and "process_spawn" in w.reasons) or (
        w.verdict == "runtime_error" and ev.environment.get("seccomp")), w
    assert _alive(marker) == [], "a candidate's process outlived the evaluation"


def test_the_filter_is_in_place_before_the_solutions_import(axpy):
    """Code run at import runs under the system-call filter already (before, it could load a filter of its own
    that refused the harness's): a thread started there, one that ends before the first call and leaves nothing
    for a later check to find, is refused, and the import fails as a verdict."""
    from solbench.evaluate.isolation import seccomp

    if not seccomp.available(True):
        pytest.skip("seccomp cannot be loaded here")
    src = ("import threading\nimport torch\n\n_t = threading.Thread(target=lambda: None)\n_t.start()\n_t.join()\n\n\n"
           "def run(x, y, alpha):\n    return torch.add(y, x, alpha=alpha)\n")
    ev = _eval(axpy, inline_solution(axpy, "thread_at_import", src))
    assert ev.verdict != "passed" and "thread" in (ev.message or "").lower(), (ev.verdict, ev.message)


@needs_ns
def test_no_network(axpy):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(20)
    got = []

    def accept():
        try:
            conn, _ = server.accept()
            got.append(conn.recv(16))
        except OSError:
            pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    src = (SOLUTIONS / "phone_home.py").read_text()
    sol = inline_solution(axpy, "phone_home", src, SourceFile(path="port.txt", content=str(server.getsockname()[1])))
    ev = _eval(axpy, sol, sandbox="auto")
    server.close()
    assert got == [], "the candidate reached the host's network"
    assert ev.verdict != "passed"


@needs_ns
def test_solution_files_are_read_only_and_tmp_is_private(axpy):
    src = ("import os, tempfile\n\ndef run(x, y, alpha):\n"
           "    here = os.path.dirname(__file__)\n"
           "    try:\n        open(os.path.join(here, 'k.py'), 'a').write('# changed')\n        wrote = True\n"
           "    except OSError:\n        wrote = False\n"
           "    tmp = tempfile.gettempdir()\n"
           "    ok = not wrote and tmp.startswith(os.path.dirname(here))\n"
           "    return alpha * x + y if ok else x\n")
    sol = inline_solution(axpy, "ro", src)
    assert _eval(axpy, sol).verdict == "passed"


@needs_ns
def test_the_runs_secrets_are_out_of_the_candidates_reach(axpy):
    """The job file (it holds the seed) is gone, the trusted worker's process is invisible, and the zygote the
    candidate was forked from never held the job: a solution that hunts for them finds nothing."""
    ev = _eval(axpy, load_solution(SOLUTIONS / "seed_hunt.py", axpy.name))
    assert ev.verdict == "passed", (ev.workloads[0].verdict, ev.workloads[0].message)


#: solution source that finds the candidate's reply pipe the way a forger would (its number is in no argument)
_REPLY_FD = ("def _reply_fd():\n"
             "    import fcntl, stat\n"
             "    for name in os.listdir('/proc/self/fd'):\n"
             "        try:\n"
             "            fd = int(name)\n"
             "            if stat.S_ISFIFO(os.fstat(fd).st_mode) and fcntl.fcntl(fd, fcntl.F_GETFL) & 3 == os.O_WRONLY:\n"
             "                return fd\n"
             "        except OSError:\n"
             "            pass\n\n")


def test_a_forged_candidate_reply_is_not_believed(axpy):
    """A candidate that writes its own 'timed' reply on the channel gets result_forgery, not a pass."""
    src = ("import os, sys, json, torch\n\n_n = [0]\n\n" + _REPLY_FD + "def run(x, y, alpha):\n"
           "    _n[0] += 1\n"
           "    if _n[0] == 3:  # the first timed call: answer the timing request itself, then stop\n"
           "        fd = _reply_fd()\n"
           "        os.write(fd, (json.dumps({'type': 'timed', 'samples_ms': [1e-6] * 50, 'wall_ms': [1e-6] * 3,\n"
           "                                  't_begin': 0.0, 't_end': 1.0, 'kept': [], 'codes': []}) + '\\n').encode())\n"
           "        os._exit(0)\n"
           "    return torch.add(y, x, alpha=alpha)\n")
    sol = inline_solution(axpy, "forge", src)
    ev = evaluate(axpy, sol, EvalOptions(device="cpu", baselines=(), workloads=["axpy-small"], static_checks=False,
                                         draws=1))
    w = ev.workloads[0]
    assert w.verdict == "reward_hack" and "result_forgery" in w.reasons, (w.verdict, w.reasons, w.message)


def test_without_the_zygote_candidates_start_from_a_fresh_interpreter(axpy, monkeypatch):
    """SOLBENCH_ZYGOTE=0 (or a zygote that died) falls back to `python -m solbench.evaluate.isolation.sandbox`."""
    from solbench.evaluate.trusted import keeper

    monkeypatch.setenv("SOLBENCH_ZYGOTE", "0")
    keeper.retire_judge("cpu")  # the next job starts a trusted worker that sees the variable
    try:
        ev = _eval(axpy, load_solution(AXPY / "solutions" / "torch_ok.py", axpy.name))
        assert ev.verdict == "passed", ev.workloads[0].message
        assert ev.environment["candidate_ready_s"] > 0.05  # an interpreter start, not a fork
    finally:
        keeper.retire_judge("cpu")


def test_a_forged_call_reply_does_not_pass(axpy):
    """A candidate that answers the trusted worker's call request itself, claiming its outputs were delivered,
    is judged on what is really in the arena, and the channel falls out of step: never a pass."""
    src = ("import os, sys, json, torch\n\n" + _REPLY_FD +
           "def run(x, y, alpha):\n"
           "    fd = _reply_fd()\n"
           "    n = list(x.shape)\n"
           "    os.write(fd, (json.dumps({'type': 'called', 'codes': [], 'count': 1,\n"
           "                              'outputs': [{'shape': n, 'dtype': 'float32', 'delivered': True}]})\n"
           "                  + '\\n').encode())\n"
           "    return torch.zeros_like(x)\n")
    ev = evaluate(axpy, inline_solution(axpy, "forge_call", src), EvalOptions(device="cpu", baselines=(),
                                                                     workloads=["axpy-small"], static_checks=False))
    w = ev.workloads[0]
    assert w.verdict != "passed", (w.verdict, w.reasons, w.message)


def test_the_evaluation_records_its_isolation_and_what_made_it(axpy):
    sol = load_solution(AXPY / "solutions" / "torch_ok.py", axpy.name)
    ev = _eval(axpy, sol, sandbox="none")
    env = ev.environment
    assert env["sandbox"] == "rlimits" and "sandbox_rlimits_only" in ev.warnings
    # and what made it: the harness code and the language proof's mode, beside the software versions
    from solbench.evaluate.runner import harness_digest

    assert env["harness"] == harness_digest() and env["profile_dsl"] == "one"
    if namespaces_available():
        assert _eval(axpy, sol, sandbox="auto").environment["sandbox"] == "namespaces"


def test_a_stop_without_a_grace_kills_at_once_and_asks_nothing():
    """``stop(grace_s=0)`` (a hung or forged candidate): no exit request is written, the session is killed."""
    import os
    import signal
    import sys

    from solbench.evaluate.isolation.sandbox import CandidateProcess

    cmd_r, cmd_w = os.pipe()
    reply_r, reply_w = os.pipe()
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], stdin=subprocess.DEVNULL,
                            start_new_session=True)
    os.close(reply_w)
    cand = CandidateProcess.__new__(CandidateProcess)
    cand.proc, cand._cmd, cand._reply_fd = proc, os.fdopen(cmd_w, "w"), reply_r
    cand.stop(grace_s=0)
    assert cand.proc is None and proc.returncode == -signal.SIGKILL
    with os.fdopen(cmd_r, "rb") as asked:
        assert asked.read() == b""  # the command pipe closed with nothing written to it
