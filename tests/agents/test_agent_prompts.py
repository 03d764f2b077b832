"""Prompts: the task statement of a bundled problem, template overrides, chip variants, feedback, starters."""

import ast
import re

import pytest

from solbench.agents.prompts import (
    PACKAGED_TEMPLATES,
    ProblemBrief,
    budget_note,
    find_template,
    fmt_us,
    language_template,
    render_feedback,
    render_system,
    render_task,
)
from solbench.agents.types import Budget, Graded, Spent, WorkloadFeedback
from solbench.analysis.roofline import count_work, sol_time
from solbench.errors import UserError
from solbench.hardware.registry import detect, get_hardware
from solbench.problems.problem import load_problem


@pytest.fixture(scope="module")
def rmsnorm():
    return load_problem("rmsnorm")


@pytest.fixture(scope="module")
def h200_brief(rmsnorm):
    return ProblemBrief.build(rmsnorm, "triton", "h200")


@pytest.fixture(scope="module")
def cpu_brief(rmsnorm):
    return ProblemBrief.build(rmsnorm, "pytorch", "cpu", dps=False)


def _row(text: str, uuid: str) -> str:
    rows = [ln for ln in text.splitlines() if ln.startswith("|") and f"`{uuid}`" in ln]
    assert len(rows) == 1, uuid
    return rows[0]


@pytest.mark.parametrize("hw,device", [("h200", "cuda"), ("cpu", "cpu")])
def test_task_shows_reference_signature_and_every_visible_workload_with_its_bound(rmsnorm, hw, device):
    brief = ProblemBrief.build(rmsnorm, "triton", hw)
    text = render_task(brief)
    assert rmsnorm.reference_source.strip() in text
    assert "def run(x, weight, eps, out):" in text and "Destination-passing style" in text
    assert "| `out` | output | bfloat16 | [num_tokens, hidden_size] |" in text
    assert rmsnorm.definition.description in text and "**triton**" in text
    spec = detect("cpu") if hw == "cpu" else get_hardware(hw)
    ceilings = spec.ceilings(scale_to_max_clock=True)
    visible = rmsnorm.workloads_for(device)
    assert visible and [w.uuid for w in brief.workloads] == [w.uuid for w in visible]
    for w in visible:  # T_SOL and the bound, as the roofline computes them
        sol = sol_time(count_work(rmsnorm, w), ceilings)
        row = _row(text, w.uuid)
        assert f"| {fmt_us(sol.sol_s * 1e6)} | {sol.bound} (" in row
        assert ", ".join(f"{k}={v}" for k, v in w.axes.items()) in row
    for w in rmsnorm.workloads:
        if w not in visible:
            assert w.uuid not in text  # the other device's workloads are not the task
    assert "$" not in re.sub(r"\$\d|\$[A-Z]", "", text.split("## The chip")[1])  # every placeholder filled


def test_bounds_differ_by_chip(h200_brief, cpu_brief):
    h200 = {w.uuid: w for w in h200_brief.workloads}
    assert h200["rmsnorm-llama31-8b-prefill-t16384"].bound == "memory"
    assert h200["rmsnorm-llama31-8b-decode-t1"].bound == "latency"
    # 2 x 16384 x 4096 bf16 bytes (+ the weight) over 4.8 TB/s
    assert h200["rmsnorm-llama31-8b-prefill-t16384"].sol_us == pytest.approx(2 * 16384 * 4096 * 2 / 4.8e12 * 1e6,
                                                                              rel=1e-3)
    assert [w.uuid for w in cpu_brief.workloads] == ["rmsnorm-cpu-t4-h256"]


def test_chip_variant_is_chosen(h200_brief, cpu_brief, rmsnorm):
    h200_text, cpu_text = render_task(h200_brief), render_task(cpu_brief)
    assert "wgmma" in h200_text and "132 SMs" in h200_text and "4.8 TB/s" in h200_text and "60 MiB" in h200_text
    assert "wgmma" not in cpu_text and "Triton's interpreter here" in cpu_text
    assert h200_brief.chip_templates[0] == "chips/h200.md" and "chips/cpu.md" in cpu_brief.chip_templates
    # a chip without its own file gets the generic one (h100-sxm: no chips/h100-sxm.md, no chips/hopper.md)
    h100 = ProblemBrief.build(rmsnorm, "triton", "h100-sxm", workloads=["rmsnorm-llama31-8b-decode-t1"])
    assert h100.chip_templates[:2] == ["chips/h100-sxm.md", "chips/hopper.md"]
    text = render_task(h100)
    assert "each byte read and written once" in text and "wgmma" not in text and "50 MiB" in text


def test_user_templates_override_packaged_ones(tmp_path, h200_brief, rmsnorm):
    (tmp_path / "task.md").write_text("custom task for $name on $hardware_id\n$signature\n$workload_table\n$chip_notes\n$language_primer\n")
    text = render_task(h200_brief, template_dirs=[tmp_path])
    assert text.startswith("custom task for rmsnorm on h200\ndef run(x, weight, eps, out):\n| 1 |")
    assert find_template("task.md", template_dirs=[tmp_path]) == tmp_path / "task.md"
    assert find_template("system.md", template_dirs=[tmp_path]) == PACKAGED_TEMPLATES / "system.md"
    # chips: the most specific name wins across directories; a user's chip file beats the packaged one
    (tmp_path / "chips").mkdir()
    (tmp_path / "chips" / "default.md").write_text("USER DEFAULT $chip_name\n")
    assert "USER DEFAULT" not in render_task(h200_brief, template_dirs=[tmp_path])  # chips/h200.md is packaged
    (tmp_path / "chips" / "hopper.md").write_text("USER HOPPER $sm_count SMs\n")
    h100 = ProblemBrief.build(rmsnorm, "triton", "h100-sxm", workloads=["rmsnorm-llama31-8b-decode-t1"])
    assert "USER HOPPER 132 SMs" in render_task(h100, template_dirs=[tmp_path])
    (tmp_path / "chips" / "h200.md").write_text("USER H200 $dram_tbps TB/s\n")
    assert "USER H200 4.8 TB/s" in render_task(h200_brief, template_dirs=[str(tmp_path)])
    # and a language primer
    (tmp_path / "languages").mkdir()
    (tmp_path / "languages" / "triton.md").write_text("MY PRIMER\n```python\n$signature\n    pass\n```\n")
    assert "MY PRIMER" in render_task(h200_brief, template_dirs=[tmp_path])
    assert language_template("triton", rmsnorm, template_dirs=[tmp_path]) == "def run(x, weight, eps, out):\n    pass\n"


def test_unknown_language_is_one_clear_error(rmsnorm):
    with pytest.raises(UserError, match="languages/cuda.md"):
        language_template("cuda", rmsnorm)


def test_held_out_workloads_never_enter_the_brief(rmsnorm):
    import copy

    prob = copy.copy(rmsnorm)
    hidden = rmsnorm.workloads[1].model_copy(update={"uuid": "heldout-deadbeef", "label": "held-out num_tokens=77"})
    prob.workloads = [*rmsnorm.workloads, hidden]
    brief = ProblemBrief.build(prob, "triton", "h200")
    assert "heldout-deadbeef" not in [w.uuid for w in brief.workloads]
    text = render_task(brief)
    assert "heldout" not in text and "held-out" not in text and "num_tokens=77" not in text


def test_system_prompt(h200_brief):
    text = render_system(h200_brief)
    assert "triton" in text and h200_brief.chip["chip_name"] in text and "`run(...)`" in text
    assert "$" not in text.replace("```", "")
    assert "the target chip" in render_system()


def test_starters_parse_and_have_the_signature(rmsnorm, cpu_brief):
    for language in ("triton", "pytorch", "python"):
        code = language_template(language, rmsnorm)
        fn = next(n for n in ast.parse(code).body if isinstance(n, ast.FunctionDef) and n.name == "run")
        assert [a.arg for a in fn.args.args] == ["x", "weight", "eps", "out"]
    assert "@triton.jit" in language_template("triton", rmsnorm)
    # returning style: outputs allocated from the inputs' shapes and returned
    code = language_template("pytorch", cpu_brief)
    assert "def run(x, weight, eps):" in code and "return out" in code
    assert "out = torch.empty((x.shape[0], x.shape[1]), dtype=torch.bfloat16, device=x.device)" in code
    ast.parse(code)
    two = language_template("pytorch", load_problem("rmsnorm_backward"), dps=False)
    assert "return grad_x, grad_weight" in two and "grad_weight = torch.empty((grad_out.shape[1],)," in two
    ast.parse(two)


def test_problem_without_outputs_updates_inputs_in_place():
    prob = load_problem("kv_copy_blocks_srv2")
    code = language_template("triton", prob)
    assert "return None" in code and "updated in place" in code
    brief = ProblemBrief.build(prob, "triton", "h200")
    text = render_task(brief)
    assert "There is no output argument" in text and "`key_cache`, `value_cache`: updated in place" in text


def _failed_graded() -> Graded:
    log = "\n".join(f"compile step {i}" for i in range(200)) + \
        "\nTraceback (most recent call last):\nRuntimeError: bad index in kernel"
    return Graded(
        submission=3, solution_digest="abc", language="triton", verdict="incorrect_numerical",
        reasons=["wrong_values"], message="out: 12.5% of elements within tolerance, 99.00% required; "
                                          "heldout-1f2e3d: incorrect_numerical", log_tail=log,
        visible=[
            WorkloadFeedback(uuid="rmsnorm-llama31-8b-decode-t1", label="llama-3.1-8b decode, batch 1",
                             verdict="passed", time_ms=0.0042, sol_ms=0.001, bound="latency", sol_score=0.61,
                             baseline_ms=0.0081),
            WorkloadFeedback(uuid="rmsnorm-llama31-8b-prefill-t16384", verdict="incorrect_numerical",
                             reasons=["wrong_values"], max_abs_err=3.5, sol_ms=0.0559, bound="memory",
                             failure={"draw": 2, "seed": 918273645,
                                      "worst": {"output": "out", "index": [5, 4095], "got": 3.75, "expected": 0.25,
                                                "allowed": 0.014}}),
            WorkloadFeedback(uuid="heldout-1f2e3d", label="held-out num_tokens=777 hidden_size=3000",
                             verdict="incorrect_numerical"),
        ],
        passed=False, score_sol=0.4321, score_speedup=1.2345, heldout_speedups=[1.2345])


def test_feedback_for_a_failed_submission(h200_brief):
    text = render_feedback(_failed_graded(), h200_brief, budget=(Budget(submissions=10, attempts=None), Spent(submissions=3)))
    assert "Verdict: **incorrect_numerical** (wrong_values)" in text
    assert "12.5% of elements within tolerance" in text
    # the failing workload with its worst element
    assert "Failing workload: rmsnorm-llama31-8b-prefill-t16384" in text and "num_tokens=16384" in text
    assert "output `out` at index [5, 4095]: got 3.75, expected 0.25, allowed error 0.014" in text
    assert "Max abs error: 3.5" in text and "918273645" not in text  # the draw's seed stays secret
    # the log's tail, trimmed
    assert "RuntimeError: bad index in kernel" in text and "compile step 199" in text
    assert "compile step 0\n" not in text and "earlier lines cut" in text
    # times against T_SOL, scores, bounds, baseline
    row = _row(text, "rmsnorm-llama31-8b-decode-t1")
    assert "| passed | 4.20 | 1.00 | 4.20x | 0.610 | latency | 8.10 |" in row
    assert "Budget left: 7 of 10 submissions." in text
    # nothing about held-out workloads, nor their scores
    assert "heldout" not in text and "held-out" not in text and "777" not in text
    assert "0.432" not in text and "1.23" not in text


def test_feedback_when_only_hidden_shapes_fail_shows_no_details(h200_brief):
    g = _failed_graded()
    g.visible = [w.model_copy(update={"verdict": "passed", "reasons": [], "failure": None, "time_ms": 0.07,
                                      "sol_score": 0.7, "baseline_ms": 0.1}) for w in g.visible[:2]]
    text = render_feedback(g, h200_brief)
    assert "Every workload shown passed, but the submission is not accepted" in text
    assert "Traceback" not in text and "12.5%" not in text and "heldout" not in text
    assert "Mean SOL score over these workloads: 0.700" in text
    accepted = render_feedback(g.model_copy(update={"passed": True}))
    assert "Accepted" in accepted


def test_feedback_for_a_compile_error():
    g = Graded(submission=1, solution_digest="d", language="triton", verdict="compile_error",
               message="SyntaxError: invalid syntax (solution.py, line 7)", log_tail="  File \"solution.py\", line 7\n")
    text = render_feedback(g)
    assert "Verdict: **compile_error**" in text and "SyntaxError: invalid syntax" in text and 'line 7' in text


def test_budget_note():
    spent = Spent(submissions=4, attempts=6, usd=1.25)
    note = budget_note(Budget(submissions=10, attempts=10, usd=5.0, tokens=None), spent)
    assert note == "Budget left: 6 of 10 submissions, 4 of 10 turns, $3.75 of $5.00."
    assert budget_note(Budget(attempts=None, submissions=None), spent) == ""
