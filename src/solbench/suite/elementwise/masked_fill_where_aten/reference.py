"""GPT-2's eager masking step: where(causal_mask, scores * scale, -inf), in the scores' dtype."""

import torch


def run(scores, causal_mask, scale):
    return torch.where(causal_mask, scores * scale, float("-inf"))
