"""The external agent's sandbox and its model proxy, attacked by a scripted agent (tests/agents/scripted_agent.py): it
walks every path and process it can see, tries to write everywhere, to read the database, the run's secret and
the parent's /proc entries, to reach the network and to outlive its attempt; and it calls its model through the
proxy, then forges its own log. The sandbox tests skip where user namespaces are not available."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from solbench.agents import jail, proxy, run_secret
from solbench.agents.scaffold import Layout, run_external
from solbench.agents.session import Setup, agent_view
from solbench.agents.types import Budget, Price, Usage
from solbench.errors import UserError
from solbench.evaluate.isolation.sandbox import namespaces_available
from solbench.store.db import Store
from tests.agents.agents_loopback import LoopbackServer, reply
from tests.agents.test_agent_scaffold import TASK, TEMPLATE, FakeGrader, _alive_with

needs_namespaces = pytest.mark.skipif(not namespaces_available(),
                                      reason="user namespaces are not available here: no agent sandbox to test")
#: what the loopback model charges per call: 1000 input tokens (200 of them cached), 50 output
PER_CALL = Usage(input=1000, cached=200, output=50)
PRICE = Price(input=3.0, cached=0.3, output=15.0)


def _under(path: str, root: Path) -> bool:
    return path == str(root) or path.startswith(str(root) + "/")


def _attempt(root: Path, script: str, view, env=None, routes=(), budget=None, args=()):
    return run_external([sys.executable, "{workspace}/agent.py", "--script", script, *args], root, TASK, TEMPLATE,
                        FakeGrader(), budget or Budget(submissions=3, wall_s=300), "pytorch", env=env, view=view,
                        routes=list(routes), price=PRICE)


def _line(res, tag: str) -> dict:
    for line in res.stdout_path.read_text().splitlines():
        if line.startswith(tag + " "):
            return json.loads(line[len(tag) + 1:])
    raise AssertionError(f"no {tag} line; stderr: {res.stderr_path.read_text()[-2000:]}")


@needs_namespaces
def test_the_agent_sees_and_writes_nothing_outside_its_box_and_dies_with_its_attempt(tmp_path, monkeypatch):
    monkeypatch.setenv("SOLBENCH_CACHE", str(tmp_path / "cache"))
    store = Store(tmp_path / "results.db")
    secret = run_secret.load_or_create(store.path, "exp", store.conn)
    secret_file = run_secret.secret_path(store.path, "exp")
    shown = tmp_path / "tools" / "cli.txt"  # what --agent-read shows: read-only, even under the hidden /tmp
    shown.parent.mkdir()
    shown.write_text("the agent's own tool")
    daemon = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # a daemon's socket in a directory it is shown
    daemon.bind(str(shown.parent / "daemon.sock"))
    daemon.listen(8)
    view = agent_view(Setup(external="agent", external_read=(str(shown.parent),)), store)
    mark = f"probe{os.getpid()}x{time.monotonic_ns()}"
    with LoopbackServer() as srv:
        env = {"PROBE_MARK": mark, "PROBE_PARENT": str(os.getpid()), "PROBE_DB": str(store.path),
               "PROBE_SECRET": str(secret_file), "PROBE_PORT": str(srv.port), "PROBE_READ": str(shown)}
        res = _attempt(tmp_path / "attempt", "probe", view, env=env)
        assert srv.calls == 0  # the host's model server was out of reach
    daemon.close()
    r = _line(res, "PROBE")
    box = Layout(tmp_path / "attempt").box
    assert r["seen"] > 1000  # it did walk the filesystem
    run = Layout(tmp_path / "attempt").run
    assert sorted(r["sockets"]) == [str(run / "api.sock"), str(run / "submit.sock")]  # no other way out
    # writable: its box, and the private /tmp and /dev/shm of its own mount namespace
    outside = [p for p in r["writable"] if not _under(p, box)]
    assert all(p.startswith(("/tmp", "/dev/shm")) for p in outside), outside
    for d in outside:  # what it wrote there never reached this machine's directories
        assert not os.path.exists(os.path.join(d, f".probe-{mark}")), d
    assert (box / "workspace" / f".probe-{mark}").exists()  # a write it could make did land
    assert not Path(f"/tmp/probe-{mark}").exists()
    assert _under(r["home"], box) and _under(r["tmpdir"], box) and _under(r["cwd"], box)
    # other processes: only its own namespace's, none of this machine's
    own = Path(f"/proc/{os.getpid()}/cmdline").read_bytes().decode(errors="replace").replace("\0", " ").strip()
    assert len(r["processes"]) < 10 and own not in r["processes"].values(), r["processes"]
    assert re.fullmatch(r"\S+ -m solbench\.agents\.jail \d+ \d+", r["processes"]["1"])  # its own process 1
    assert not r["parent"]["exists"] or r["parent"]["cmdline"] != own
    assert r["init_environ"].startswith("error")
    # solbench's state: the database and the run's secret are out of sight
    assert r["db"].startswith("error") or r["db"] == ""
    assert r["secret"].startswith("error") and str(secret) not in json.dumps(r)
    assert r["shown"] == "the agent's own tool" and not any(_under(p, shown.parent) for p in r["writable"])
    assert not r["host_server"] and not r["internet"]
    assert set(r["keys"].values()) == {proxy.PLACEHOLDER_KEY}
    # everything it started is gone with it, the setsid child and the daemonised grandchild included
    assert _alive_with(mark) == []
    assert res.sandbox == "namespaces"


@pytest.mark.parametrize("sandboxed", [pytest.param(True, marks=needs_namespaces), False],
                         ids=["sandbox", "unsandboxed"])
def test_tokens_are_counted_by_the_proxy_and_a_forged_log_does_not_lower_them(tmp_path, sandboxed):
    usage = {"input": PER_CALL.input, "cached": PER_CALL.cached, "output": PER_CALL.output}
    with LoopbackServer(default=lambda body: reply("ok", **usage)) as srv:
        routes = [proxy.Route("openai", srv.openai_base_url, "sk-real-openai"),
                  proxy.Route("anthropic", srv.anthropic_base_url, "sk-real-anthropic")]
        view = agent_view(Setup(external="agent", external_sandbox=sandboxed), None)
        res = _attempt(tmp_path / "attempt", "model", view, routes=routes, args=("--calls", "2"))
        requests = list(srv.requests)
    assert _line(res, "MODEL")["statuses"] == [200] * 8
    calls = len(requests)
    assert calls == 8 and sum(bool(r.body.get("stream")) for r in requests) == 4
    expected = Usage(input=calls * PER_CALL.input, cached=calls * PER_CALL.cached, output=calls * PER_CALL.output)
    assert Usage.model_validate(res.proxy["counted"]) == expected  # streamed and whole responses alike
    assert res.usage == expected and res.usd == pytest.approx(PRICE.cost(expected))
    assert res.log_usage.total == 2 and res.disagreement is not None  # the forged result event: recorded only
    # the real keys went upstream; the placeholder never did
    for r in requests:
        sent = r.headers.get("authorization", "") + r.headers.get("x-api-key", "")
        assert "sk-real-" in sent and proxy.PLACEHOLDER_KEY not in sent
    streamed_chat = [r.body for r in requests if r.protocol == "openai" and r.body.get("stream")]
    assert all(b["stream_options"]["include_usage"] for b in streamed_chat)


def test_the_proxy_refuses_a_request_once_the_budget_is_spent(tmp_path):
    """Unit level: the proxy on its Unix socket, reached through the relay, with a 2000-token budget."""
    with LoopbackServer(default=lambda body: reply("ok", input=1000, cached=0, output=50)) as srv:
        meter = proxy.Meter(PRICE, tokens=2000)
        api = proxy.Proxy([proxy.Route("openai", srv.openai_base_url, "k")], meter, str(tmp_path)).start()
        listener = socket.create_server(("127.0.0.1", 0))
        threading.Thread(target=jail.relay, args=(listener, str(tmp_path / "api.sock")), daemon=True).start()
        base = proxy.agent_env(listener.getsockname()[1])["OPENAI_BASE_URL"]
        statuses = []
        for _ in range(4):
            req = urllib.request.Request(f"{base}/chat/completions", method="POST",
                                         data=json.dumps({"model": "m", "messages": []}).encode())
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    statuses.append(r.status)
            except urllib.error.HTTPError as e:
                statuses.append(e.code)
                body = json.loads(e.read())
        listener.close()
        api.close()
        assert srv.calls == 2
    assert statuses == [200, 200, 403, 403] and "tokens budget" in body["error"]["message"]
    assert meter.refused == 2 and meter.usage().total == 2100  # the call in progress may pass the limit
    meter.claim(Usage(input=1, output=1), 0.0)  # a log claiming less changes nothing
    assert meter.usage().total == 2100
    meter.claim(Usage(input=5000, output=1), None)  # one claiming more raises the count
    assert meter.usage().input == 5000


def test_an_agent_without_namespaces_is_refused_unless_asked(monkeypatch):
    import solbench.evaluate.isolation.sandbox as sandbox

    monkeypatch.setattr(sandbox, "namespaces_available", lambda: False)
    with pytest.raises(UserError, match="--unsandboxed-agent"):
        agent_view(Setup(external="agent"), None)
    assert agent_view(Setup(external="agent", external_sandbox=False), None) is None


def test_a_directory_that_holds_solbench_state_cannot_be_shown(tmp_path):
    with pytest.raises(ValueError, match="cannot be shown"):
        jail.view_paths([str(tmp_path / "db" / "results.db")], [str(tmp_path)])
    hidden, readable = jail.view_paths([str(tmp_path / "results.db")], [str(tmp_path / "tools")])
    assert str(tmp_path / "results.db") in hidden and str((tmp_path / "tools").resolve()) in readable
    assert "/tmp" in hidden and os.path.expanduser("~") in hidden


@needs_namespaces
def test_a_sandbox_that_cannot_be_built_says_why(tmp_path):
    spec = {"box": str(tmp_path / "missing"), "run": str(tmp_path), "workspace": str(tmp_path), "argv": ["true"],
            "env": {}, "hidden": [], "readable": [], "port": jail.PORT, "api": None}
    proc, status = jail.start(spec, None, None)
    line = jail.read_status(status, 60)
    proc.wait()
    os.close(status)
    assert line.startswith("error the agent's sandbox:") and "missing" in line


@needs_namespaces
def test_the_agent_cannot_write_a_file_past_its_limit_or_dump_core(tmp_path):
    """The agent gets a candidate's rlimits that an agent's runtime tolerates: no core dump, and no file larger
    than the spec's ``max_file_bytes`` (here 1 MiB: writing 2 MiB fails)."""
    box, run = tmp_path / "box", tmp_path / "run"
    (box / "ws").mkdir(parents=True)
    run.mkdir()
    code = ("import resource, sys; print(resource.getrlimit(resource.RLIMIT_CORE), flush=True); "
            "open('big', 'wb').write(b'x' * (2 << 20))")
    hidden, readable = jail.view_paths([])  # as an attempt's: the Python installation shown, wherever it lies
    spec = {"box": str(box), "run": str(run), "workspace": str(box / "ws"), "argv": [sys.executable, "-c", code],
            "env": {"PATH": os.environ.get("PATH", "")}, "hidden": hidden, "readable": readable, "port": jail.PORT,
            "api": None, "max_file_bytes": 1 << 20}
    proc, status = jail.start(spec, subprocess.PIPE, subprocess.PIPE)
    assert jail.read_status(status, 60) == "ready"
    end = jail.read_status(status, 120)
    out, err = proc.communicate(timeout=60)
    os.close(status)
    # a process that ignores SIGXFSZ (Python does) gets EFBIG from the write instead of the signal
    assert end == f"exit {-signal.SIGXFSZ}" or (end == "exit 1" and b"File too large" in err), (end, err[-2000:])
    assert b"(0, 0)" in out and (box / "ws" / "big").stat().st_size <= 1 << 20
