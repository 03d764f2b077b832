"""A scripted stand-in for an external agent CLI, for tests/test_agent_scaffold.py.

    python tests/scripted_agent.py --script solve-first-try|fix-after-feedback|spam|hang|no-submit

It behaves as an agent in the scaffold's workspace would: reads TASK.md, writes a solution file, runs
``./submit``, reads the feedback, maybe edits and resubmits. Its stdout is a Claude-Code-style stream-json log:
one ``assistant`` event per model turn (the first turn's message repeated, as Claude Code does once per content
block), and a final ``result`` event whose totals include one extra background call (``EXTRA_OUTPUT`` output
tokens) so a test can tell which source a parser used. ``--usage generic`` prints ``SOLBENCH_USAGE`` lines
instead; ``--no-result`` leaves the result event out.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

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


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--script", required=True,
                    choices=["solve-first-try", "fix-after-feedback", "spam", "hang", "no-submit"])
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
        child = subprocess.Popen([sys.executable, "-c", deaf])  # a child deaf to SIGTERM
        write("pids.txt", f"{os.getpid()} {child.pid}\n")
        log.turn("thinking forever")
        while True:
            time.sleep(1000)
    else:  # no-submit
        log.turn(f"task: {first}; I give up")
    log.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
