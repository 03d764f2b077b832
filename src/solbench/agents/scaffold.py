"""Run an EXTERNAL agent CLI (Claude Code, OpenCode, Codex CLI, any command) on one problem.

The attempt's directory (``root``, made and removed by the caller) holds the agent's *box* (``workspace`` with
``TASK.md``, the starter files and ``./submit``; a private ``home`` and ``tmp``), a *run* directory with two Unix
sockets (``submit.sock`` to the grader, ``api.sock`` to the model proxy) and ``logs`` (``agent.stdout``,
``agent.stderr``, ``submissions.jsonl``). ``submit`` sends the files' text over its socket; the PARENT grades them
with ``grader.grade``, counts them against the budget and answers with the feedback text, which ``submit``
prints (exit 0 graded, 3 budget spent, 2 anything else). A socket rather than a request/response file pair: the
exchange is synchronous, the agent cannot read or forge another request's answer, and a dead parent shows at once
as a refused connection. Talking to the socket without ``./submit`` gains nothing: every check and count happens
in the parent.

With ``view`` (``jail.view_paths``) the agent runs in its sandbox (``jail``): its own user, PID, mount and network
namespaces, only its box writable, solbench's state hidden, the model API reachable only through the proxy
(``proxy``), and everything it started killed when it ends. Without, it runs as this user, with only its
environment scrubbed and its process group killed at the end. Either way its environment holds only ``_PASS_ENV``
plus what ``env`` names plus the proxy's address, its stdin is /dev/null, and its stdout/stderr reach the log
files through pipes the parent copies. Tokens and money are what the proxy counted from the provider's responses;
the agent's own log (:func:`solbench.agents.agent_logs.parse_usage`) can only raise them.
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
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from solbench.agents import jail, proxy
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
WS, RUN, DEFAULT = %(ws)r, %(run)r, %(default_list)r
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
    s.connect("/proc/self/fd/%%d/submit.sock" %% os.open(RUN, os.O_PATH))
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
    usage: Usage = Field(default_factory=Usage)  # the proxy's count, raised where the agent's log claims more
    usd: float | None = None  # likewise; None where no price is known and the log states no cost
    sandbox: Literal["namespaces", "none"] = "namespaces"
    proxy: dict = Field(default_factory=dict)  # the proxy's count, its calls and refusals (``Meter.summary``)
    log_usage: Usage = Field(default_factory=Usage)  # what the agent's own log claims
    log_usd: float | None = None
    disagreement: dict | None = None  # the proxy's count and the log's, where they differ
    wall_s: float = 0.0
    workspace: Path  # the agent's, with what it left there
    log_dir: Path  # outside the workspace: agent.stdout, agent.stderr, submissions.jsonl
    stdout_path: Path
    stderr_path: Path


class Layout:
    """Where an attempt's files are, under its root."""

    def __init__(self, root: Path):
        self.root, self.box, self.run, self.logs = root, root / "box", root / "run", root / "logs"
        self.workspace, self.home, self.tmp = self.box / "workspace", self.box / "home", self.box / "tmp"


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


def _prepare(lay: Layout, task_text: str, template: dict[str, str]) -> None:
    if lay.box.exists():
        raise ValueError(f"{lay.root} already holds an attempt")
    bad = [n for n in template if not _safe_rel(n) or n in ("TASK.md", "submit")]
    if bad:
        raise ValueError(f"template file names not allowed: {bad}")
    for d in (lay.workspace, lay.home, lay.tmp, lay.run, lay.logs):
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
    lay.root.chmod(0o700)  # private, whatever the umask
    (lay.workspace / "TASK.md").write_text(task_text)
    for name, text in template.items():
        (lay.workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (lay.workspace / name).write_text(text)


class _Session:
    """The parent's side of ``./submit``: one request at a time, graded and counted under a lock."""

    def __init__(self, grader, budget, language, entry, feedback, log_dir, started, meter):
        self.grader, self.budget, self.language, self.entry, self.feedback = grader, budget, language, entry, feedback
        self.spent, self.graded, self.refused, self.meter = Spent(started=started), [], 0, meter
        self.exhausted_at: float | None = None  # when the budget ran out
        self.lock, self.stop = threading.Lock(), threading.Event()
        self.record = open(log_dir / "submissions.jsonl", "w")  # noqa: SIM115 (closed by run_external)

    def _budget_line(self) -> str:
        limit = self.budget.submissions
        return f"[{self.spent.submissions} of {limit if limit is not None else 'unlimited'} submissions used]"

    def _exhausted(self) -> str | None:
        self.spent.usage, self.spent.usd = self.meter.usage(), self.meter.usd()
        return self.spent.exhausted(self.budget)

    def handle(self, files: dict) -> tuple[int, str]:
        if not isinstance(files, dict) or not files or not all(
                isinstance(k, str) and _safe_rel(k) and isinstance(v, str) for k, v in files.items()):
            return EXIT_ERROR, "submit: the request names no readable files inside the workspace"
        with self.lock:
            why = self._exhausted()
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
            if self._exhausted():
                self.exhausted_at = self.exhausted_at or time.time()
            self._log({"graded": g.model_dump(mode="json"), "files": sorted(files)})
            tail = self._budget_line()
        try:
            text = self.feedback(g)
        except Exception as e:  # noqa: BLE001 (a renderer bug must not cost the agent its feedback)
            text = default_feedback(g) + f"\n(feedback renderer failed: {type(e).__name__})"
        return EXIT_GRADED, f"{text}\n{tail}"

    def read_log(self, logs: tuple[Path, Path], fmt: str) -> tuple[Usage, float | None]:
        """What the agent's own log (stdout, else stderr) claims so far; booked as the meter's floor."""
        usage, usd = Usage(), None
        for path in logs:
            with contextlib.suppress(OSError):
                usage, usd = parse_usage(path.read_text(errors="replace"), fmt)
            if usage.total or usd is not None:
                break
        self.meter.claim(usage, usd)
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
    """SIGTERM to the process group, ``grace_s`` for its leader to go, then SIGKILL to the group. In the sandbox
    the group is the launcher and process 1, which passes SIGTERM on to the agent; once process 1 is gone the
    kernel kills everything left in the agent's PID namespace."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=wait)


def _listen(lay: Layout, default: list[str]) -> socket.socket:
    """The grader's listening socket in the run directory and the ``submit`` script that talks to it."""
    (lay.workspace / "submit").write_text(_SUBMIT % {
        "python": shlex.quote(sys.executable), "ws": str(lay.workspace), "run": str(lay.run),
        "default": " ".join(default) or "none", "default_list": default})
    (lay.workspace / "submit").chmod(0o755)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    fd = os.open(lay.run, os.O_PATH)
    try:  # through the directory's descriptor: a long temporary path still fits a Unix socket's address
        srv.bind(f"/proc/self/fd/{fd}/submit.sock")
    finally:
        os.close(fd)
    srv.listen(8)
    return srv


def _argv(command: list[str] | str, workspace: Path, task_text: str) -> list[str]:
    if isinstance(command, str):
        return ["/bin/sh", "-c", command]
    subs = {"{workspace}": str(workspace), "{task_file}": str(workspace / "TASK.md"), "{task}": task_text}
    return [functools.reduce(lambda a, kv: a.replace(*kv), subs.items(), arg) for arg in command]


def _launch(argv: list[str], lay: Layout, env: dict[str, str], view: dict | None
            ) -> tuple[subprocess.Popen, int | None, tuple[socket.socket, int] | None]:
    """Start the agent: in its sandbox (``view``), or as this user with the proxy on a port of this host.
    Returns the process, the sandbox's status pipe, or the host's listening socket and the run directory's
    descriptor its relay connects through (closed by the caller)."""
    if view is not None:
        env = {**env, "HOME": str(lay.home), "TMPDIR": str(lay.tmp), **proxy.agent_env(jail.PORT)}
        spec = {"box": str(lay.box), "run": str(lay.run), "workspace": str(lay.workspace), "argv": argv,
                "env": env, "hidden": view["hidden"], "readable": view["readable"], "port": jail.PORT,
                "api": "api.sock"}
        proc, status = jail.start(spec, subprocess.PIPE, subprocess.PIPE)
        line = jail.read_status(status, 60.0)
        if line != "ready":
            _kill_group(proc, 0.0)
            os.close(status)
            said = proc.stderr.read(4000).decode(errors="replace").strip().splitlines()
            why = (line or "").removeprefix("error ") or (said[-1] if said else "it did not answer")
            raise jail.SandboxError(f"the agent's sandbox could not be set up: {why}")
        return proc, status, None
    listener = socket.create_server(("127.0.0.1", 0))
    run_fd = os.open(lay.run, os.O_PATH)
    threading.Thread(target=jail.relay, args=(listener, f"/proc/self/fd/{run_fd}/api.sock"), daemon=True).start()
    env = {**env, **proxy.agent_env(listener.getsockname()[1])}
    proc = subprocess.Popen(argv, cwd=lay.workspace, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, start_new_session=True)
    return proc, None, (listener, run_fd)


def _watch(proc, session: _Session, budget: Budget, wall: float | None, after_budget_s: float | None,
           logs: tuple[Path, Path], log_format: str) -> str:
    """Wait for the agent; why it was stopped ("timeout", "budget"), or "exit" when it ended on its own."""
    started = session.spent.started
    next_check = started + 1.0
    while proc.poll() is None:
        time.sleep(0.05)
        now = time.time()
        if wall is not None and now - started >= wall:
            return "timeout"
        if after_budget_s is not None and session.exhausted_at and now - session.exhausted_at >= after_budget_s:
            return "budget"
        if (budget.tokens is not None or budget.usd is not None) and now >= next_check:
            next_check = now + 1.0
            session.read_log(logs, log_format)
        if session.meter.spent():
            return "budget"
    return "exit"


def _exit_code(proc: subprocess.Popen, status: int | None) -> int | None:
    """The agent's exit status: from the sandbox's status pipe, else the process's own."""
    code = proc.returncode
    if status is not None:
        while (line := jail.read_status(status, 2.0)) is not None:
            if line.startswith("exit "):
                code = int(line.split()[1])
        os.close(status)
    return code


def run_external(command: list[str] | str, root: Path, task_text: str, template: dict[str, str],
                 grader: Grader, budget: Budget, language: str, env: dict | None = None,
                 log_format: str = "auto", *, feedback: Callable[[Graded], str] = default_feedback,
                 entry: str | None = None, timeout_s: float | None = None, after_budget_s: float | None = 30.0,
                 kill_grace_s: float = 1.0, price: Price | None = None, view: dict | None = None,
                 routes: list[proxy.Route] = ()) -> ExternalResult:
    """Run ``command`` (argv list, ``{workspace}``/``{task_file}``/``{task}`` substituted; or a ``/bin/sh -c``
    string) as an agent on one problem, in the attempt directory ``root`` (see the module's docstring; the caller
    removes it). ``view``: ``{"hidden": [...], "readable": [...]}`` from ``jail.view_paths`` runs it in its
    sandbox, ``None`` as this user. ``routes``: the model APIs the proxy forwards to. The wall limit is
    ``timeout_s``, else ``budget.wall_s``; ``after_budget_s`` after the budget is spent the agent is stopped too
    (``None``: let it run on)."""
    parse_usage("", log_format)  # an unknown format fails here, not after the agent ran
    lay = Layout(Path(root).resolve())
    _prepare(lay, task_text, template)
    meter = proxy.Meter(price, budget.tokens, budget.usd)
    api = proxy.Proxy(list(routes), meter, str(lay.run)).start()
    srv = _listen(lay, [entry] if entry else list(template)[:1])
    logs = stdout_path, stderr_path = lay.logs / "agent.stdout", lay.logs / "agent.stderr"
    wall = timeout_s if timeout_s is not None else budget.wall_s
    started = time.time()
    session = _Session(grader, budget, language, entry, feedback, lay.logs, started, meter)
    server = threading.Thread(target=session.serve, args=(srv,), daemon=True, name="solbench-submit")
    server.start()
    stopped, pumps, proc, status, host = "exit", [], None, None, None
    try:
        proc, status, host = _launch(_argv(command, lay.workspace, task_text), lay,
                                         agent_env(env, lay.workspace), view)
        pumps = [threading.Thread(target=_pump, args=io, daemon=True) for io in zip((proc.stdout, proc.stderr), logs)]
        for t in pumps:
            t.start()
        stopped = _watch(proc, session, budget, wall, after_budget_s, logs, log_format)
    finally:
        if proc is not None:
            _kill_group(proc, kill_grace_s)  # on a stop, and always for what the agent left running
        if host is not None:
            host[0].close()
            os.close(host[1])
        session.stop.set()
        server.join()
        srv.close()
        api.close()
        for t in pumps:
            t.join(timeout=2.0)
        session.record.close()
    exit_code = _exit_code(proc, status)
    if stopped == "exit" and session.refused:
        stopped = "budget"
    log_usage, log_usd = session.read_log(logs, log_format)
    differs = log_usage != meter.counted or (log_usd is not None and abs(log_usd - meter.counted_usd) > 1e-9)
    return ExternalResult(
        graded=list(session.graded), best=best_of(session.graded), exit_code=exit_code, stopped=stopped,
        refused=session.refused, usage=meter.usage(),
        usd=meter.usd() if price is not None or log_usd is not None else None,
        sandbox="namespaces" if view is not None else "none", proxy=meter.summary(), log_usage=log_usage,
        log_usd=log_usd, disagreement={"proxy": meter.counted.model_dump(), "proxy_usd": meter.counted_usd,
                                       "log": log_usage.model_dump(), "log_usd": log_usd} if differs else None,
        wall_s=time.time() - started, workspace=lay.workspace, log_dir=lay.logs, stdout_path=stdout_path,
        stderr_path=stderr_path)
