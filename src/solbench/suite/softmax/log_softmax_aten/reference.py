"""log_softmax over the last dim, bf16 logits in, fp32 log-probs out (float64 for the evaluator's anchor)."""

import torch


def run(logits):
    out_dtype = torch.promote_types(logits.dtype, torch.float32)
    return torch.log_softmax(logits, dim=-1, dtype=out_dtype)
