"""Repetition, frequency and presence penalties applied to logits, from token-id histories.

Per row b and token v:
  seen[v]     = v occurs in prompt_tokens[b] or output_tokens[b]
  count[v]    = occurrences of v in output_tokens[b]
  l           = logits[b, v]
  l           = l / repetition_penalty[b] if seen and l > 0;  l * repetition_penalty[b] if seen and l <= 0
  out[b, v]   = l - frequency_penalty[b] * count[v] - presence_penalty[b] * (count[v] > 0)

Math in fp32 (float64 for the evaluator's anchor); the output has the logits' dtype.
"""

import torch


def run(logits, prompt_tokens, output_tokens, repetition_penalty, frequency_penalty, presence_penalty):
    B, V = logits.shape
    f = torch.promote_types(logits.dtype, torch.float32)
    x = logits.to(f)
    counts = torch.zeros(B, V, dtype=f, device=logits.device)
    counts.scatter_add_(1, output_tokens.long(), torch.ones(output_tokens.shape, dtype=f, device=logits.device))
    in_prompt = torch.zeros(B, V, dtype=torch.bool, device=logits.device)
    in_prompt.scatter_(1, prompt_tokens.long(), True)
    seen = in_prompt | (counts > 0)
    rp = repetition_penalty.to(f)[:, None]
    x = torch.where(seen, torch.where(x > 0, x / rp, x * rp), x)
    x = x - frequency_penalty.to(f)[:, None] * counts - presence_penalty.to(f)[:, None] * (counts > 0)
    return x.to(logits.dtype)
