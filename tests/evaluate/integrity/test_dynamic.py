"""The candidate's own view of its process (``integrity.dynamic``): live children of any thread and of any kind.

Each case runs in a process of its own: a test process has children of its own (workers, servers) that the
check would rightly list."""

import platform
import subprocess
import sys

import pytest

from tests.paths import ROOT

_START = """
import ctypes, os, subprocess, sys, threading, time
from solbench.evaluate.integrity import dynamic
"""

_KINDS = _START + """
assert dynamic.child_processes() == [], dynamic.child_processes()
plain = subprocess.Popen(["sleep", "30"])
started = []
t = threading.Thread(target=lambda: started.append(subprocess.Popen(["sleep", "30"])))
t.start()
t.join()
seen = sorted(dynamic.child_processes())
for p in (plain, started[0]):
    p.kill()
    p.wait()
assert seen == sorted([plain.pid, started[0].pid]), seen  # another thread's child too
assert dynamic.child_processes() == []
print("ok")
"""

_CLONE = _START + """
libc = ctypes.CDLL(None, use_errno=True)
read, write = os.pipe()
pid = libc.syscall(56, 0, 0, 0, 0, 0)  # clone(flags=0) on x86-64: a child that signals no one when it ends
if pid == 0:
    os.read(read, 1)
    os._exit(0)
assert pid > 0, ctypes.get_errno()
seen = dynamic.child_processes()
os.write(write, b"x")
deadline = time.monotonic() + 10
while dynamic.child_processes() and time.monotonic() < deadline:  # its zombie is not a live child
    time.sleep(0.01)
left = dynamic.child_processes()
os.waitpid(pid, 0x40000000)  # reaped (__WALL)
assert seen == [pid] and left == [], (seen, left, pid)
print("ok")
"""


def _run(script: str) -> None:
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=60,
                         stdin=subprocess.DEVNULL)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr[-2000:]


def test_no_children_then_each_kind_of_child_is_seen():
    _run(_KINDS)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the clone system call's number is x86-64's")
def test_a_child_that_sends_no_signal_when_it_ends_is_seen():
    """clone() with no exit signal: a plain wait() does not see such a child; the check must."""
    _run(_CLONE)
