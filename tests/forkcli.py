"""The command line as the tests run it: ``run(*args)`` is ``subprocess.run([python, "-m", "solbench", *args])``
with its output captured, but the process is forked from one that has already imported solbench's command line
and torch (a fork server per test process, started at its first use), so that a test pays for the command's
work and not for two seconds of imports.

The child is what ``python -m solbench`` would be: the test's environment, working directory and arguments, its
standard input /dev/null, its output in files the caller reads, ``solbench.__main__`` run as ``__main__``, its
exit status (a negative one for a signal) as the process's; what an import computed from the server's
environment (the output's width) is computed again from the child's. The server imports only (it runs nothing that starts
a thread, so forking it is safe) and serves one command at a time. Tests that signal the command, or that need a
process of its own for another reason, start it with ``subprocess`` themselves.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: what the server imports before it forks: the command line, its command groups, what evaluating imports, and
#: what counting a workload on fake tensors imports (torch's compiler stack: a second, where a count is not cached)
WARM = ("solbench.cli", "solbench.evaluate.runner", "solbench.store.db", "solbench.problems.problem",
        "solbench.report.table", "solbench.evaluate.trusted.keeper", "torch._dynamo", "torch._subclasses.fake_tensor")


def serve() -> None:
    """The server's loop (its own process): a request per line on stdin, ``{"pid": ...}`` then ``{"rc": ...}``
    per request on stdout."""
    import importlib

    for name in WARM:
        importlib.import_module(name)
    ctl_in, ctl_out = os.fdopen(os.dup(0), "r"), os.fdopen(os.dup(1), "w", buffering=1)
    ready = {"ready": threading.active_count() == 1}  # a thread of its own would make forking unsafe
    ctl_out.write(json.dumps(ready) + "\n")
    for line in ctl_in:
        req = json.loads(line)
        pid = os.fork()
        if pid == 0:
            ctl_in.close()
            ctl_out.close()
            _child(req)  # does not return
        ctl_out.write(json.dumps({"pid": pid}) + "\n")
        _, status = os.waitpid(pid, 0)
        ctl_out.write(json.dumps({"rc": os.waitstatus_to_exitcode(status)}) + "\n")


def _child(req: dict) -> None:
    import runpy

    os.setpgid(0, 0)  # its own group: a timeout ends the command and whatever it started
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    for fd, path, mode in ((0, os.devnull, os.O_RDONLY), (1, req["out"], os.O_WRONLY),
                           (2, req["err"], os.O_WRONLY)):
        opened = os.open(path, mode)
        os.dup2(opened, fd)
        os.close(opened)
    sys.stdin = open(0, closefd=False)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from solbench import cli_options

    cli_options.out.width = cli_options._width()  # what the server's import read of its own environment
    sys.argv = ["solbench", *req["args"]]
    code = 0
    try:
        runpy.run_module("solbench", run_name="__main__", alter_sys=True)
    except SystemExit as done:
        code = _status(done.code)
    except BaseException:
        traceback.print_exc()
        code = 1
    # the end of an interpreter without its teardown of torch's modules (a few tenths of a second each time)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)


def _status(code) -> int:
    """An exit status as the interpreter makes one of ``SystemExit``'s code."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


class _Server:
    def __init__(self):
        self.proc: subprocess.Popen | None = None
        self.lock = threading.Lock()

    def _started(self) -> subprocess.Popen | None:
        if self.proc is not None and self.proc.poll() is None:
            return self.proc
        self.proc = subprocess.Popen([sys.executable, "-c", "from tests.forkcli import serve; serve()"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT, text=True,
                                     env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "src")])))
        if not json.loads(self.proc.stdout.readline() or "{}").get("ready"):
            self.proc.kill()
            self.proc = None
        return self.proc

    def run(self, args: list[str], cwd, env, timeout: float) -> subprocess.CompletedProcess | None:
        """The command's outcome, or None where the server cannot run it (the caller runs a process instead)."""
        if not self.lock.acquire(blocking=False):
            return None
        try:
            proc = self._started()
            if proc is None:
                return None
            with tempfile.TemporaryDirectory(prefix="solbench-forkcli-") as tmp:
                out, err = Path(tmp) / "out", Path(tmp) / "err"
                out.touch()
                err.touch()
                req = {"args": args, "cwd": str(cwd or os.getcwd()), "env": dict(env or os.environ),
                       "out": str(out), "err": str(err)}
                proc.stdin.write(json.dumps(req) + "\n")
                proc.stdin.flush()
                pid = json.loads(proc.stdout.readline())["pid"]
                if not select.select([proc.stdout], [], [], timeout)[0]:
                    os.killpg(pid, signal.SIGKILL)
                    proc.stdout.readline()
                    raise subprocess.TimeoutExpired(args, timeout)
                rc = json.loads(proc.stdout.readline())["rc"]
                return subprocess.CompletedProcess(["solbench", *args], rc, out.read_text(errors="replace"),
                                                   err.read_text(errors="replace"))
        finally:
            self.lock.release()


_SERVER = _Server()


def run(*args, cwd=None, env=None, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m solbench ARGS``, forked from the server (``subprocess.run`` where it cannot be)."""
    args = [str(a) for a in args]
    done = _SERVER.run(args, cwd, env, timeout)
    if done is not None:
        return done
    return subprocess.run([sys.executable, "-m", "solbench", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, stdin=subprocess.DEVNULL, timeout=timeout)
