"""What a graded submission tells its agent: nothing a held-out workload's run printed or failed with."""

from solbench.agents.grader import graded_from
from solbench.analysis.heldout import HELDOUT_PREFIX
from solbench.records.verdict import Evaluation, WorkloadResult

SECRET = "shape (7, 99991)"


def _evaluation(hidden_verdict: str, visible_verdict: str = "passed", log: str = f"x.shape = {SECRET}") -> Evaluation:
    workloads = [WorkloadResult(uuid="public-1", verdict=visible_verdict, message="out: 40% within tolerance"
                                if visible_verdict != "passed" else None)]
    if hidden_verdict:
        workloads.append(WorkloadResult(uuid=f"{HELDOUT_PREFIX}ab12", verdict=hidden_verdict,
                                        message=f"expected {SECRET}"))
    verdicts = [w.verdict for w in workloads]
    worst = next((v for v in ("compile_error", "incorrect_shape", "incorrect_numerical") if v in verdicts), "passed")
    return Evaluation(problem="p", problem_dir="", problem_digest="d", solution="s", solution_digest="s",
                      language="triton", hardware="cpu", device="cpu", verdict=worst, workloads=workloads, log=log)


def test_a_held_out_failure_is_told_by_its_verdict_alone():
    g = graded_from(_evaluation("incorrect_shape"), 1)
    assert g.message == "a held-out workload: incorrect_shape" and g.log_tail is None


def test_the_log_is_withheld_once_a_held_out_workload_ran():
    g = graded_from(_evaluation("passed", visible_verdict="incorrect_numerical"), 1)
    assert g.message == "out: 40% within tolerance" and g.log_tail is None and not g.passed


def test_the_log_is_shown_where_no_held_out_workload_ran():
    assert SECRET in graded_from(_evaluation("", visible_verdict="incorrect_numerical"), 1).log_tail
    built_failed = _evaluation("compile_error", visible_verdict="compile_error", log="error: expected ';'")
    assert graded_from(built_failed, 1).log_tail == "error: expected ';'"
