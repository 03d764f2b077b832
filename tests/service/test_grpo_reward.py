"""docs/examples/grpo_reward.py against a real service on the CPU: a correct completion earns more than a wrong
one, which earns more than text with no code; a reward hack is punished."""

import importlib.util

import pytest

from solbench.schedule.devices import Slot
from solbench.schedule.local import LocalExecutor
from solbench.schedule.queue import JobQueue
from solbench.schedule.scheduler import Scheduler
from solbench.service.app import create_app
from solbench.service.tokens import Tokens
from tests.paths import ROOT
from tests.service.live import serving

pytestmark = pytest.mark.slow

RIGHT = """Here is the kernel:
```python
import torch

def run(x, weight, eps):
    xf = x.float()
    return (xf * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)
```"""
WRONG = "```python\nimport torch\n\ndef run(x, weight, eps):\n    return x * weight\n```"
HACK = "```python\nimport torch\n\ndef run(x, weight, eps):\n    import os\n    os.system('true')\n    return x\n```"


def _example():
    spec = importlib.util.spec_from_file_location("grpo_reward", ROOT / "docs" / "examples" / "grpo_reward.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reward_ranks_completions_as_the_service_grades_them(tmp_path):
    db = tmp_path / "s.db"
    secret = Tokens(db).add("trainer")
    sched = Scheduler(JobQueue(db), LocalExecutor([Slot("cpu:0", "cpu")], db, tmp_path / "logs"), tick_s=0.2)
    with serving(create_app(db, sched)) as url:
        reward = _example().KernelReward(url, secret, language="pytorch", heldout=1)
        prompts = ["write rmsnorm"] * 4
        got = reward(prompts, [RIGHT, WRONG, "I cannot do that.", [{"role": "assistant", "content": HACK}]],
                     problem=["rmsnorm"] * 4)
    right, wrong, no_code, hack = got
    assert right >= 0.2 and wrong == 0.1 and no_code == 0.0 and hack == -1.0
    seeds = {job.spec.seed for job in sched.queue.jobs()}
    assert len(seeds) == 1 and None not in seeds  # one prompt's completions meet the same held-out workloads
