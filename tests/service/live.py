"""A service started by the tests: uvicorn in a thread of the test's process, on a free loopback port, or a
server process of its own (``server_process``) that a test can kill."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import httpx
import uvicorn

from tests.paths import ROOT


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(url: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"no service at {url} within {timeout_s} s")


@contextlib.contextmanager
def serving(app) -> Iterator[str]:
    """``app`` served on loopback for the block; yields its URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_up(url)
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def server_process(db: Path, port: int, delay_s: float = 0.0) -> subprocess.Popen:
    """``tests/service/fake_server.py`` on ``db``: the real service and scheduler, slots that "evaluate" in
    ``delay_s``."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-m", "tests.service.fake_server", str(db), str(port), str(delay_s)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                            cwd=str(ROOT), start_new_session=True)
