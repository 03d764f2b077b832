"""A reward function for TRL's GRPO trainer that grades every completion with `solbench serve`.

    from trl import GRPOConfig, GRPOTrainer
    from grpo_reward import KernelReward

    reward = KernelReward("http://gpu-host:8000", token=os.environ["SOLBENCH_TOKEN"], language="triton")
    trainer = GRPOTrainer(model=..., reward_funcs=reward, train_dataset=dataset, args=GRPOConfig(...))

The dataset needs a ``problem`` column (a bundled problem's name); TRL passes the dataset's columns to a reward
function as keyword arguments, one value per completion. The completions of one prompt are graded on the same
held-out workloads (one seed group per prompt), so the group-relative advantages compare like with like; every
completion of a step is submitted in one batch and graded on every GPU the service has.

The reward, from the service's verdict and SOL score (docs/SERVICE.md):
  reward_hack                         -1.0  (caught faking: worse than anything honest)
  no code, compile_error              0.0
  ran but wrong or too slow to finish 0.1
  passed                              0.2 + 0.8 * SOL score  (0.6 at the PyTorch baseline, 1.0 at the hardware limit)
"""

from __future__ import annotations

import hashlib

from solbench.agents.extract import extract_code
from solbench.client import Client

REWARD_HACK, NO_CODE, WRONG = -1.0, 0.0, 0.1


def reward_of(job: dict) -> float:
    """One graded completion's reward (``job``: the service's answer for it)."""
    result = job.get("result") or {}
    verdict = result.get("verdict")
    if verdict == "reward_hack":
        return REWARD_HACK
    if job.get("state") != "done" or verdict in (None, "compile_error", "unsupported", "invalid_reference"):
        return NO_CODE
    if not result.get("passed"):
        return WRONG
    return 0.2 + 0.8 * min(1.0, max(0.0, result.get("sol_score") or 0.0))


def _text(completion) -> str:
    """A completion's text: TRL passes strings, or lists of chat messages for conversational datasets."""
    if isinstance(completion, str):
        return completion
    return "\n".join(m.get("content", "") for m in completion if m.get("role") == "assistant")


class KernelReward:
    """``__call__(prompts, completions, problem, **kw) -> list[float]``, as TRL calls a reward function."""

    def __init__(self, url: str, token: str | None = None, language: str = "triton", heldout: int = 3,
                 timeout_s: float = 1800.0):
        self.client = Client(url, token)
        self.language, self.heldout, self.timeout_s = language, heldout, timeout_s
        self.__name__ = "solbench"  # TRL logs each reward function under its name

    def __call__(self, prompts, completions, problem, **kwargs) -> list[float]:
        bodies, where = [], []
        for i, (prompt, completion, name) in enumerate(zip(prompts, completions, problem)):
            code = extract_code(_text(completion))
            if not code.files or code.entry_file is None:
                continue
            group = hashlib.sha256(repr(prompt).encode()).hexdigest()[:16]  # one prompt's completions alike
            bodies.append({"problem": name, "sources": code.files, "language": self.language,
                           "entry_point": f"{code.entry_file}::run", "destination_passing_style": False,
                           "seed_group": group, "options": {"heldout": self.heldout}})
            where.append(i)
        rewards = [NO_CODE] * len(completions)
        if bodies:
            ids = self.client.submit_batch(bodies)
            for i, job_id in zip(where, ids):
                rewards[i] = reward_of(self.client.wait(job_id, timeout_s=self.timeout_s))
        return rewards
