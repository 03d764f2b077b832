"""The audit (evaluate/timing/audit.py): a candidate's time held against the trusted side's own clock, what the trusted
side reads from outside a process (outside.py), the system-call filter (seccomp.py) and the bounded reply pipe."""

import os
import subprocess
import sys

import pytest

from solbench.evaluate.isolation import outside, seccomp
from solbench.evaluate.isolation.sandbox import MAX_REPLY_BYTES, CandidateProcess, SandboxSpec
from solbench.evaluate.runner import EvalOptions, evaluate
from solbench.evaluate.timing.audit import SHORT_LOOK
from solbench.evaluate.timing.audit_verdict import ABS_TOL_MS, CALL_TOL_MS, Audit, Calibration, resolution, verdict
from solbench.problems.problem import load_problem
from solbench.problems.solution import load_solution
from tests.paths import TESTS

BIG = TESTS / "exploits" / "problem_i21_big"


def _audit(ms, group=1):
    return Audit(method="stamps", trusted_ms=list(ms), group=group)


def test_a_median_far_below_the_audit_is_forged():
    out, why = verdict([0.6] * 50, _audit([1.0, 1.01, 0.99, 1.0, 1.02, 0.98] * 2, 4), Calibration(0.29, 0.001),
                       "cuda")
    assert out == "forged" and "1 ms" in why and "48 audited calls" in why


def test_a_groups_calls_share_the_brackets_tolerance():
    """A bracket's tolerance is shared among the calls of its group: the same per-call times are a forgery in
    groups of 16 and within the resolution in brackets of one call each."""
    xs = [0.1, 0.101, 0.099, 0.1] * 3
    assert verdict([0.03] * 50, _audit(xs, 16), Calibration(0.29, 0.001), "cuda")[0] == "forged"
    assert verdict([0.03] * 50, _audit(xs, 1), Calibration(0.29, 0.001), "cuda")[0] == "confirmed"
    assert resolution(_audit(xs, 16), Calibration(0.29, 0.001), "cuda") == pytest.approx(
        CALL_TOL_MS["cuda"] + ABS_TOL_MS["cuda"] / 16)


def test_an_honest_median_within_the_resolution_is_confirmed():
    out, _ = verdict([0.985] * 50, _audit([1.0, 1.01, 0.99, 1.0, 1.02, 0.98] * 2), Calibration(0.29, 0.001), "cuda")
    assert out == "confirmed"


def test_a_time_within_the_audits_resolution_is_confirmed_not_accused():
    """Where the audit's noise is larger than the time itself, a low median is no evidence of forgery; the
    resolution is recorded beside the time."""
    audit = Audit("cpu_time", [0.05, 0.2, -0.1, 0.3, 0.0, 0.1])
    assert verdict([0.01] * 50, audit, Calibration(0.12, 0.1), "cpu") == ("confirmed", None)
    assert resolution(audit, Calibration(0.12, 0.1), "cpu") >= 0.15
    assert verdict([], audit, Calibration(0.12, 0.1), "cpu")[0] == "unconfirmed"


def test_the_cpu_asks_only_for_gross_agreement():
    audit = Audit("cpu_time", [2.0, 2.1, 1.9, 2.05, 1.95, 2.0, 2.02, 1.98])
    assert verdict([0.9] * 20, audit, Calibration(4.0, 0.2), "cpu")[0] == "confirmed"  # a busy machine's spread
    assert verdict([0.2] * 20, audit, Calibration(4.0, 0.2), "cpu")[0] == "forged"


def test_outside_reads_a_processes_threads_and_cpu_time():
    child = subprocess.Popen([sys.executable, "-c", "import threading, time\n"
                              "t = threading.Thread(target=lambda: time.sleep(5)); t.start()\n"
                              "s = time.process_time()\nwhile time.process_time() - s < 0.2: pass\n"
                              "print('ready', flush=True); time.sleep(5)"], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        assert outside.candidate_pid(child.pid) == child.pid  # no PID namespace: the process itself
        u = outside.usage(child.pid)
        assert u.threads == 2 and u.processes == 1
        assert u.cpu_ns >= 0.15e9  # it spun for 0.2 s of CPU time, whatever the machine's load
        assert outside.wait_blocked(child.pid, 2.0)
        assert outside.seccomp_filters(child.pid) == 0
    finally:
        child.kill()
        child.wait()


def _in_child(seal: bool, action: str) -> int:
    """Exit status of a forked child that installs the filter and then tries ``action``."""
    pid = os.fork()
    if pid == 0:
        code = 9
        try:
            if seccomp.install(seal, native=True) is not None:
                os._exit(8)
            if action == "thread":
                import threading

                try:
                    threading.Thread(target=lambda: None).start()
                    code = 0
                except RuntimeError:
                    code = 1
            elif action == "exec":
                try:
                    os.execv("/bin/true", ["true"])
                except OSError:
                    code = 1
            elif action == "fork":
                try:
                    p = os.fork()
                    if p == 0:
                        os._exit(0)
                    os.waitpid(p, 0)
                    code = 0
                except OSError:
                    code = 1
            elif action == "inet":
                import socket

                try:
                    socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
                    code = 0
                except OSError:
                    code = 1
            elif action == "unix":
                import socket

                socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()
                code = 0
            elif action == "exec_memory":
                import mmap

                try:
                    mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC).close()
                    code = 0
                except OSError:
                    code = 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@pytest.mark.skipif(not seccomp.available(True), reason="seccomp filters cannot be loaded here")
@pytest.mark.parametrize("action", ["thread", "exec", "fork", "inet", "exec_memory"])
def test_a_sealed_process_cannot_start_threads_processes_programs_or_sockets(action):
    assert _in_child(True, action) == 1


@pytest.mark.skipif(not seccomp.available(False), reason="seccomp filters cannot be loaded here")
def test_an_unsealed_process_keeps_threads_and_local_sockets_but_not_the_network():
    assert _in_child(False, "thread") == 0
    assert _in_child(False, "unix") == 0
    assert _in_child(False, "inet") == 1


def test_a_reply_longer_than_the_limit_is_not_read_whole(tmp_path):
    """The reply pipe is read in bounded chunks: a line over the limit is dropped, never buffered without end."""
    script = f"import sys\nsys.stdout.write('x' * {MAX_REPLY_BYTES + (1 << 20)})\nsys.stdout.flush()\n"
    r, w = os.pipe()
    child = subprocess.Popen([sys.executable, "-c", script], stdout=w)
    os.close(w)
    proc = CandidateProcess(SandboxSpec(staged=str(tmp_path), workdir=str(tmp_path), env={}, device="cpu"),
                            tmp_path / "log")
    proc.proc, proc._reply_fd = child, r
    try:
        assert proc.read_line(30) is None
    finally:
        child.kill()
        child.wait()
        os.close(r)


@pytest.fixture(scope="module")
def big():
    return load_problem(BIG)


def test_an_honest_cpu_time_is_confirmed_by_the_audit(big):
    """4M-element axpy: about 2 ms on the CPU, within the audit's resolution: audited, never accused."""
    sol = load_solution(TESTS / "fixtures" / "problems" / "axpy" / "solutions" / "torch_ok.py", big.name)
    ev = evaluate(big, sol, EvalOptions(device="cpu", baselines=()))
    w = ev.workloads[0]
    assert ev.verdict == "passed", (w.reasons, w.message)
    assert w.audit_method == "cpu_time" and w.audit_calls and w.audit_calls >= SHORT_LOOK
    assert "time_forgery" not in ev.reasons
    assert ev.environment.get("seccomp") in (True, False)


def test_an_honest_cpu_solution_on_two_threads_is_not_taken_for_more(tmp_path):
    """A call on the two threads the job allows reads, from outside, its work and no more: OpenMP's workers sleep
    when a parallel region ends (``keeper.child_env``), where they spun for milliseconds and a 0.2 ms softmax read
    5.9 ms of CPU time, ``thread_injection`` for every workload of an honest solution."""
    softmax = load_problem(TESTS / "exploits" / "problem")
    (tmp_path / "softmax.py").write_text("import torch\n\n\ndef run(x, scale):\n"
                                         "    return torch.softmax(x * scale, dim=-1)\n")
    sol = load_solution(tmp_path / "softmax.py", softmax.name)
    ev = evaluate(softmax, sol, EvalOptions(device="cpu", baselines=(), cpu_threads=2))
    assert ev.verdict == "passed", [(w.uuid, w.reasons, w.message) for w in ev.workloads]
    assert all(w.audit_method == "cpu_time" and w.audit_calls for w in ev.workloads)


@pytest.mark.gpu
def test_an_honest_gpu_time_is_confirmed_by_the_trusted_clock(big):
    """On the GPU every timed workload of an honest solution is bracketed by the trusted side's %globaltimer stamps
    and agrees with the candidate's samples: confirmed, the bracket measuring the call (the same time to within
    the hand-over's noise, docs/SECURITY.md)."""
    sol = load_solution(TESTS / "fixtures" / "problems" / "axpy" / "solutions" / "torch_ok.py", big.name)
    ev = evaluate(big, sol, EvalOptions(device="cuda", baselines=()))
    assert ev.verdict == "passed", [(w.reasons, w.message) for w in ev.workloads]
    assert "time_unconfirmed" not in ev.warnings and "time_forgery" not in ev.reasons, \
        [(w.warnings, w.message) for w in ev.workloads]
    for w in ev.workloads:
        assert w.audit_method == "stamps" and w.audit_calls and w.audit_calls >= SHORT_LOOK * w.audit_group, w
        # the record keeps six decimals (timing/audit.py): the floor holds to within its rounding
        assert w.audit_resolution_ms >= ABS_TOL_MS["cuda"] / w.audit_group + CALL_TOL_MS["cuda"] - 5e-7
        assert 0.5 * w.time_ms - 0.1 < w.audit_ms < 2 * w.time_ms + 0.1, (w.audit_ms, w.time_ms)



@pytest.mark.gpu
def test_a_call_that_waits_on_the_device_inside_itself_is_confirmed_from_upper_bounds():
    """A solution that reads a result back inside its call (here a check of its inputs) is never queued whole
    behind the audit's hold, so every bracket is late: its time is confirmed from them as upper bounds
    (``time_bounded``) and scored, not left unconfirmed (the cuDNN example's handle, 2026-12-07)."""
    problem = load_problem(TESTS / "fixtures" / "problems" / "axpy")
    sol = load_solution(TESTS / "fixtures" / "gpu" / "synchronising.py", problem.name)
    ev = evaluate(problem, sol, EvalOptions(device="cuda", baselines=("eager",), workloads=["axpy-gpu"]))
    (w,) = ev.workloads
    assert ev.verdict == "passed", (w.reasons, w.message)
    assert "time_unconfirmed" not in w.warnings, w.message
    assert w.audit_method == "stamps_bound" and "time_bounded" in w.warnings and w.sol_score is not None, w

def test_a_sealed_candidate_keeps_the_thread_pools_its_libraries_use(tmp_path):
    """The candidate is forked from a zygote (whose thread pools the fork loses) and sealed against new threads:
    a solution whose call uses BLAS through numpy and a parallel torch reduction still answers (OpenBLAS spun
    for ever on workers that did not exist before the pools were kept single-threaded and warmed before the
    seal)."""
    src = tmp_path / "blas.py"
    src.write_text("import numpy\nimport torch\n\n\ndef run(x, y, alpha):\n"
                   "    a = numpy.ones((512, 512), dtype=numpy.float32)\n"
                   "    s = float((a @ a)[0, 0]) + float(torch.ones(1 << 20).sum())\n"
                   "    return alpha * x + y + 0.0 * s\n")
    problem = load_problem(TESTS / "fixtures" / "problems" / "axpy")
    ev = evaluate(problem, load_solution(src, problem.name), EvalOptions(device="cpu", baselines=(), time_candidate=False))
    assert ev.verdict == "passed", [(w.uuid, w.verdict, w.message) for w in ev.workloads]
    assert ev.environment.get("seccomp") in (True, False)


def test_a_refused_thread_ends_the_call_with_the_reason_said(big):
    """A solution that asks for more threads in a sealed candidate fails, and the message says why."""
    sol = load_solution(TESTS / "exploits" / "i21_07_more_threads.py", big.name)
    ev = evaluate(big, sol, EvalOptions(device="cpu", baselines=(), static_checks=False))
    w = ev.workloads[0]
    if ev.environment.get("seccomp") is not True:
        pytest.skip("no system-call filter on this machine")
    assert ev.verdict == "runtime_error" and "starts none of its own" in (w.message or ""), (ev.verdict, w.message)


def test_a_group_holds_about_two_ms_of_calls_within_its_memory():
    """A GPU bracket holds enough calls for ``GROUP_MS`` by the timing's median, at most ``MAX_GROUP``, at most as
    many slots as ``GROUP_BYTES`` (or a quarter of the free memory) holds, and at least one call."""
    from solbench.evaluate.timing.audit_gpu import GROUP_BYTES, GROUP_MS, MAX_GROUP, group_size

    free = 100 << 30
    assert group_size(0.002, 1 << 20, free) == MAX_GROUP  # a decode-sized call
    assert group_size(GROUP_MS / 8, 1 << 20, free) == 8
    assert group_size(0.17, 705 << 20, free) == GROUP_BYTES // (705 << 20)  # a 705 MB slot: memory decides
    assert group_size(0.17, 705 << 20, 8 << 30) == (2 << 30) // (705 << 20)  # a quarter of what is free
    assert group_size(5.0, 1 << 20, free) == 1  # a slow call: one per bracket
    assert group_size(0.01, 64 << 30, free) == 1  # a slot larger than the budget still gets one call
    assert group_size(0.0, 1 << 20, free) == MAX_GROUP  # no claim: the most calls


class _Ctx:
    class dev:  # noqa: N801 - stands for a torch.device
        type = "cuda"

    def phases(self, name):
        import contextlib

        return contextlib.nullcontext()


class _Sub:
    ctx, isolation = _Ctx(), "full"


def _looks(monkeypatch, audits: list[list[float]]) -> list[int]:
    """``confirm`` against audits that measure ``audits[i]`` on look i; the draw offsets it asked for."""
    from solbench.evaluate.timing import audit

    asked: list[int] = []

    def run(sub, uuid, draw, shapes, inplace, calib, recheck, n, claimed, first_draw=0, enough=None):
        asked.append(first_draw)
        return _audit(audits[len(asked) - 1], 4)

    monkeypatch.setattr(audit, "run", run)
    monkeypatch.setattr(audit, "calibration", lambda *a: Calibration(0.29, 0.001))
    return asked


def test_a_disagreement_is_audited_again_on_fresh_inputs_before_it_convicts(monkeypatch):
    """One audit disturbed (its brackets twice the work's time) and a second that agrees: confirmed, with the
    second's time; the second drew none of the first's inputs."""
    from solbench.evaluate.timing.audit import LOOK_DRAWS, confirm

    asked = _looks(monkeypatch, [[2.0] * 12, [1.0] * 12])
    record = confirm(_Sub(), "w", None, [], [], None, [0.98] * 30)
    assert asked == [0, LOOK_DRAWS] and record["audit_ms"] == 1.0 and record["audit_looks"] == 2


def test_a_time_below_both_audits_is_forged(monkeypatch):
    from solbench.evaluate.timing.audit import confirm
    from solbench.evaluate.trusted.outcomes import Rejected

    asked = _looks(monkeypatch, [[1.0] * 12, [1.01] * 12])
    with pytest.raises(Rejected) as e:
        confirm(_Sub(), "w", None, [], [], None, [0.5] * 30)
    assert e.value.codes == ["time_forgery"] and "1 ms, 1.01 ms" in str(e.value) and len(asked) == 2


def test_an_agreeing_audit_is_made_once(monkeypatch):
    from solbench.evaluate.timing.audit import confirm

    asked = _looks(monkeypatch, [[1.0] * 12])
    assert confirm(_Sub(), "w", None, [], [], None, [0.99] * 30)["audit_looks"] == 1 and asked == [0]


def test_a_group_rechecks_about_two_of_its_calls_against_the_reference():
    """In a bracket of one call, 40% of calls are judged against the reference; in a group of 64, two of them on
    average (the comparisons of a small workload's audit no longer grow with its group)."""
    from solbench.evaluate.timing.audit_recheck import RECHECK, recheck_share

    assert recheck_share(1) == RECHECK == recheck_share(5)
    assert recheck_share(64) * 64 == pytest.approx(2.0) and recheck_share(8) * 8 == pytest.approx(2.0)


def test_every_audited_call_is_checked_for_presence_whatever_the_share():
    """A call that left the sentinel in its outputs is always judged, in a group of any size."""
    import torch

    from solbench.evaluate.timing.audit_recheck import Recheck

    judged = []
    check = Recheck(lambda outs, inputs, after: judged.append(1) or None)
    for _ in range(20):
        check([torch.full((4,), float("nan"))], [], [], {"seed": 0}, 64)
    assert len(judged) == 20 == check.checked


def test_the_cpus_audit_judges_every_call():
    """On the CPU (one call per bracket) every audited call is judged against the reference, as every timed call
    is: a call answered cheaply and wrongly, which would pull the audit's low quantile down, is always found."""
    import torch

    from solbench.evaluate.timing.audit_recheck import Recheck

    judged = []
    every = Recheck(lambda outs, inputs, after: judged.append(1) or None, every=True)
    for _ in range(40):
        every([torch.ones(4)], [], [], {"seed": 0}, 1)
    assert len(judged) == 40 == every.checked
    drawn = Recheck(lambda outs, inputs, after: None)
    for _ in range(40):
        drawn([torch.ones(4)], [], [], {"seed": 0}, 1)
    assert drawn.checked < 40  # a share (0.4) elsewhere: the chance all 40 are drawn is 1e-16


def test_a_forgery_whose_second_audit_cannot_be_made_stands_convicted(monkeypatch):
    """A solution that lets the first audit see its work and then stalls the second (its host side past every
    hold) gains nothing: the first audit's finding stands."""
    from solbench.evaluate.timing import audit
    from solbench.evaluate.timing.audit import Unaudited, confirm
    from solbench.evaluate.trusted.outcomes import Rejected

    looks = []

    def run(sub, uuid, draw, shapes, inplace, calib, recheck, n, claimed, first_draw=0, enough=None):
        looks.append(first_draw)
        if len(looks) == 2:
            raise Unaudited("an audited call did not end within the candidate's time limit")
        return _audit([1.0] * 12, 4)

    monkeypatch.setattr(audit, "run", run)
    monkeypatch.setattr(audit, "calibration", lambda *a: Calibration(0.29, 0.001))
    with pytest.raises(Rejected) as e:
        confirm(_Sub(), "w", None, [], [], None, [0.5] * 30)
    assert e.value.codes == ["time_forgery"] and "second audit could not be made" in str(e.value)


def test_a_large_cpu_output_is_rechecked_on_a_sample_of_its_timed_calls():
    """On the CPU every timed call of a small workload is re-checked; past ``RECHECK_ALL_BELOW`` output elements
    (where one re-check costs seconds) the GPU's rule: ``RECHECKS_GPU`` at random and the round's last call."""
    import random

    from solbench.evaluate.trusted.outcomes import RECHECK_ALL_BELOW, RECHECKS_GPU, picks

    calls = list(range(20))
    assert picks(random.Random(1), calls, False, 1000) == calls
    big = picks(random.Random(1), calls, False, RECHECK_ALL_BELOW)
    assert len(big) == RECHECKS_GPU + 1 and big[-1] == 19 and set(big) <= set(calls)
    assert picks(random.Random(1), calls, True, 10) == picks(random.Random(1), calls, True, RECHECK_ALL_BELOW)


def test_the_sentinels_of_a_group_are_read_back_at_once_and_agree_with_one_call_at_a_time():
    import torch

    from solbench.evaluate.timing.audit_recheck import _rows_left, _unwritten, unwritten_calls

    ok = [torch.ones(3), torch.zeros(2, dtype=torch.int32)]
    nan = [torch.tensor([1.0, float("nan")]), torch.zeros(2, dtype=torch.int32)]
    ints = [torch.ones(3), torch.full((2,), torch.iinfo(torch.int32).max, dtype=torch.int32)]
    bools = [torch.full((2,), 2, dtype=torch.uint8).view(torch.bool)]
    half = [torch.tensor([1, 2], dtype=torch.uint8).view(torch.bool)]  # one flag written, one left: unwritten
    plain = [0.5, torch.empty(0)]
    calls = [ok, nan, ints, bools, half, plain]
    assert unwritten_calls(calls) == [_unwritten(c) for c in calls] == [False, True, True, True, True, False]
    assert unwritten_calls([plain]) == [False]
    # a group's copies out (``Slots.take_group``): each output of the calls a row of one tensor, read per output
    floats, ints, flags, empty = torch.ones(4, 3), torch.zeros(4, 2, dtype=torch.int32), torch.ones(4, 2).bool(), \
        torch.empty(4, 0)
    floats[1, 2] = float("nan")  # one element left: unwritten
    ints[2] = torch.iinfo(torch.int32).max  # every element the sentinel: unwritten
    flags.view(torch.uint8)[3, 1] = 2  # one flag of the row left: unwritten
    group = [[floats[j], ints[j], flags[j], empty[j], 0.5] for j in range(4)]
    assert _rows_left(group) == unwritten_calls(group) == [_unwritten(c) for c in group] == [False, True, True, True]
    assert _rows_left([[floats[0], 0.5], [floats[2], 0.5]]) is None  # not the rows in order: call by call
    assert unwritten_calls([[floats[0]], [floats[1]]]) == [False, True]


def test_a_first_audit_ends_early_only_where_its_slowest_bracket_supports_the_timing():
    """The short look: an honest time against brackets of the same work ends the audit; a forged one (below every
    bracket of the real work), or one bracket disturbed above what the timing can stand, lets it go on."""
    from solbench.evaluate.timing.audit_verdict import clearly_confirmed

    honest = _audit([1.0, 1.02, 0.99, 1.01], 4)
    assert clearly_confirmed([0.98] * 30, honest, "cuda")
    assert not clearly_confirmed([0.6] * 30, honest, "cuda")  # forged: the full audit decides, then convicts
    assert not clearly_confirmed([0.98] * 30, _audit([1.0, 1.02, 0.99, 1.6], 4), "cuda")  # one slow bracket
    assert not clearly_confirmed([], honest, "cuda") and not clearly_confirmed([0.98], _audit([], 4), "cuda")
    # at decode sizes the fixed tolerance (10 us per call, 0.2 ms per bracket over its 64 calls) is allowed
    assert clearly_confirmed([0.003] * 30, _audit([0.005, 0.006, 0.005, 0.0055], 64), "cuda")
    # whenever it ends an audit, the full verdict on the same brackets confirms too
    for a, claim, kind in ((_audit([1.0, 1.02, 0.99, 1.01], 4), 0.83, "cuda"),
                           (_audit([0.005, 0.006, 0.005, 0.0055], 64), 0.0, "cuda"),
                           (Audit("cpu_time", [2.0, 2.1, 1.9, 2.0]), 0.8, "cpu")):
        assert clearly_confirmed([claim] * 30, a, kind), (claim, kind)
        assert verdict([claim] * 30, a, Calibration(0.29, 0.001), kind)[0] == "confirmed", (claim, kind)
    assert not clearly_confirmed([0.5] * 30, Audit("cpu_time", [2.0, 2.1, 1.9, 2.0]), "cpu")


def test_a_short_audit_rechecks_proportionally_more_of_its_calls():
    from solbench.evaluate.timing.audit_recheck import Recheck

    for boost, want in ((1.0, 2.0), (3.0, 6.0)):
        judged = []
        check = Recheck(lambda outs, inputs, after: judged.append(1) or None, boost=boost)
        for _ in range(200):
            for _ in range(64):
                check([1.0], [], [], {"seed": 0}, 64, unwritten=False)
        assert abs(len(judged) / 200 - want) < 0.6 * want ** 0.5, (boost, len(judged))


def _stand_ins(monkeypatch, calls: list | None = None):
    """``audit.run``'s engine, slots and hand-over replaced by stand-ins (a CPU engine whose every bracket takes
    1 ms, recording each bracket's inputs in ``calls``); returns a subject for ``run``."""
    from solbench.evaluate.timing import audit

    class Engine:
        group = 1

        def __init__(self, sub, slots):
            pass

        def own_ms(self, sets):
            return 0.0

        def call(self, k, first, inputs, values):
            if calls is not None:
                calls.append(list(inputs))
            return [[1.0] for _ in inputs], [[] for _ in inputs], 1.0, False

        def finish(self, a, warm):
            pass

    class Slots:
        def __init__(self, *a):
            self.layout = type("L", (), {"n": 8})()

    class Ctx:
        class dev:  # noqa: N801 - stands for a torch.device
            type = "cpu"

        def seed_for(self, uuid, d):
            return d

        def phases(self, name):
            import contextlib

            return contextlib.nullcontext()

    class Sub:
        ctx = Ctx()

    monkeypatch.setattr(audit, "CpuAudit", Engine)
    monkeypatch.setattr(audit, "Slots", Slots)
    monkeypatch.setattr(audit, "_begin", lambda *a: None)
    monkeypatch.setattr(audit, "_end", lambda *a, **k: None)
    return Sub()


def test_the_audit_stops_after_the_short_look_only_when_told_it_is_enough(monkeypatch):
    """``run`` with a CPU engine stand-in: asked after each counted bracket from the SHORT_LOOK-th, it ends there
    when ``enough`` says so, and counts every bracket when it does not."""
    from solbench.evaluate.timing import audit

    sub = _stand_ins(monkeypatch)
    asked = []

    def enough(a):
        asked.append(len(a.trusted_ms))
        return True

    draw = lambda seed: [seed]  # noqa: E731
    short = audit.run(sub, "w", draw, [], [], Calibration(0.0, 0.0), None, 16, enough=enough)
    assert short.short and len(short.trusted_ms) == SHORT_LOOK and asked == [SHORT_LOOK]
    whole = audit.run(sub, "w", draw, [], [], Calibration(0.0, 0.0), None, 16, enough=lambda a: False)
    assert not whole.short and len(whole.trusted_ms) == 16


def test_only_counted_brackets_draw_and_none_of_them_sees_the_probe(monkeypatch):
    """The brackets not counted (``WARM_CALLS``) are handed the probe's inputs, drawn once; every counted bracket
    gets a draw of its own, made for it, and none of them is the probe's (a call that saw inputs before could
    answer them from memory)."""
    from solbench.evaluate.timing import audit

    calls: list = []
    sub = _stand_ins(monkeypatch, calls)
    drawn: list[int] = []

    def draw(seed):
        drawn.append(seed)
        return [("set", seed)]

    got = audit.run(sub, "w", draw, [], [], Calibration(0.0, 0.0), None, 16)
    warm, counted = calls[:audit.WARM_CALLS], calls[audit.WARM_CALLS:]
    probe = [("set", drawn[0])]
    assert len(got.trusted_ms) == len(counted) == 16
    assert all(inputs == [probe] for inputs in warm)
    assert len(drawn) == 1 + len(counted)  # the probe, then one draw per counted bracket
    seen = [x for inputs in counted for x in inputs]
    assert probe not in seen and len({x[0][1] for x in seen}) == len(seen)


BLIND = [0.0, 0.5, -0.4, 0.05, 0.6, -0.3, 0.02, 0.45, -0.35, 0.01, 0.55, -0.2]  # a noisy audit that saw nothing


def test_an_audit_that_saw_no_work_through_its_noise_is_followed_by_another_look(monkeypatch):
    """A first audit blind with noise (its time within a resolution that is its noise) confirms nothing: two
    more looks decide, and a forged time below both is convicted; an honest one is confirmed by the next look."""
    from solbench.evaluate.timing.audit import LOOK_DRAWS, confirm
    from solbench.evaluate.trusted.outcomes import Rejected

    asked = _looks(monkeypatch, [BLIND, [1.0] * 12, [1.02] * 12])
    with pytest.raises(Rejected) as e:
        confirm(_Sub(), "w", None, [], [], None, [0.08] * 30)
    assert e.value.codes == ["time_forgery"] and asked == [0, LOOK_DRAWS, 2 * LOOK_DRAWS]
    asked = _looks(monkeypatch, [BLIND, [1.0] * 12])
    record = confirm(_Sub(), "w", None, [], [], None, [0.98] * 30)
    assert record["audit_looks"] == 2 and record["audit_ms"] == 1.0 and len(asked) == 2


def test_a_small_call_within_the_fixed_tolerance_is_not_blind(monkeypatch):
    """A call too small for the audit to tell from nothing, audited without noise, is confirmed in one look; so
    is a noisy audit whose time stands clear of its noise."""
    from solbench.evaluate.timing.audit import confirm

    asked = _looks(monkeypatch, [[0.004, 0.005, 0.0045, 0.005] * 3])
    assert confirm(_Sub(), "w", None, [], [], None, [0.004] * 30)["audit_looks"] == 1 and asked == [0]
    clear = [2.0 + x for x in BLIND]  # the same noise around 2 ms: a time of zero would have been convicted
    asked = _looks(monkeypatch, [clear])
    assert confirm(_Sub(), "w", None, [], [], None, [1.95] * 30)["audit_looks"] == 1 and asked == [0]


def test_blind_looks_are_looked_past_a_few_times_and_the_last_confirms_nothing(monkeypatch):
    """Blind looks in a row: at most ``BLIND_LOOKS`` are looked past, and the last one allowed, blind too, leaves
    the time unconfirmed (unscored): a forged 0.08 ms is never confirmed by audits that could not tell it from
    nothing (it used to be, on the CPU machine under a load average of 5.5)."""
    from solbench.evaluate.timing.audit import BLIND_LOOKS, confirm

    asked = _looks(monkeypatch, [BLIND] * (BLIND_LOOKS + 2))
    record = confirm(_Sub(), "w", None, [], [], None, [0.08] * 30)
    assert len(asked) == BLIND_LOOKS + 1 == record["audit_looks"]
    assert record["audit_ms"] is None and "too noisy" in record["audit_unconfirmed"]


def test_the_trusted_sides_lack_of_device_memory_ends_the_audit_not_the_solution(monkeypatch):
    """Device memory that runs out on the trusted side in the middle of an audit (its draws, its copies out) ends
    the candidate's audit and reads as the audit's own limit (``OutOfRoom``, a time left unconfirmed), never as an
    exception the solution is failed for."""
    import torch

    from solbench.evaluate.timing import audit

    sub = _stand_ins(monkeypatch)
    ended = []
    monkeypatch.setattr(audit, "_end", lambda s, quiet=False: ended.append(quiet))

    def draw(seed):
        if seed > audit.AUDIT_DRAWS:  # the probe's draw fits; the first counted bracket's does not
            raise torch.OutOfMemoryError("CUDA out of memory")
        return [seed]

    with pytest.raises(audit.OutOfRoom) as raised:
        audit.run(sub, "w", draw, [], [], Calibration(0.0, 0.0), None, 16)
    assert raised.value.group == 1 and ended == [True]
    assert isinstance(raised.value, audit.Unaudited)


def test_an_audit_whose_groups_do_not_fit_is_made_again_one_call_per_bracket(monkeypatch):
    from solbench.evaluate.timing import audit

    asked = []

    def run(sub, *args, group=None, **kw):
        asked.append(group)
        if group is None:
            raise audit.OutOfRoom(8)
        return Audit(method="stamps", trusted_ms=[1.0] * 12, group=group)

    monkeypatch.setattr(audit, "run", run)
    got = audit._run_within_memory(_Sub(), "w", None, [], [], Calibration(0.0, 0.0), None, 12)
    assert asked == [None, 1] and got.group == 1
    monkeypatch.setattr(audit, "run", lambda *a, **k: (_ for _ in ()).throw(audit.OutOfRoom(1)))
    with pytest.raises(audit.OutOfRoom):  # a single call that does not fit: nothing smaller to try
        audit._run_within_memory(_Sub(), "w", None, [], [], Calibration(0.0, 0.0), None, 12)


def test_a_workloads_own_share_is_launched_once_behind_a_hold_sized_from_the_last(monkeypatch):
    """The trusted side's own share (``GpuAudit.own_ms``): the first workload's reps outlast the first hold and are
    launched again behind a longer one; the next workload's hold is sized from the host time they took, scaled to
    its twice as many calls where their copies in are one per call, so its reps are launched once; a group as
    large or smaller is sized from that one's."""
    import contextlib
    from types import SimpleNamespace

    from solbench.evaluate.timing import audit_gpu

    clock = [0.0]
    fills: list[int] = []
    monkeypatch.setattr(audit_gpu, "_OWN_HOST", {})
    monkeypatch.setattr(audit_gpu.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(audit_gpu.globaltimer, "hold", lambda s: None)
    monkeypatch.setattr(audit_gpu.globaltimer, "stamp", lambda stamps, i: None)
    monkeypatch.setattr(audit_gpu.globaltimer, "spans_ms", lambda stamps: [0.25] * audit_gpu.OWN_REPS)

    def fill_group(first, sets):  # copies one per call: 0.1 ms of the host's launches each
        fills.append(len(sets))
        clock[0] += 1e-4 * len(sets)

    def engine():
        a = object.__new__(audit_gpu.GpuAudit)
        a.torch = SimpleNamespace(cuda=SimpleNamespace(stream=lambda s: contextlib.nullcontext(),
                                                       current_stream=lambda dev: None))
        a.stream = SimpleNamespace(wait_stream=lambda s: None, synchronize=lambda: None)
        a.slots = SimpleNamespace(fill_group=fill_group)
        a.sub = SimpleNamespace(ctx=SimpleNamespace(flusher=lambda: None), subject={"dps": True})
        a.dev, a.stamps = "cuda:0", None
        a.own_hold_s = audit_gpu.FIRST_HOLD_S
        return a

    assert engine().own_ms([[]] * 8) == 0.25
    assert fills == [8] * (2 * audit_gpu.OWN_REPS)  # 4 ms of launches behind a 2 ms hold: launched again
    fills.clear()
    assert engine().own_ms([[]] * 16) == 0.25
    assert fills == [16] * audit_gpu.OWN_REPS
    fills.clear()
    assert engine().own_ms([[]] * 12) == 0.25 and fills == [12] * audit_gpu.OWN_REPS
    assert audit_gpu._own_host("cuda:0", 13) == audit_gpu._own_host("cuda:0", 16) > audit_gpu._own_host("cuda:0", 12)
    assert audit_gpu._own_host("cuda:1", 8) is None


def test_the_calls_not_counted_fill_one_bracket_of_a_group_and_three_of_single_calls():
    """``WARM_CALLS`` calls open an audit uncounted: three brackets of one call (the CPU, the calibration's single
    calls), one bracket of a group of three or more; a slow call's audit (fewer than ``AUDIT_CALLS``) one."""
    from solbench.evaluate.timing.audit import AUDIT_CALLS, WARM_CALLS, warm_brackets

    assert WARM_CALLS == 3
    assert warm_brackets(AUDIT_CALLS["cpu"], 1, cuda=False) == 3
    assert warm_brackets(AUDIT_CALLS["cuda"], 1, cuda=True) == 3
    assert warm_brackets(AUDIT_CALLS["cuda"], 2, cuda=True) == 2
    assert [warm_brackets(AUDIT_CALLS["cuda"], m, cuda=True) for m in (3, 32, 64)] == [1, 1, 1]
    assert warm_brackets(4, 1, cuda=True) == 1 and warm_brackets(4, 16, cuda=True) == 1


def test_a_group_audit_counts_every_bracket_after_its_first(monkeypatch):
    """On the GPU (a stand-in engine of groups of 8 calls) the first bracket alone is not counted: it gets the
    draw of sets the trusted side's own share was timed on (the probe's number), and each later one a draw of its
    own, none of them the first's, counted."""
    from solbench.evaluate.timing import audit

    calls: list = []
    sub = _stand_ins(monkeypatch, calls)
    sub.ctx.dev.type = "cuda"
    monkeypatch.setattr(audit.audit_gpu, "GpuAudit", lambda s, slots, m: _GroupEngine(m, calls))
    monkeypatch.setattr(audit, "_group", lambda *a: 8)
    probe = ["probe"]

    def draw(seed):
        return probe if seed == audit.AUDIT_DRAWS else [f"set-{seed}"]

    got = audit.run(sub, "u", draw, [], [], Calibration(0.0, 0.0), None, 4, claimed_ms=0.25)
    assert len(calls) == 5 and calls[0] == [draw(audit.AUDIT_DRAWS + j) for j in range(8)]
    assert all(x not in calls[0] for group in calls[1:] for x in group)
    assert len(got.trusted_ms) == 4 and got.calls == 32


class _GroupEngine:
    """A GPU engine stand-in: groups of ``group`` calls, each bracket 1 ms, recording each bracket's inputs."""

    def __init__(self, group, calls):
        self.group, self.calls = group, calls

    def own_ms(self, sets):
        return 0.0

    def call(self, k, first, inputs, values):
        self.calls.append(list(inputs))
        return [[1.0] for _ in inputs], [[] for _ in inputs], 1.0, False

    def finish(self, a, warm):
        pass


class _LateEngine(_GroupEngine):
    """A GPU engine stand-in whose every bracket is late (the call waits on the device inside itself): ``ms`` per
    bracket, never queued behind its hold."""

    def __init__(self, group, calls, ms):
        super().__init__(group, calls)
        self.ms = ms

    def call(self, k, first, inputs, values):
        outs, after, _, _ = super().call(k, first, inputs, values)
        return outs, after, self.ms, True


def test_late_brackets_are_kept_as_upper_bounds_and_their_calls_judged(monkeypatch):
    """Every bracket late: none counted, each past the first kept as an upper bound of the call's time, and every
    call of theirs judged like a counted one's (presence and the share re-checked)."""
    from solbench.evaluate.timing import audit

    calls: list = []
    sub = _stand_ins(monkeypatch, calls)
    sub.ctx.dev.type = "cuda"
    monkeypatch.setattr(audit.audit_gpu, "GpuAudit", lambda s, slots, m: _LateEngine(m, calls, 4.0))
    monkeypatch.setattr(audit, "_group", lambda *a: 2)
    judged: list = []
    got = audit.run(sub, "u", lambda seed: [seed], [], [], Calibration(0.5, 0.0), lambda *a: judged.append(1),
                    4, claimed_ms=1.0)
    warm = audit.warm_brackets(4, 2, True)
    assert got.trusted_ms == [] and got.late == len(calls) == warm + 8
    assert got.bounds == [(1.75, 2)] * 8  # (4 ms less the 0.5 ms hand-over) over 2 calls
    assert judged and got.rechecked == len(judged)
    bounded = got.bounded()
    assert bounded.method == "stamps_bound" and bounded.median_ms == 1.75 and bounded.calls == 16
    assert bounded.record()["audit_method"] == "stamps_bound"


def _late_looks(monkeypatch, bounds_ms: float, count: int = 12):
    """``confirm`` against audits whose every bracket was late, each bound ``bounds_ms`` per call."""
    from solbench.evaluate.timing import audit

    def run(sub, uuid, draw, shapes, inplace, calib, recheck, n, claimed, first_draw=0, enough=None):
        return Audit(method="stamps", bounds=[(bounds_ms, 1)] * count, late=count + 3)

    monkeypatch.setattr(audit, "run", run)
    monkeypatch.setattr(audit, "calibration", lambda *a: Calibration(0.29, 0.001))


def test_a_time_standing_against_every_upper_bound_is_confirmed_by_them(monkeypatch):
    """A synchronising call (every bracket late) whose timing stands against even its slowest upper bound is
    confirmed, the audit's method saying how (``stamps_bound``)."""
    from solbench.evaluate.timing.audit import confirm

    _late_looks(monkeypatch, 3.6)
    record = confirm(_Sub(), "w", None, [], [], None, [3.5] * 30)
    assert record["audit_method"] == "stamps_bound" and record["audit_ms"] == 3.6
    assert "audit_unconfirmed" not in record


def test_upper_bounds_above_the_time_leave_it_unconfirmed_never_forged(monkeypatch):
    """Upper bounds far above the timing cannot tell a forged time from the waits they hold: unconfirmed, with
    the bounds said, and no conviction."""
    from solbench.evaluate.timing.audit import confirm

    _late_looks(monkeypatch, 9.0)
    record = confirm(_Sub(), "w", None, [], [], None, [1.0] * 30)
    assert record["audit_ms"] is None and "as upper bounds 9 ms per call" in record["audit_unconfirmed"]
    _late_looks(monkeypatch, 3.6, count=2)  # too few bounds to stand for the audit
    assert confirm(_Sub(), "w", None, [], [], None, [3.5] * 30)["audit_ms"] is None
