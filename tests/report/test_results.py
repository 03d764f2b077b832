"""The terminal listing of evaluations (report/results.py, report/why.py): it fits its width, says why each
failing row failed, keeps long names apart, and says once what this machine cannot run."""

from solbench.records.verdict import Evaluation, WorkloadResult
from solbench.report.results import fit, layout, listing
from solbench.report.why import error_line, workload_why

TRACEBACK = """  File "/x/site-packages/solbench/evaluate/candidate/process.py", line 245, in call
    result = self.invoke(inputs, msg["outputs"])
  File "/tmp/solbench-eval-ab12/solution/kernel.py", line 7, in run
    raise RuntimeError("bad grid")
RuntimeError: bad grid"""


def ev(solution="s", verdict="passed", workloads=(), language="triton", reasons=(), message=None):
    return Evaluation(problem="rmsnorm", problem_dir="", problem_digest="d", solution=solution, solution_digest="x",
                      language=language, hardware="h200", device="cuda", verdict=verdict, reasons=list(reasons),
                      message=message, workloads=list(workloads))


def w(uuid, verdict="passed", **kw):
    return WorkloadResult(uuid=uuid, verdict=verdict, **kw)


def text(lines):
    return [str(t) for t in lines]


def test_the_error_line_is_the_solutions_frame_and_the_exception():
    assert error_line(TRACEBACK) == "kernel.py:7 in run: RuntimeError: bad grid"
    syntax = "SyntaxError: expected ':' (syntax.py, line 3)"
    assert error_line(syntax + "\nmore") == syntax


def test_a_failed_comparison_names_its_worst_element_without_its_seed():
    failed = w("a", "incorrect_numerical", reasons=["incorrect_numerical"],
               message="out: 27.54% of elements within tolerance, 99.00% required",
               failure={"draw": 1, "seed": 123456789, "worst": {"output": "out", "index": [3, 7], "got": 1.5,
                                                                  "expected": 2.25}})
    why = workload_why(failed)
    assert why == "out: 27.54% of elements within tolerance, 99.00% required; worst out[3, 7]: got 1.5, expected 2.25"
    assert "123456789" not in why


def test_the_listing_fits_80_columns_and_says_why():
    evs = [ev("triton", "passed", [w("rmsnorm-llama31-70b-prefill-t8192", time_ms=0.0612, sol_ms=0.0559,
                                     baseline_ms=0.25, sol_score=0.87, baseline="compile")]),
           ev("cuda", "runtime_error", [w("rmsnorm-llama31-70b-prefill-t8192", "runtime_error",
                                          reasons=["exception"], message=TRACEBACK),
                                        w("rmsnorm-llama31-70b-prefill-t16384", "runtime_error",
                                          reasons=["exception"], message=TRACEBACK, warnings=["noisy_timing"])])]
    lines = text(listing(evs, width=80))
    assert all(len(line) <= 80 for line in lines)
    assert sum("why: exception; kernel.py:7 in run: RuntimeError: bad grid" in line for line in lines) == 1
    assert any("note: noisy_timing" in line for line in lines)
    rows = [line for line in lines if line.startswith("  rmsnorm-llama")]
    assert len(rows) == 3 and len({r.split()[0] for r in rows}) == 2  # the two shapes stay apart: their tails
    assert all(r.split()[0].endswith(("t8192", "t16384")) for r in rows)


def test_columns_are_left_out_least_needed_first_and_wide_keeps_them_all():
    titles = lambda width, wide=False: [c.title for c, _ in layout(width, wide)]  # noqa: E731
    assert titles(80) == ["workload", "T_k ms", "SOL", "T_b ms", "T_SOL ms", "verdict"]
    assert "bound" in titles(160) and titles(50)[-1] == "verdict" and "T_SOL ms" not in titles(50)
    assert titles(40, wide=True) == titles(200)


def test_solutions_this_machine_cannot_run_are_one_line():
    cuda = [ev(f"k{i}", "unsupported", [w("a", "unsupported", reasons=["language_unavailable"])], "cuda_cpp",
               ["language_unavailable"], "cuda_cpp: CUDA kernels need a CUDA device; this evaluation runs on the CPU")
            for i in range(17)]
    lines = text(listing(cuda + [ev("t", "passed", [w("a", interpreted=True)])], width=80))
    assert not any(line.startswith("rmsnorm / k") for line in lines)
    assert lines[-1].startswith("not run here: 17 solution(s) (17 cuda_cpp): they need a CUDA GPU")


def test_fit_keeps_head_and_tail():
    cut = fit("rmsnorm-llama31-70b-prefill-t16384", 20)
    assert len(cut) == 20 and cut.startswith("rmsnorm-l") and cut.endswith("t16384") and "…" in cut
    assert fit("short", 20) == "short"
