"""Slots as processes of this host (``--executor local``): one per device, started once and kept warm.

A slot's process (``slot.main``) is pinned to its GPU by CUDA_VISIBLE_DEVICES and runs in a session of its own,
so recycling it kills it with its trusted worker and every candidate; it dies with this process too. A slot that
died, hung past the scheduler's limit or was cancelled under a job is started again for the next job; the other
slots never notice.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from solbench.schedule.devices import Slot
from solbench.schedule.jobs import Job
from solbench.schedule.outcome import Outcome, Tick, answered, unanswered

#: seconds a slot's process may take to start (imports, its trusted worker's start)
START_S = 300.0
#: seconds an idle slot's process may take to answer its health check
PING_S = 10.0


class _Process:
    def __init__(self, slot: Slot, db: Path | None, log: Path):
        from solbench.evaluate.isolation.namespaces import PARENT_ENV
        from solbench.evaluate.trusted.keeper import module_paths

        cmd_r, cmd_w = os.pipe()
        res_r, res_w = os.pipe()
        paths = module_paths() + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths), **{PARENT_ENV: str(os.getpid())})
        if slot.visible is not None:
            env["CUDA_VISIBLE_DEVICES"] = slot.visible
        argv = [sys.executable, "-m", "solbench.schedule.slot", str(cmd_r), str(res_w), slot.device,
                str(db) if db else ""]
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                         pass_fds=(cmd_r, res_w), env=env, start_new_session=True)
        os.close(cmd_r)
        os.close(res_w)
        self.cmd = os.fdopen(cmd_w, "w", buffering=1)
        self.res = res_r
        self.buf = b""
        self.ready = False

    def send(self, msg: dict) -> None:
        self.cmd.write(json.dumps(msg) + "\n")
        self.cmd.flush()

    def read(self, timeout_s: float) -> dict | None | bool:
        """The next message; None when none came within ``timeout_s``; False when the process ended."""
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.res], [], [], left)
            if not ready:
                return None
            chunk = os.read(self.res, 1 << 20)
            if not chunk:
                return False
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        for close in (self.cmd.close, lambda: os.close(self.res)):
            try:
                close()
            except OSError:
                pass


class LocalExecutor:
    """``slots`` as processes of this host; ``db``: the database their baselines' cache lives in."""

    def __init__(self, slots: list[Slot], db: Path | None, log_dir: Path):
        self.slots = slots
        self.db = db
        self.log_dir = log_dir
        log_dir.mkdir(parents=True, exist_ok=True)
        self._procs: dict[str, _Process] = {}
        self._restarts: dict[str, int] = {s.name: 0 for s in slots}

    def pid(self, slot: Slot) -> int | None:
        p = self._procs.get(slot.name)
        return p.proc.pid if p is not None and p.proc.poll() is None else None

    def _process(self, slot: Slot) -> _Process | str:
        """The slot's live, ready process (started now where needed), or why it could not start."""
        p = self._procs.get(slot.name)
        if p is not None and p.proc.poll() is None and p.ready and self._answers(p):
            return p
        if p is not None:
            p.kill()
            self._restarts[slot.name] += 1
        p = self._procs[slot.name] = _Process(slot, self.db, self.log_dir / f"{slot.name.replace(':', '-')}.log")
        msg = p.read(START_S)
        if not (isinstance(msg, dict) and msg.get("type") == "ready"):
            p.kill()
            return f"the slot's process did not start (see {self.log_dir})"
        p.ready = True
        return p

    def warm(self, slot: Slot) -> None:
        """Start the slot's process (and its trusted worker) ahead of its first job (each slot's own thread)."""
        self._process(slot)

    @staticmethod
    def _answers(p: _Process) -> bool:
        """The health check before each job: the idle process answers a ping."""
        try:
            p.send({"type": "ping"})
            msg = p.read(PING_S)
        except OSError:
            return False
        return isinstance(msg, dict) and msg.get("type") == "pong"

    def run(self, slot: Slot, job: Job, tick: Tick, tick_s: float, timeout_s: float) -> Outcome:
        p = self._process(slot)
        if isinstance(p, str):
            return Outcome("unavailable", message=p)
        try:
            p.send({"type": "job", "job": job.id, "spec": job.spec.model_dump_json()})
        except OSError:
            self.recycle(slot)
            return Outcome("lost", message="the slot's process ended before the job reached it")
        deadline = time.monotonic() + timeout_s
        while True:
            msg = p.read(tick_s)
            if msg is False:
                code = p.proc.wait()
                self.recycle(slot)
                return Outcome("lost", message=f"the slot's process ended (exit status {code}) during the job")
            if isinstance(msg, dict) and msg.get("job") == job.id:
                return answered(msg)
            ended = unanswered(tick, deadline, timeout_s)
            if ended is not None:
                self.recycle(slot)
                return ended

    def recycle(self, slot: Slot) -> None:
        p = self._procs.pop(slot.name, None)
        if p is not None:
            p.kill()
            self._restarts[slot.name] += 1

    def health(self) -> dict[str, dict]:
        return {s.name: {"device": s.device, "visible": s.visible, "pid": self.pid(s),
                         "restarts": self._restarts[s.name]} for s in self.slots}

    def close(self) -> None:
        for slot in self.slots:
            p = self._procs.pop(slot.name, None)
            if p is not None:
                p.kill()
