"""The candidate's own view of its process (``integrity.dynamic``): live children of any thread and of any kind."""

import ctypes
import os
import platform
import subprocess
import threading
import time

import pytest

from solbench.evaluate.integrity import dynamic


def test_no_children_then_each_kind_of_child_is_seen():
    assert dynamic.child_processes() == []
    plain = subprocess.Popen(["sleep", "30"])
    started = []
    t = threading.Thread(target=lambda: started.append(subprocess.Popen(["sleep", "30"])))
    t.start()
    t.join()
    try:
        assert sorted(dynamic.child_processes()) == sorted([plain.pid, started[0].pid])  # another thread's too
    finally:
        for p in (plain, started[0]):
            p.kill()
            p.wait()
    assert dynamic.child_processes() == []


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the clone system call's number is x86-64's")
def test_a_child_that_sends_no_signal_when_it_ends_is_seen():
    """clone() with no exit signal: a plain wait() does not see such a child; the check must."""
    libc = ctypes.CDLL(None, use_errno=True)
    read, write = os.pipe()
    pid = libc.syscall(56, 0, 0, 0, 0, 0)  # clone(flags=0) on x86-64: a child that signals no one when it ends
    if pid == 0:
        os.read(read, 1)
        os._exit(0)
    assert pid > 0, ctypes.get_errno()
    try:
        assert dynamic.child_processes() == [pid]
    finally:
        os.write(write, b"x")
        deadline = time.monotonic() + 10
        while dynamic.child_processes() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.waitpid(pid, 0x40000000)  # reaped (__WALL)
        os.close(read)
        os.close(write)
