"""The command's end (cli.py ``_exit_now``): its exit handlers run and its output is flushed, the interpreter's
teardown is skipped; a thread of the command still running is waited for, as by the usual exit."""

import subprocess
import sys


def _end(body: str) -> subprocess.CompletedProcess:
    code = ("import atexit, sys, threading, time\nfrom solbench.cli import _exit_now\n"
            "atexit.register(lambda: print('handler ran', flush=True))\n" + body)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def test_the_exit_status_the_output_and_the_exit_handlers_survive_the_quick_end():
    res = _end("print('said', end=' ')\nsys.stderr.write('warned')\n_exit_now(3)\nprint('never')")
    assert res.returncode == 3
    assert res.stdout.split() == ["said", "handler", "ran"] and res.stderr == "warned"


def test_a_thread_still_running_is_waited_for():
    res = _end("threading.Thread(target=lambda: (time.sleep(0.2), print('thread ended', flush=True))).start()\n"
               "_exit_now(0)")
    assert res.returncode == 0
    assert "thread ended" in res.stdout and "handler ran" in res.stdout
