"""The language proof's bookkeeping: which kernels are the solution's, and their share of device time."""

import sys
import types

from solbench.evaluate.integrity.language import dsl_kernel_names, dsl_share


class JITFunction:  # stands in for triton.runtime.jit.JITFunction (matched by type name, as Triton's is)
    def __init__(self, fn):
        self.fn = fn


class Autotuner:
    def __init__(self, fn):
        self.fn = fn


def test_kernel_names_come_from_the_solutions_own_modules(tmp_path):
    def _rmsnorm_fwd():
        pass

    def _helper():
        pass

    mod = types.ModuleType("solbench_candidate_probe")
    mod.__file__ = str(tmp_path / "kernel.py")
    mod.k1 = JITFunction(_rmsnorm_fwd)
    mod.k2 = Autotuner(JITFunction(_helper))
    other = types.ModuleType("not_the_solution")
    other.__file__ = "/elsewhere/lib.py"
    other.k = JITFunction(lambda: None)
    sys.modules[mod.__name__] = mod
    sys.modules[other.__name__] = other
    try:
        assert dsl_kernel_names(str(tmp_path)) == {"_rmsnorm_fwd", "_helper"}
    finally:
        del sys.modules[mod.__name__], sys.modules[other.__name__]


def test_share_of_device_time():
    kernels = [("_rmsnorm_fwd", 30.0), ("void at::native::vectorized_elementwise_kernel<4>", 10.0),
               ("_rmsnorm_fwd_0d1d2d", 20.0)]
    assert dsl_share(kernels, {"_rmsnorm_fwd"}) == 50.0 / 60.0
    assert dsl_share(kernels, {"_other"}) == 0.0
    assert dsl_share([], {"_rmsnorm_fwd"}) is None


def test_profiler_runs_on_one_workload_chosen_by_the_seed():
    from types import SimpleNamespace

    from solbench.evaluate.worker import Context

    def _profiled(job, uuid):
        return Context.profiled(SimpleNamespace(job=job), uuid)

    pairs = [[0, f"w{i}"] for i in range(6)]
    picked = {seed: [u for _, u in pairs if _profiled({"pairs": pairs, "seed": seed}, u)] for seed in range(40)}
    assert all(len(p) == 1 for p in picked.values())  # default "one": the profiler starts once per solution
    assert len({p[0] for p in picked.values()}) > 1  # which one follows the secret seed, not the file's order
    job = {"pairs": pairs, "seed": 7}
    assert all(_profiled(dict(job, profile_dsl="all"), u)
               and not _profiled(dict(job, profile_dsl="off"), u) for _, u in pairs)


def test_profiler_session_records_without_importing_dynamo():
    """The profiled call's session must not pull Inductor and Dynamo into a fresh candidate (torch.profiler's
    wrapper does, at a cost of seconds per candidate on the H200 machine). Run in a fresh interpreter."""
    import subprocess

    code = (
        "import sys, torch\n"
        "from solbench.evaluate.integrity.language import profiler_session\n"
        "with profiler_session('cpu') as prof:\n"
        "    torch.ones(8) + 1\n"
        "names = [e.name for e in prof.function_events]\n"
        "assert any('add' in n for n in names), names\n"
        "assert 'torch._dynamo' not in sys.modules and 'torch._inductor' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_profiler_started_or_stopped_by_the_solution_is_tampering():
    """A solution that keeps a profiler of its own running (the harness's session would then fail to start), or
    stops the harness's during its call (no evidence), is caught; one that stops it and starts its own yields no
    kernels (the trusted side then warns that the proof was unavailable); an honest call is profiled, also after
    a caught stop. A fresh interpreter per case: profiler state is per process (and the candidate's process ends
    with os._exit, as here)."""
    import subprocess

    head = (
        "import os, sys, torch\n"
        "from solbench.evaluate.integrity.language import ProfilerTampered, profile_kernels, profiler_session\n"
        "def caught(call):\n"
        "    try:\n"
        "        profile_kernels(call, 'cpu')\n"
        "    except ProfilerTampered:\n"
        "        return True\n"
        "    return False\n"
    )
    cases = {
        "honest": "ok = not caught(lambda: torch.ones(4) + 1)\n"
                  "ok = ok and any('add' in n for n, _ in profile_kernels(lambda: torch.ones(4) + 1, 'cpu'))\n",
        # stopped and started anew inside the call: the new session's events are not evidence
        "restarted": "def swap():\n"
                     "    torch._C._autograd._disable_profiler()\n"
                     "    profiler_session('cpu').__enter__()\n"
                     "    torch.ones(4) + 1\n"
                     "ok = profile_kernels(swap, 'cpu') == []\n",
        "stopped": "ok = caught(lambda: torch._C._autograd._disable_profiler())\n"
                   "ok = ok and not caught(lambda: torch.ones(4) + 1)\n",
        "own profiler": "profiler_session('cpu').__enter__()\nok = caught(lambda: torch.ones(4) + 1)\n",
    }
    for name, body in cases.items():
        code = head + body + "sys.stdout.write('ok' if ok else 'missed'); sys.stdout.flush(); os._exit(0)\n"
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and done.stdout == "ok", (name, done.stdout, done.stderr[-2000:])
