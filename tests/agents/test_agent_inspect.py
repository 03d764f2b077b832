"""The inspect_ai task end to end on the CPU: inspect's mockllm model calls the ``evaluate`` tool with a scripted
PyTorch kernel for the axpy fixture, the real evaluator grades it, and the scorer reads the held-out verdict."""
from __future__ import annotations

import pytest

from tests.paths import AXPY

inspect_ai = pytest.importorskip("inspect_ai")

from inspect_ai.model import ModelOutput, ModelUsage, get_model

GOOD = "import torch\n\n\ndef run(x, y, alpha, out):\n    torch.add(y, x, alpha=alpha, out=out)\n"
WRONG = "import torch\n\n\ndef run(x, y, alpha, out):\n    torch.add(y, x, alpha=2 * alpha, out=out)\n"


def run_task(tmp_path, outputs, **task_args):
    from solbench.agents.inspect_task import solbench

    for o in outputs:  # usage given: mockllm would count tokens with tiktoken, which downloads its encoding
        o.usage = ModelUsage(input_tokens=10, output_tokens=10, total_tokens=20)
    model = get_model("mockllm/model", custom_outputs=outputs)
    task = solbench(problems=str(AXPY), language="pytorch", device="cpu", **{"heldout": 1, **task_args})
    [log] = inspect_ai.eval(task, model=model, log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success", log.error
    [sample] = log.samples
    return sample, sample.scores["solbench_scorer"]


def tool_turn(code):
    return ModelOutput.for_tool_call("mockllm/model", "evaluate", {"code": code})


def tool_results(sample):
    return [m.text for m in sample.messages if m.role == "tool"]


def test_tool_call_with_correct_kernel_passes(tmp_path):
    sample, score = run_task(tmp_path, [tool_turn(GOOD), ModelOutput.from_content("mockllm/model", "Done.")])
    assert score.value["passed"] == 1 and score.value["submissions"] == 1
    assert score.value["sol_score"] > 0 and score.value["speedup"] > 0
    assert '"passed":true' in score.metadata["best"] and "torch.add" in score.answer
    [feedback] = tool_results(sample)
    assert "Result of submission 1" in feedback and "Accepted: every workload passed." in feedback
    assert "heldout-" not in feedback  # feedback shows visible workloads only
    assert sample.metadata["problem"] == "axpy_fixture" and sample.metadata["language"] == "pytorch"
    assert sample.messages[0].role == "system" and "`evaluate` tool" in sample.messages[0].text
    assert "axpy" in sample.messages[1].text  # the rendered task


def test_wrong_kernel_scores_zero_and_budget_stops_loop(tmp_path):
    outputs = [tool_turn(WRONG), tool_turn(WRONG), ModelOutput.from_content("mockllm/model", "unused")]
    sample, score = run_task(tmp_path, outputs, heldout=0, submissions=2)
    assert score.value == {"passed": 0, "sol_score": 0.0, "speedup": 0.0, "submissions": 2}
    results = tool_results(sample)
    assert len(results) == 2 and all("incorrect_numerical" in r for r in results)
    assert "0 of 2 submissions" in results[-1]  # the budget line of the feedback
    assert sample.messages[-1].role == "tool"  # the loop ended when the submissions were spent


def test_plain_chat_grades_the_reply_once(tmp_path):
    reply = f"Here is the kernel:\n\n```python\n{GOOD}```\n"
    sample, score = run_task(tmp_path, [ModelOutput.from_content("mockllm/model", reply)], heldout=0, tools=False)
    assert score.value["passed"] == 1 and score.value["submissions"] == 1
    assert not tool_results(sample)
