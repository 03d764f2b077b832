"""A scripted stand-in for an external agent CLI, for tests/agents/test_agent_scaffold.py.

    python tests/agents/scripted_agent.py --script solve-first-try|fix-after-feedback|spam|hang|no-submit|probe|model

It behaves as an agent in the scaffold's workspace would: reads TASK.md, writes a solution file, runs
``./submit``, reads the feedback, maybe edits and resubmits. Its stdout is a Claude-Code-style stream-json log:
one ``assistant`` event per model turn (the first turn's message repeated, as Claude Code does once per content
block), and a final ``result`` event whose totals include one extra background call (``EXTRA_OUTPUT`` output
tokens) so a test can tell which source a parser used. ``--usage generic`` prints ``SOLBENCH_USAGE`` lines
instead; ``--no-result`` leaves the result event out.

Two scripts play an agent that attacks its sandbox (tests/agents/test_agent_sandbox.py). ``probe`` walks every path and
process it can see and tries to write to every directory, every mount point and the first files of each
directory; tries to read the database and the secret (``$PROBE_DB``, ``$PROBE_SECRET``), a file it is shown
(``$PROBE_READ``) and the parent's /proc entries (``$PROBE_PARENT``); to connect to ``$PROBE_PORT`` on 127.0.0.1
(where the host's model server listens), to a public address and to every Unix socket it finds; and leaves
behind a ``setsid`` child and a daemonised grandchild whose command lines hold ``$PROBE_MARK``. It prints one
line ``PROBE {json}``. ``model`` calls its model API through ``$OPENAI_BASE_URL`` and ``$ANTHROPIC_BASE_URL``
(each protocol streaming and not, ``--calls`` rounds), then forges a ``result`` event claiming 2 tokens; it
prints ``MODEL {json}`` with each call's HTTP status.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request

TURN = {"input_tokens": 100, "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 50,
        "output_tokens": 20}
EXTRA_OUTPUT = 7
COST_USD = 0.0123


class Log:
    def __init__(self, usage: str, result: bool):
        self.usage, self.result, self.turns = usage, result, 0

    def emit(self, ev: dict) -> None:
        print(json.dumps(ev), flush=True)

    def turn(self, text: str, repeat: bool = False) -> None:
        self.turns += 1
        if self.usage == "generic":
            print(f"turn {self.turns}: {text}", flush=True)
            print("SOLBENCH_USAGE " + json.dumps({"input": 1150, "cached": 1000, "output": 20}), flush=True)
            return
        if self.usage != "stream-json":
            print(text, flush=True)
            return
        ev = {"type": "assistant", "session_id": "ses_1",
              "message": {"id": f"msg_{self.turns}", "role": "assistant", "usage": dict(TURN),
                          "content": [{"type": "text", "text": text}]}}
        self.emit(ev)
        if repeat:  # the same message again, its tool_use block, same id and usage
            ev["message"]["content"] = [{"type": "tool_use", "name": "Bash", "input": {"command": "./submit"}}]
            self.emit(ev)

    def finish(self) -> None:
        if self.usage != "stream-json" or not self.result:
            return
        n = self.turns
        usage = {k: v * n for k, v in TURN.items()}
        usage["output_tokens"] += EXTRA_OUTPUT
        usage["server_tool_use"] = {"web_search_requests": 0}  # nested fields the parser must ignore
        self.emit({"type": "result", "subtype": "success", "session_id": "ses_1", "num_turns": n,
                   "total_cost_usd": COST_USD, "usage": usage})


def submit(*files: str) -> tuple[int, str]:
    p = subprocess.run(["./submit", *files], capture_output=True, text=True, check=False)
    return p.returncode, (p.stdout + p.stderr).strip()


def write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _writable(path: str, is_dir: bool, mark: str) -> bool:
    """Whether it can write there: a directory gets a file ``.probe-<mark>``, left in place for the test to look
    for from outside; a file is only opened for appending."""
    try:
        if is_dir:
            os.close(os.open(os.path.join(path, f".probe-{mark}"), os.O_WRONLY | os.O_CREAT, 0o600))
        else:
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK | os.O_NOFOLLOW))
    except OSError:
        return False
    return True


def _connects_unix(path: str) -> bool:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
    except OSError:
        return False
    finally:
        s.close()
    return True


def _mount_points() -> list[str]:
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            if len(parts) > 4:
                points.append(parts[4].encode().decode("unicode_escape"))
    return points


def _walk(mark: str, files_per_dir: int = 8) -> tuple[list[str], list[str], int]:
    """What it can write: every directory, the first ``files_per_dir`` regular files of each and every mount
    point, file mounts included (outside /proc and /sys; in /dev, directories only); every Unix socket it can
    connect to; how many paths it saw."""
    writable, sockets, seen, stack = [], [], 0, ["/"]
    for point in _mount_points():
        if os.path.isfile(point) and not point.startswith(("/proc", "/sys", "/dev")) and _writable(point, False, mark):
            writable.append(point)
    while stack:
        root = stack.pop()
        seen += 1
        if _writable(root, True, mark):
            writable.append(root)
        try:
            entries = list(os.scandir(root))
        except OSError:
            continue
        tried = 0
        for e in entries:
            seen += 1
            try:
                if e.is_dir(follow_symlinks=False):
                    if e.path not in ("/proc", "/sys"):
                        stack.append(e.path)
                elif e.is_file(follow_symlinks=False):
                    if tried < files_per_dir and not root.startswith("/dev") and not e.name.startswith(".probe-"):
                        tried += 1
                        if _writable(e.path, False, mark):
                            writable.append(e.path)
                elif not e.is_symlink() and stat.S_ISSOCK(e.stat(follow_symlinks=False).st_mode):
                    if _connects_unix(e.path):
                        sockets.append(e.path)
            except OSError:
                continue
    for d in ("/proc/1", "/proc/sys/kernel", "/sys/fs/cgroup"):
        if _writable(d, True, mark):
            writable.append(d)
    return writable, sockets, seen


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read(200).decode(errors="replace")
    except OSError as e:
        return f"error: {e.strerror}"


def _connects(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=2).close()
    except OSError:
        return False
    return True


def probe() -> dict:
    mark = os.environ.get("PROBE_MARK", "solbench-probe")
    sleeper = f"import os, time; os.setsid(); time.sleep(1000)  # {mark}"
    subprocess.Popen([sys.executable, "-c", sleeper])
    daemon = f"import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(1000)  # {mark}\n"
    subprocess.run([sys.executable, "-c", daemon])
    with open("/tmp/probe-" + mark, "w") as f:  # a private /tmp: the host never sees it
        f.write("x")
    writable, sockets, seen = _walk(mark)
    procs = {}
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        procs[pid] = (_read(f"/proc/{pid}/cmdline") or "").replace("\0", " ").strip()
    parent = os.environ.get("PROBE_PARENT", "0")
    return {"writable": writable, "sockets": sockets, "seen": seen, "processes": procs,
            "parent": {"exists": os.path.exists(f"/proc/{parent}"), "cmdline": _read(f"/proc/{parent}/cmdline")},
            "init_environ": _read("/proc/1/environ"), "db": _read(os.environ.get("PROBE_DB", "/nonexistent")),
            "secret": _read(os.environ.get("PROBE_SECRET", "/nonexistent")),
            "shown": _read(os.environ.get("PROBE_READ", "/nonexistent")),
            "host_server": _connects("127.0.0.1", int(os.environ.get("PROBE_PORT", "9"))),
            "internet": _connects("1.1.1.1", 80), "home": os.environ.get("HOME"), "tmpdir": os.environ.get("TMPDIR"),
            "keys": {k: v for k, v in os.environ.items() if k.endswith("_API_KEY")}, "cwd": os.getcwd()}


def _call(url: str, body: dict, headers: dict) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"content-type": "application/json", **headers})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def model(calls: int) -> dict:
    oa, an = os.environ["OPENAI_BASE_URL"], os.environ["ANTHROPIC_BASE_URL"]
    key = {"authorization": "Bearer " + os.environ.get("OPENAI_API_KEY", "")}
    msgs = [{"role": "user", "content": "write the kernel"}]
    statuses = []
    for _ in range(calls):
        for stream in (False, True):
            statuses.append(_call(f"{oa}/chat/completions", {"model": "m", "messages": msgs, "stream": stream},
                                  key)[0])
            statuses.append(_call(f"{an}/v1/messages", {"model": "m", "max_tokens": 50, "messages": msgs,
                                                        "stream": stream},
                                  {"x-api-key": os.environ.get("ANTHROPIC_API_KEY", "")})[0])
    return {"statuses": statuses}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--script", required=True,
                    choices=["solve-first-try", "fix-after-feedback", "spam", "hang", "no-submit", "probe", "model"])
    ap.add_argument("--calls", type=int, default=1, help="model: rounds of four calls")
    ap.add_argument("--file", default="kernel.py")
    ap.add_argument("--usage", default="stream-json", choices=["stream-json", "generic", "none"])
    ap.add_argument("--no-result", action="store_true")
    ap.add_argument("--spam", type=int, default=5)
    ap.add_argument("--delay", type=float, default=0.0, help="seconds to think before starting")
    ap.add_argument("--code-file", default=None, help="solve-first-try: submit this file's text (a real kernel)")
    a = ap.parse_args()
    log = Log(a.usage, not a.no_result)
    if a.usage == "stream-json":
        log.emit({"type": "system", "subtype": "init", "session_id": "ses_1", "cwd": os.getcwd(),
                  "env_probe": os.environ.get("FAKE_API_KEY")})
    else:
        print("env_probe=" + json.dumps(os.environ.get("FAKE_API_KEY")), flush=True)
    with open("TASK.md") as f:
        task = f.read()
    first = task.splitlines()[0] if task else ""
    time.sleep(a.delay)

    if a.script == "solve-first-try":
        if a.code_file:
            with open(a.code_file) as f:
                write(a.file, f.read())
        else:
            write(a.file, "def run(x):\n    return x  # GOOD\n")
        code, fb = submit()
        log.turn(f"task: {first}; submitted, exit {code}", repeat=True)
        log.turn(f"feedback: {fb}")
    elif a.script == "fix-after-feedback":
        write(a.file, "def run(x):\n    return None  # BAD\n")
        code, fb = submit(a.file)
        log.turn(f"first try exit {code}; feedback: {fb}", repeat=True)
        if "passed=False" in fb:  # only the feedback says it failed
            write(a.file, "def run(x):\n    return x  # GOOD\n")
            code, fb = submit(a.file)
            log.turn(f"second try exit {code}; feedback: {fb}")
    elif a.script == "spam":
        codes = []
        for i in range(a.spam):
            write(a.file, f"# attempt {i}\n" + ("# GOOD\n" if i % 2 else "# BAD\n"))
            code, fb = submit()
            codes.append(code)
            log.turn(f"attempt {i} exit {code}; feedback: {fb}")
        print("SPAM_CODES " + json.dumps(codes), flush=True)
    elif a.script == "hang":
        deaf = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(1000)"
        deaf += f"  # {os.environ.get('PROBE_MARK', 'hang')}"  # how a test finds it from outside
        child = subprocess.Popen([sys.executable, "-c", deaf])  # a child deaf to SIGTERM
        write("pids.txt", f"{os.getpid()} {child.pid}\n")
        log.turn("thinking forever")
        while True:
            time.sleep(1000)
    elif a.script == "probe":
        print("PROBE " + json.dumps(probe()), flush=True)
    elif a.script == "model":
        print("MODEL " + json.dumps(model(a.calls)), flush=True)
        log.emit({"type": "result", "subtype": "success", "session_id": "ses_1", "total_cost_usd": 0.0,
                  "usage": {"input_tokens": 1, "output_tokens": 1}})  # a forged total: 2 tokens
        return 0
    else:  # no-submit
        log.turn(f"task: {first}; I give up")
    log.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
