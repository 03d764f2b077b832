"""The GPU test set (pytest -m gpu): the bundled suite on the GPU, the timing protocol, failure isolation.

Set SOLBENCH_GPU_DB to reuse a database whose baselines were already measured (scripts/gpu-check.sh does).
"""

import gc
import os

import pytest
import torch

from solbench.evaluate.runner import EvalOptions, evaluate
from solbench.problems.solution import load_solution
from solbench.store.db import Store
from tests.conftest import inline_solution
from tests.paths import AXPY, FIXTURES, TESTS

pytestmark = pytest.mark.gpu
GPU = FIXTURES / "gpu"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = os.environ.get("SOLBENCH_GPU_DB") or str(tmp_path_factory.mktemp("gpu") / "gpu.db")
    return Store(path)


def _eval(problem, path, store=None, **kw):
    sol = load_solution(path, problem.name)
    return evaluate(problem, sol, EvalOptions(device="cuda", **kw), store=store)


def _suite():
    from solbench.problems.suite import select_problems

    return select_problems("starter")


@pytest.mark.bundled
@pytest.mark.parametrize("problem", _suite(), ids=lambda p: p.name)
def test_bundled_examples_pass_and_no_time_beats_sol(problem, store):
    """Every example solution passes on the GPU (one in a language not installed here is passed over), and nothing
    measured is faster than T_SOL but by the outputs' write-back that the L2 cache can hold past a kernel's end
    (``_deferred_share``); a kernel time under T_SOL is left unscored for the bound's review (``bound_suspect``)."""
    assert problem.example_solutions, f"{problem.name} ships no example solution"
    missing = []  # examples in a language not installed on this machine (the languages stage carries them)
    for path in problem.example_solutions:
        ev = _stored(problem, path, store) or _eval(problem, path, store)
        if ev.verdict == "unsupported" and "language_unavailable" in ev.reasons:
            missing.append(path.name)
            continue
        assert ev.verdict == "passed", [(w.uuid, w.verdict, w.message) for w in ev.workloads]
        gpu = [w for w in ev.workloads]
        assert len(gpu) >= 3
        for w in gpu:
            assert w.sol_ms and w.time_ms, w
            least = w.sol_ms * (1 - _deferred_share(problem, w))
            for label, t in (("kernel", w.time_ms), ("eager", w.eager_ms), ("compile", w.compile_ms),
                             ("baseline.py", w.baseline_file_ms)):
                if t is not None:
                    assert t >= least, f"{problem.name}/{w.uuid}: {label} {t:.4g} ms < T_SOL {w.sol_ms:.4g} ms"
            if w.time_ms < w.sol_ms:
                assert "bound_suspect" in w.warnings and w.sol_score is None, w
            assert w.eager_ms is not None, w  # the reference passes its own check on the GPU
            # torch.compile may fail on a reference (Inductor crashed on mamba2_chunk_scan with torch 2.11);
            # then the failure is recorded as a warning and T_b comes from the other baselines
            assert w.compile_ms is not None or any(x.startswith("compile_") for x in w.warnings), w
            assert "below_sol" not in w.reasons
    if len(missing) == len(problem.example_solutions):
        pytest.skip(f"no example's language is installed here: {missing}")


def _stored(problem, path, store):
    """With ``SOLBENCH_BUNDLED_STORED=1`` (``gpu-check.sh bundled``, after the main job wrote the same database): the
    latest stored evaluation of this example with default options on this GPU, of this problem, solution and
    harness (their digests) in this software, or None. The main job evaluates every starter example as this test
    would; checking its results here spares the GPU a second evaluation of each."""
    if os.environ.get("SOLBENCH_BUNDLED_STORED") != "1":
        return None
    from solbench.evaluate.baselines import harness_digest

    solution = load_solution(path, problem.name)
    want = {"problem_digest": problem.digest(), "solution_digest": solution.digest(), "device": "cuda",
            "device_name": torch.cuda.get_device_name(0)}
    for eid in reversed(store.evaluation_ids(problem=problem.name)):
        ev, _ = store.evaluation(eid)
        env = ev.environment
        if all(getattr(ev, k) == v for k, v in want.items()) and env.get("harness") == harness_digest() \
                and env.get("torch") == torch.__version__ and _default_options(problem, ev):
            print(f"{problem.name}/{path.name}: the stored evaluation {eid} of {ev.started}")
            return ev
    return None


def _default_options(problem, ev) -> bool:
    """Whether a stored evaluation ran as ``_eval`` runs one: every workload the GPU gets by default, the default
    baselines (eager measured on each workload a kernel passed), the default language proof and held stream."""
    from solbench.evaluate.runner import select_workloads

    if ev.verdict == "unsupported":
        return True
    default = EvalOptions(device="cuda")
    return ([w.uuid for w in ev.workloads] == select_workloads(problem, default)
            and ev.environment.get("profile_dsl") == "one" and ev.environment.get("timing_hold") == default.timing.hold
            and all(w.eager_ms is not None for w in ev.workloads if w.verdict == "passed"))


def _deferred_share(problem, w) -> float:
    """The share of a memory-bound workload's counted bytes that need not reach DRAM before its kernel ends: its
    outputs' writes, as far as the L2 cache holds them (dirty lines written back after the timed kernel, during the
    next flush). On an H100 (50 MB of L2) the honest RoPE kernels of the 84 MB 70b-tp8 workload, whose outputs are
    38 MB, took 0.0239 to 0.0249 ms against a T_SOL of 0.02504 ms (2026-12-06)."""
    from solbench.evaluate.trusted.footprint import tensor_bytes

    if w.bound != "memory" or not w.bytes:
        return 0.0
    d = problem.definition
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    return min(tensor_bytes(d, d.outputs, w.axes), l2) / w.bytes


def test_timing_repeats_within_one_percent(axpy):
    """The same kernel timed in two separate evaluations (fresh processes) agrees within 1%."""
    sol = AXPY / "solutions" / "torch_ok.py"
    a = _eval(axpy, sol, workloads=["axpy-gpu"], baselines=())
    b = _eval(axpy, sol, workloads=["axpy-gpu"], baselines=())
    ta, tb = a.workloads[0].time_ms, b.workloads[0].time_ms
    assert ta > 0.05
    assert abs(ta - tb) / min(ta, tb) < 0.01, (ta, tb)
    # a streaming kernel cannot beat the datasheet bandwidth; an honest one gets within 2x of it
    nbytes = a.workloads[0].bytes
    bw = nbytes / (ta * 1e-3)
    assert 0.5 * 4.8e12 < bw <= 4.8e12, bw


def test_launch_bound_workload_reports_graph_time(axpy):
    ev = _eval(axpy, AXPY / "solutions" / "torch_ok.py", workloads=["axpy-small"], baselines=())
    w = ev.workloads[0]
    # the graph replay is timed by events: compare it with the event time of the same calls
    assert w.graph_ms is not None and 0 < w.graph_ms <= (w.event_time_ms or w.time_ms) * 1.5, w.graph_error


def test_kernel_time_comes_from_cupti_records(axpy):
    """A launch-bound call is timed by its kernels' own CUPTI records: below its event interval by the events'
    overhead (about 2 us on the H200), not more; with the event clock asked for, the events time it."""
    from solbench.evaluate.timing.rounds import TimingConfig

    ev = _eval(axpy, AXPY / "solutions" / "torch_ok.py", workloads=["axpy-small"], baselines=())
    w = ev.workloads[0]
    assert w.verdict == "passed", w
    assert w.timing_method == "cupti", (w.timing_method, w.timing_notes)
    assert w.event_time_ms is not None and 0 < w.event_time_ms - w.time_ms < 0.005, (w.time_ms, w.event_time_ms)
    # event_gaps (an event interval more than 3 us + 5% above its span) is informational: the events' own
    # overhead around a launch-bound call is about 2.4 us on the H200, so 11 of 71 and 14 of 54 samples counted
    assert w.stray_records == 0
    ev2 = _eval(axpy, AXPY / "solutions" / "torch_ok.py", workloads=["axpy-small"], baselines=(),
                timing=TimingConfig(clock="cuda_events"))
    assert ev2.workloads[0].timing_method == "cuda_events"
    assert ev2.workloads[0].time_ms > w.time_ms


def test_side_stream_work_is_not_hidden(axpy):
    ev = _eval(axpy, GPU / "side_stream.py", workloads=["axpy-gpu"], baselines=())
    w = ev.workloads[0]
    # either the unsynchronised result is caught as wrong, or the hidden work shows up against wall time
    assert w.verdict != "passed" or "unaccounted_device_work" in w.warnings, w


def test_cuda_fault_is_a_verdict_and_the_next_evaluation_is_healthy(axpy):
    ev = _eval(axpy, GPU / "illegal_access.py", workloads=["axpy-small", "axpy-odd"], baselines=())
    assert [w.verdict for w in ev.workloads] == ["runtime_error", "runtime_error"], ev.workloads
    ok = _eval(axpy, AXPY / "solutions" / "torch_ok.py", workloads=["axpy-small"], baselines=())
    assert ok.verdict == "passed"


def test_a_harness_change_before_a_fault_later_in_a_batch_is_still_found(axpy):
    """The checked calls go as one batch; a call that loses the CUDA context ends the process before it checks
    itself, so the batch is made again one call at a time and the first call's change is found after it."""
    ev = _eval(axpy, GPU / "tamper_then_fault.py", workloads=["axpy-small"], baselines=(), static_checks=False)
    w = ev.workloads[0]
    assert w.verdict == "reward_hack" and "harness_tamper" in w.reasons, (w.verdict, w.reasons, w.message)


def test_out_of_memory_is_runtime_error_with_reason(axpy):
    ev = _eval(axpy, GPU / "oom.py", workloads=["axpy-small"], baselines=(), time_candidate=False)
    assert ev.verdict == "runtime_error" and "out_of_memory" in ev.workloads[0].reasons


def test_peak_memory_and_clocks_recorded(axpy):
    ev = _eval(axpy, AXPY / "solutions" / "torch_ok.py", workloads=["axpy-gpu"], baselines=())
    w = ev.workloads[0]
    # the candidate's own peak beyond its inputs: at least the 64M-element fp32 output it allocates
    assert w.peak_memory_bytes and w.peak_memory_bytes >= 4 * 67108864
    assert w.clocks and w.clocks[0].get("sm_clock_mhz")


def test_read_flush_evicts_l2():
    """A 16 MB read right after the flush is slower than the same read with the data left in L2."""
    from solbench.evaluate.timing.rounds import Flusher

    x = torch.randn(4 << 20, device="cuda")
    out = torch.empty((), device="cuda")
    flush = Flusher(60 << 20, torch.device("cuda"))

    def timed(do_flush):
        times = []
        for _ in range(30):
            torch.sum(x, dim=0, out=out)  # make x hot
            if do_flush:
                flush()
            torch.cuda._sleep(200_000)  # hold the stream (touching no memory) so both cases start fully queued
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            torch.sum(x, dim=0, out=out)
            e.record()
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e))
        return sorted(times)[len(times) // 2]

    hot, cold = timed(False), timed(True)
    # measured on the H200 here (2026-11-30): 10.4 us hot, 12.4 us after the read flush
    assert cold > hot * 1.1, (hot, cold)


def test_held_stream_times_the_device_not_a_slow_host():
    """A call that spends 300 us on the host before a short kernel: with the stream held (the default) the
    samples time the kernel; without the hold the event clock times the host's delay too, the CUPTI clock not."""
    import time

    from solbench.evaluate.timing.rounds import Flusher, TimingConfig
    from solbench.evaluate.timing.stopping import time_cuda

    x = torch.randn(1 << 20, device="cuda")
    out = torch.empty_like(x)
    flush = Flusher(60 << 20, torch.device("cuda"))

    def host_bound(k):
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 300e-6:
            pass
        return torch.mul(x, 2.0, out=out)

    held = time_cuda(host_bound, 1, flush, TimingConfig(), graph=True)
    free_events = time_cuda(host_bound, 1, flush, TimingConfig(hold=False, clock="cuda_events"))
    free_cupti = time_cuda(host_bound, 1, flush, TimingConfig(hold=False))
    # the kernel itself (timed in a CUDA graph, where the host does not take part) runs for a few microseconds
    assert held.median_ms < held.graph_ms + 0.05, (held.median_ms, held.graph_ms)
    # events around an unheld call time the host's delay; the kernels' own CUPTI records do not, hold or not
    assert free_events.median_ms > 0.2, free_events.median_ms
    assert free_cupti.median_ms < held.graph_ms + 0.05, (free_cupti.median_ms, held.graph_ms)
    # synchronised wall time still sees the host's 300 us, and so do the events of those calls, taken without
    # the hold: the wall-time check compares the two, so a slow host is not mistaken for hidden work
    assert min(held.wall_ms) > 0.3 and min(held.wall_event_ms) > 0.25
    assert all(w <= 1.5 * e + 0.2 for w, e in zip(held.wall_ms, held.wall_event_ms))


#: a reference whose largest GPU workload moves more bytes than this (inputs and outputs) needs several times as
#: much device memory for its checks (the float64 anchor among them): under pytest-xdist with ``--dist loadgroup``
#: (scripts/gpu-check.sh's refs stage with REFS_WORKERS above 1) such references run one after another in one
#: worker, the others beside them. Four workers without the group ran out of memory on 90 of 124 on an H100.
LARGE_REFERENCE_BYTES = 1 << 30


def _full():
    from solbench.problems.suite import select_problems

    problems = select_problems("full")
    if not torch.cuda.is_available():
        return problems  # skipped here: their work need not be counted
    from solbench.analysis.roofline import count_work

    large = pytest.mark.xdist_group("large_references")
    return [pytest.param(p, marks=large) if max(count_work(p, w).bytes for w in p.workloads_for("cuda"))
            > LARGE_REFERENCE_BYTES else p for p in problems]


@pytest.mark.parametrize("problem", _full(), ids=lambda p: p.name)
def test_reference_on_the_gpu_is_sound_and_not_degenerate(problem):
    """Every bundled problem on the GPU: the reference gives the declared outputs with a float64 anchor on its
    largest GPU workload, and the degenerate-task filter passes on its smallest and largest."""
    from solbench.analysis.roofline import count_work
    from solbench.evaluate.degenerate import check_problem, reference_self_check

    by_size = sorted(problem.workloads_for("cuda"), key=lambda w: count_work(problem, w).bytes)
    failure = None
    try:
        assert reference_self_check(problem, by_size[-1], "cuda") is None
        found = check_problem(problem, "cuda", [by_size[0], by_size[-1]] if len(by_size) > 1 else by_size)
        assert not found, [f"{f.code}: {f.detail}" for f in found]
    except Exception as exc:  # pytest's own outcomes (skip, fail) are not Exceptions: they pass through
        # the failure as text: its traceback would keep the frames' device tensors alive past this test, and the
        # next tests ran out of memory behind one that did (2026-12-06, H100)
        failure = f"{type(exc).__name__}: {exc}"[-3000:]
    gc.collect()
    torch.cuda.empty_cache()  # no cached blocks left for the next test (or another worker) to run out of
    if failure:
        pytest.fail(failure)


def test_profiler_language_proof(tmp_path):
    """With profile_dsl, an honest Triton solution's own kernels carry the device time; a decoy whose Triton
    kernel never runs is caught (by the profiler's no_dsl_kernel, or the ghost replay before it)."""
    from solbench.problems.problem import load_problem

    problem = load_problem(TESTS / "exploits" / "problem")
    honest = evaluate(problem, load_solution(TESTS / "honest" / "online_softmax_triton.py", problem.name),
                      EvalOptions(device="cuda", baselines=(), profile_dsl=True))
    assert honest.verdict == "passed", [(w.uuid, w.verdict, w.message) for w in honest.workloads]
    assert all(w.dsl_share is not None and w.dsl_share > 0.5 for w in honest.workloads), \
        [w.dsl_share for w in honest.workloads]
    assert "language_proof_unavailable" not in honest.warnings, honest.warnings
    decoy = evaluate(problem, load_solution(TESTS / "exploits" / "12_decoy_kernel_triton.py", problem.name),
                     EvalOptions(device="cuda", baselines=(), profile_dsl=True, static_checks=False))
    assert decoy.verdict == "reward_hack" and {"no_dsl_kernel", "ghost_replay"} & set(decoy.reasons), decoy.reasons
    # past the static scan: Triton only while a profiler records is a ghost-replay catch (the ghost call is not
    # profiled), and stopping the harness's profiler is profiler_tamper
    aware = evaluate(problem, load_solution(TESTS / "exploits" / "12_profiler_aware_triton.py", problem.name),
                     EvalOptions(device="cuda", baselines=(), static_checks=False))
    assert aware.verdict == "reward_hack" and "ghost_replay" in aware.reasons, aware.reasons
    stopper = tmp_path / "stops_the_profiler.py"
    stopper.write_text((TESTS / "honest" / "online_softmax_triton.py").read_text() + (
        "\n\nimport torch as _t\n_honest_run = run\n\n\n"
        "def run(*args):\n"
        "    if _t._C._autograd._profiler_enabled():\n"
        "        _t._C._autograd._disable_profiler()\n"
        "    return _honest_run(*args)\n"))
    stopped = evaluate(problem, load_solution(stopper, problem.name),
                       EvalOptions(device="cuda", baselines=(), static_checks=False))
    assert stopped.verdict == "reward_hack" and "profiler_tamper" in stopped.reasons, stopped.reasons


def test_each_solution_has_its_own_triton_cache(axpy):
    """Triton is imported in the zygote before a solution's cache directory is set: the cache a candidate
    compiles into must still be its own (in its private directory, seeded from and copied back to its solution's
    own cache by the trusted side), never one another solution shares."""
    src = ("import os\nimport torch\nimport triton\n\n"
           "def run(x, y, alpha):\n"
           "    d = str(triton.knobs.cache.dir) if hasattr(triton, 'knobs') else os.environ.get('TRITON_CACHE_DIR', '')\n"
           "    own = d == os.environ.get('TRITON_CACHE_DIR') and d.startswith(os.environ.get('TMPDIR', '?'))\n"
           "    return torch.add(y, x, alpha=alpha) if own else x\n")
    ev = evaluate(axpy, inline_solution(axpy, "cache_dir", src), EvalOptions(
        device="cuda", baselines=(), workloads=["axpy-small"], time_candidate=False, static_checks=False))
    assert ev.verdict == "passed", ev.workloads[0].message


def test_a_hang_costs_one_limit_on_the_gpu(tmp_path):
    """A solution that never returns, on a problem of two GPU workloads, with the default limit (``limits``): the
    first workload times out at its limit and the second is not run, so the evaluation costs one limit."""
    import time

    from solbench.evaluate.verdict import limits
    from solbench.problems.problem import load_problem

    problem = load_problem(TESTS / "exploits" / "problem_silu")
    hang = tmp_path / "hang.py"
    hang.write_text("import time\n\n\ndef run(x):\n    while True:\n        time.sleep(0.05)\n")
    t0 = time.perf_counter()
    ev = evaluate(problem, load_solution(hang, problem.name), EvalOptions(device="cuda", baselines=(),
                                                                          static_checks=False))
    took = time.perf_counter() - t0
    assert [w.verdict for w in ev.workloads] == ["timeout", "timeout"]
    assert ev.workloads[1].reasons == ["not_run_after_timeout"]
    start = ev.environment.get("worker_ready_s") or 0.0
    limit = ev.workloads[0].limit_s
    assert limit is not None and limits.COMPILE_ALLOWANCE_S <= limit < 60  # the reference takes milliseconds
    assert took < limit + start + 5, (took, limit, start)
