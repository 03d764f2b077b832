"""Run an EXTERNAL agent CLI (Claude Code, OpenCode, Codex CLI, any command) on one problem.

The agent gets a private workspace with ``TASK.md``, the starter files and a ``./submit [files...]`` command.
``submit`` sends the files' text over a Unix-domain socket in the workspace; the PARENT grades them with
``grader.grade``, counts them against the budget and answers with the feedback text, which ``submit`` prints
(exit 0 graded, 3 budget spent, 2 anything else). A socket rather than a request/response file pair: the
exchange is synchronous (no polling, no half-written files, no stale replies), the agent cannot read or forge
another request's answer, and a dead parent shows at once as a refused connection. The agent can talk to the
socket without ``./submit``; it gains nothing, as every check and count happens in the parent.

The agent runs with cwd = workspace, stdin on /dev/null, its own process group, an environment holding only
``_PASS_ENV`` plus what ``env`` names, and a wall-clock limit after which the whole group is killed. Its
stdout/stderr reach log files OUTSIDE the workspace through pipes the parent copies, so the agent cannot
truncate or rewrite them through an inherited descriptor. Token usage is read from that log afterwards
(:func:`solbench.agents.agent_logs.parse_usage`).
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from solbench.agents.agent_logs import parse_usage
from solbench.agents.types import Budget, Graded, Grader, Price, Spent, Usage, submission_rank

#: parent variables an agent may see without being told; nothing that holds a key
_PASS_ENV = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TMPDIR", "TZ")
_MAX_REQUEST = 16 << 20
EXIT_GRADED, EXIT_ERROR, EXIT_BUDGET = 0, 2, 3
_NAMES = {"wall_s": "wall-clock", "usd": "cost", "attempts": "turns"}

_SUBMIT = r"""#!/bin/sh
# ./submit [files...]: send files (default: %(default)s) to the grader and print its feedback.
# Exit status: 0 graded, 3 the budget is spent (nothing graded), 2 anything else.
exec %(python)s -I - "$@" <<'SOLBENCH_EOF'
import json, os, socket, sys
WS, SOCK, DEFAULT = %(ws)r, %(sock)r, %(default_list)r
def fail(msg):
    sys.exit(print("submit: " + msg, file=sys.stderr) or 2)
names, files = sys.argv[1:] or [os.path.join(WS, n) for n in DEFAULT] or fail("name files: ./submit FILE..."), {}
for name in names:
    path = os.path.realpath(name)
    if not path.startswith(WS + os.sep):
        fail(name + " is not a file inside the workspace")
    try:
        with open(path, encoding="utf-8") as f:
            files[os.path.relpath(path, WS)] = f.read()
    except (OSError, UnicodeDecodeError) as e:
        fail("cannot read %%s: %%s" %% (name, e))
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(SOCK)
    s.sendall(json.dumps({"files": files}).encode())
    s.shutdown(socket.SHUT_WR)
    reply = json.loads(b"".join(iter(lambda: s.recv(65536), b"")).decode())
except (OSError, ValueError) as e:
    fail("the grader did not answer (%%s)" %% e)
print(reply.get("text", ""))
sys.exit(int(reply.get("code", 2)))
SOLBENCH_EOF
"""


class ExternalResult(BaseModel):
    graded: list[Graded] = Field(default_factory=list)  # every graded submission, in order
    best: Graded | None = None  # passed first, then highest score_sol, then score_speedup
    exit_code: int | None = None  # the agent's (negative: killed by that signal)
    #: exit: the agent ended on its own; timeout: killed at the wall limit; budget: a submission was refused, or
    #: the agent was stopped once the budget ran out (``after_budget_s`` later; at once for tokens or usd)
    stopped: Literal["exit", "timeout", "budget"] = "exit"
    refused: int = 0  # submissions refused because the budget was spent
    usage: Usage = Field(default_factory=Usage)
    usd: float | None = None  # the agent log's own cost, else from ``price``, else None
    wall_s: float = 0.0
    workspace: Path  # the agent's, with what it left there
    log_dir: Path  # outside the workspace: agent.stdout, agent.stderr, submissions.jsonl
    stdout_path: Path
    stderr_path: Path


def default_feedback(g: Graded) -> str:
    """One line: verdict, reasons, passed, scores. (The real renderer is passed as ``feedback``.)"""
    why = f" ({'; '.join(g.reasons)})" if g.reasons else ""
    sol, sp = (f"{x:.3g}" if x is not None else "n/a" for x in (g.score_sol, g.score_speedup))
    return f"submission {g.submission}: {g.verdict}{why}, passed={g.passed}, sol_score={sol}, speedup={sp}"


def best_of(graded: list[Graded]) -> Graded | None:
    """The best submission: passed first, then highest ``score_sol``, then ``score_speedup``; earliest on ties."""
    return max(graded, key=submission_rank, default=None)  # max keeps the first of equals


def agent_env(extra: dict | None, workspace: Path) -> dict[str, str]:
    """The agent's environment: ``_PASS_ENV`` from ours, then ``extra`` (a ``None`` value copies ours)."""
    env = {k: os.environ[k] for k in _PASS_ENV if k in os.environ}
    env.setdefault("PATH", os.defpath)
    for k, v in (extra or {}).items():
        if v is not None or k in os.environ:
            env[k] = os.environ[k] if v is None else str(v)
    env["SOLBENCH_WORKSPACE"] = str(workspace)
    return env


def _safe_rel(name: str) -> bool:
    p = Path(name)
    return bool(name) and not p.is_absolute() and ".." not in p.parts


def _prepare(workspace: Path, log_dir: Path, task_text: str, template: dict[str, str]) -> None:
    if workspace.exists() and (not workspace.is_dir() or any(workspace.iterdir())):
        raise ValueError(f"workspace {workspace} exists and is not an empty directory")
    if log_dir == workspace or workspace in log_dir.parents:
        raise ValueError(f"log dir {log_dir} must lie outside the workspace {workspace}")
    bad = [n for n in template if not _safe_rel(n) or n in ("TASK.md", "submit")]
    if bad:
        raise ValueError(f"template file names not allowed: {bad}")
    workspace.mkdir(mode=0o700, parents=True, exist_ok=True)
    workspace.chmod(0o700)  # private, whatever the umask
    log_dir.mkdir(parents=True, exist_ok=True)
    (workspace / "TASK.md").write_text(task_text)
    for name, text in template.items():
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text(text)


class _Session:
    """The parent's side of ``./submit``: one request at a time, graded and counted under a lock."""

    def __init__(self, grader, budget, language, entry, feedback, log_dir, started):
        self.grader, self.budget, self.language, self.entry, self.feedback = grader, budget, language, entry, feedback
        self.spent, self.graded, self.refused = Spent(started=started), [], 0
        self.exhausted_at: float | None = None  # when the budget ran out
        self.lock, self.stop = threading.Lock(), threading.Event()
        self.record = open(log_dir / "submissions.jsonl", "w")  # noqa: SIM115 (closed by run_external)

    def _budget_line(self) -> str:
        limit = self.budget.submissions
        return f"[{self.spent.submissions} of {limit if limit is not None else 'unlimited'} submissions used]"

    def handle(self, files: dict) -> tuple[int, str]:
        if not isinstance(files, dict) or not files or not all(
                isinstance(k, str) and _safe_rel(k) and isinstance(v, str) for k, v in files.items()):
            return EXIT_ERROR, "submit: the request names no readable files inside the workspace"
        with self.lock:
            why = self.spent.exhausted(self.budget)
            if why is not None:
                self.refused += 1
                self.exhausted_at = self.exhausted_at or time.time()
                self._log({"refused": why, "files": sorted(files)})
                return EXIT_BUDGET, (f"submission refused: the {_NAMES.get(why, why)} budget is spent; nothing "
                                     f"was graded. {self._budget_line()}")
            self.spent.submissions += 1
            n = self.spent.submissions
        t0 = time.time()
        try:
            g = self.grader.grade(dict(files), self.language, **({"entry": self.entry} if self.entry else {}))
            g = g.model_copy(update={"submission": n, "eval_s": g.eval_s or time.time() - t0})
        except Exception as e:  # noqa: BLE001 (the grader's failure, not the agent's: recorded, never lost)
            digest = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()
            g = Graded(submission=n, solution_digest=digest, language=self.language, verdict="GRADER_ERROR",
                       reasons=["the grader failed; this is no verdict on the submission"],
                       message=f"{type(e).__name__}: {e}", eval_s=time.time() - t0)
        with self.lock:
            self.graded.append(g)
            if self.spent.exhausted(self.budget):
                self.exhausted_at = self.exhausted_at or time.time()
            self._log({"graded": g.model_dump(mode="json"), "files": sorted(files)})
            tail = self._budget_line()
        try:
            text = self.feedback(g)
        except Exception as e:  # noqa: BLE001 (a renderer bug must not cost the agent its feedback)
            text = default_feedback(g) + f"\n(feedback renderer failed: {type(e).__name__})"
        return EXIT_GRADED, f"{text}\n{tail}"

    def charge(self, logs: tuple[Path, Path], fmt: str, price: Price | None) -> tuple[Usage, float | None]:
        """Usage so far from the agent's own log (stdout, else stderr), booked into ``spent``."""
        usage, usd = Usage(), None
        for path in logs:
            with contextlib.suppress(OSError):
                usage, usd = parse_usage(path.read_text(errors="replace"), fmt)
            if usage.total or usd is not None:
                break
        usd = price.cost(usage) if usd is None and price is not None else usd
        with self.lock:
            self.spent.usage, self.spent.usd = usage, usd or 0.0
        return usage, usd

    def _log(self, rec: dict) -> None:
        self.record.write(json.dumps({"t": time.time(), **rec}) + "\n")
        self.record.flush()

    def serve(self, srv: socket.socket) -> None:
        srv.settimeout(0.1)
        while not self.stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:  # the 0.1 s timeout, mostly
                continue
            with conn, contextlib.suppress(OSError, ValueError, AttributeError):  # a broken or dead client
                conn.settimeout(30)
                data = bytearray()
                while len(data) <= _MAX_REQUEST and (chunk := conn.recv(1 << 16)):
                    data += chunk
                code, text = ((EXIT_ERROR, "submit: the submission is too large") if len(data) > _MAX_REQUEST
                              else self.handle(json.loads(data.decode()).get("files")))
                conn.sendall(json.dumps({"code": code, "text": text}).encode())


def _pump(src, path: Path) -> None:
    with open(path, "wb") as out:
        for chunk in iter(lambda: src.read1(1 << 16), b""):
            out.write(chunk)
            out.flush()
    src.close()


def _kill_group(proc: subprocess.Popen, grace_s: float) -> None:
    """SIGTERM to the agent's whole process group, ``grace_s`` for the leader to go, then SIGKILL to the group
    (also what runs after a normal exit: nothing the agent started outlives it)."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=wait)


def _listen(workspace: Path, default: list[str]) -> tuple[socket.socket, Path]:
    """The listening socket (in the workspace, or a private temp dir where that path is too long for AF_UNIX)
    and the ``submit`` script that talks to it."""
    sock_path = workspace / ".submit.sock"
    if len(os.fsencode(sock_path)) > 100:
        sock_path = Path(tempfile.mkdtemp(prefix="solbench-")) / "s"
    (workspace / "submit").write_text(_SUBMIT % {
        "python": shlex.quote(sys.executable), "ws": str(workspace), "sock": str(sock_path),
        "default": " ".join(default) or "none", "default_list": default})
    (workspace / "submit").chmod(0o755)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(sock_path))
    os.chmod(sock_path, 0o600)
    srv.listen(8)
    return srv, sock_path


def _argv(command: list[str] | str, workspace: Path, task_text: str) -> list[str]:
    if isinstance(command, str):
        return ["/bin/sh", "-c", command]
    subs = {"{workspace}": str(workspace), "{task_file}": str(workspace / "TASK.md"), "{task}": task_text}
    return [functools.reduce(lambda a, kv: a.replace(*kv), subs.items(), arg) for arg in command]


def run_external(command: list[str] | str, workspace: Path, task_text: str, template: dict[str, str],
                 grader: Grader, budget: Budget, language: str, env: dict | None = None,
                 log_format: str = "auto", *, feedback: Callable[[Graded], str] = default_feedback,
                 entry: str | None = None, log_dir: Path | None = None, timeout_s: float | None = None,
                 after_budget_s: float | None = 30.0, kill_grace_s: float = 1.0,
                 price: Price | None = None) -> ExternalResult:
    """Run ``command`` (argv list, ``{workspace}``/``{task_file}``/``{task}`` substituted; or a ``/bin/sh -c``
    string) as an agent on one problem. ``workspace`` is created (absent or empty), ``log_dir`` defaults to
    ``<workspace>-logs`` beside it. The wall limit is ``timeout_s``, else ``budget.wall_s``; ``after_budget_s``
    after the budget is spent the agent is stopped too (``None``: let it run on)."""
    parse_usage("", log_format)  # an unknown format fails here, not after the agent ran
    workspace = Path(workspace).resolve()
    log_dir = Path(log_dir).resolve() if log_dir else workspace.parent / f"{workspace.name}-logs"
    _prepare(workspace, log_dir, task_text, template)
    srv, sock_path = _listen(workspace, [entry] if entry else list(template)[:1])
    logs = stdout_path, stderr_path = log_dir / "agent.stdout", log_dir / "agent.stderr"
    wall = timeout_s if timeout_s is not None else budget.wall_s
    started = time.time()
    session = _Session(grader, budget, language, entry, feedback, log_dir, started)
    server = threading.Thread(target=session.serve, args=(srv,), daemon=True, name="solbench-submit")
    server.start()
    stopped, pumps, proc = "exit", [], None
    try:
        proc = subprocess.Popen(_argv(command, workspace, task_text), cwd=workspace, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=agent_env(env, workspace), start_new_session=True)
        pumps = [threading.Thread(target=_pump, args=io, daemon=True) for io in zip((proc.stdout, proc.stderr), logs)]
        for t in pumps:
            t.start()
        next_check = started + 1.0
        while stopped == "exit" and proc.poll() is None:
            time.sleep(0.05)
            now = time.time()
            if wall is not None and now - started >= wall:
                stopped = "timeout"
            elif after_budget_s is not None and session.exhausted_at and now - session.exhausted_at >= after_budget_s:
                stopped = "budget"
            elif (budget.tokens is not None or budget.usd is not None) and now >= next_check:
                next_check = now + 1.0
                session.charge(logs, log_format, price)
                stopped = "budget" if session.spent.exhausted(budget) in ("tokens", "usd") else stopped
    finally:
        if proc is not None:
            _kill_group(proc, kill_grace_s)  # on a stop, and always for what the agent left running
        session.stop.set()
        server.join()
        srv.close()
        sock_path.unlink(missing_ok=True)
        if sock_path.parent != workspace:
            sock_path.parent.rmdir()
        for t in pumps:
            t.join(timeout=2.0)
        session.record.close()
    if stopped == "exit" and session.refused:
        stopped = "budget"
    usage, usd = session.charge(logs, log_format, price)
    return ExternalResult(graded=list(session.graded), best=best_of(session.graded), exit_code=proc.returncode,
                          stopped=stopped, refused=session.refused, usage=usage, usd=usd,
                          wall_s=time.time() - started, workspace=workspace, log_dir=log_dir,
                          stdout_path=stdout_path, stderr_path=stderr_path)

