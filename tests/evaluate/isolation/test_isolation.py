"""What a candidate can see and touch (evaluate/isolation/namespaces.py): nothing writable outside its private directory, and
neither the results database nor other evaluations' files visible."""

import json
import os
import tempfile
from pathlib import Path

import pytest

from solbench.evaluate.isolation.namespaces import namespaces_available
from solbench.evaluate.runner import EvalOptions, evaluate
from solbench.store.db import Store
from tests.conftest import inline_solution

needs_ns = pytest.mark.skipif(not namespaces_available(), reason="the candidate's isolation is unavailable here")

#: a solution that, on its first call, walks every path it can see and tries to write to each: it creates a file
#: in every directory and opens every regular file for appending (writing nothing); it reports what it managed,
#: and whether the paths it was told about exist, on its log. Its own processes' entries in /proc (/proc/<pid>,
#: /proc/self) are left out: they are knobs of those processes, not storage, and CUDA writes to them
WALKER = '''
import json, os, stat

_done = []
SECRETS = {secrets!r}


def _walk():
    private = os.path.realpath(os.environ["TMPDIR"])
    writable, seen = [], 0
    for root, dirs, files in os.walk("/", followlinks=False):
        if root == "/proc":  # its own processes' entries (CUDA writes there); the rest of /proc is walked
            dirs[:] = [d for d in dirs if not d.isdigit() and d not in ("self", "thread-self")]
        seen += 1
        probe = os.path.join(root, ".solbench-walk-probe")
        try:
            fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            os.close(fd)
            os.unlink(probe)
            writable.append(root)
        except OSError:
            pass
        for name in files:
            path = os.path.join(root, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue  # device nodes (/dev/null, the GPU's) and links are not storage
            seen += 1
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_APPEND))
                writable.append(path)
            except OSError:
                pass
    outside = [p for p in writable if not (p == private or p.startswith(private + "/"))]
    visible = {{p: os.path.exists(p) and (not os.path.isfile(p) or os.path.getsize(p) > 0) for p in SECRETS}}
    tmp = sorted(os.listdir(os.path.dirname(os.path.dirname(private))))
    print("WALK " + json.dumps({{"seen": seen, "outside": outside[:50], "inside": len(writable) - len(outside),
                                 "visible": visible, "tmp": tmp}}), flush=True)


def run(x, y, alpha):
    if not _done:
        _done.append(1)
        _walk()
    return alpha * x + y
'''


@needs_ns
def test_nothing_is_writable_outside_the_private_directory_and_secrets_are_invisible(axpy, tmp_path):
    other = Path(tempfile.mkdtemp(prefix="solbench-"))  # what another evaluation's directory looks like
    (other / "job-1.json").write_text('{"seed": 1}')
    db_dir = Path.home() / ".cache" / "solbench-isolation-test"
    db_dir.mkdir(parents=True, exist_ok=True)
    db = db_dir / f"results-{os.getpid()}.db"
    try:
        store = Store(db)
        secrets = [str(other / "job-1.json"), str(db)]
        sol = inline_solution(axpy, "walker", WALKER.format(secrets=secrets))
        # the walk reads the whole filesystem in one call: a limit of its own, not the workload's (30 s on an
        # idle machine, which a loaded one can need more than)
        ev = evaluate(axpy, sol, EvalOptions(device="cpu", baselines=(), time_candidate=False, draws=1,
                                             workloads=["axpy-small"], static_checks=False, workload_timeout_s=600),
                      store=store)
        assert ev.environment["sandbox"] == "namespaces"
        lines = [ln for ln in (ev.log or "").splitlines() if ln.startswith("WALK ")]
        assert lines, f"the walker reported nothing: {ev.verdict} {ev.workloads[0].message} {ev.log[-2000:]}"
        report = json.loads(lines[0][5:])
        print("walk report", {k: v for k, v in report.items() if k != "outside"})
        assert report["seen"] > 1000, report  # it did walk the filesystem
        assert report["outside"] == [], f"writable outside the private directory: {report['outside']}"
        assert report["inside"] >= 1  # and its own directory is writable
        assert report["visible"] == {p: False for p in secrets}, report["visible"]
        assert other.name not in report["tmp"], report["tmp"]
        assert ev.verdict == "passed", ev.workloads[0].message
    finally:
        import shutil

        shutil.rmtree(other, ignore_errors=True)
        shutil.rmtree(db_dir, ignore_errors=True)


@needs_ns
def test_the_candidate_keeps_no_capability_and_cannot_undo_its_mounts(axpy):
    src = ('import ctypes, os\n\n'
           'def run(x, y, alpha):\n'
           '    caps = [ln for ln in open("/proc/self/status") if ln.startswith("CapEff")][0].split()[1]\n'
           '    libc = ctypes.CDLL(None, use_errno=True)\n'
           '    rw = libc.mount(None, b"/", None, 32 | 4096, None)  # MS_REMOUNT | MS_BIND, read-write\n'
           '    un = libc.umount2(os.environ["TMPDIR"].encode(), 2)\n'
           '    ok = int(caps, 16) == 0 and rw != 0 and un != 0\n'
           '    return alpha * x + y if ok else x\n')
    ev = evaluate(axpy, inline_solution(axpy, "caps", src),
                  EvalOptions(device="cpu", baselines=(), time_candidate=False, draws=1, workloads=["axpy-small"],
                              static_checks=False))
    assert ev.verdict == "passed", ev.workloads[0].message


def test_a_zygote_told_not_to_isolate_does_not():
    """The zygote reports namespaces only where the worker asked for them and the probe works: asked not to, it
    says so, whatever the machine allows."""
    from solbench.evaluate.isolation.zygote import Zygote

    z = Zygote(False)
    try:
        assert z.namespaces is False
    finally:
        z.close()
