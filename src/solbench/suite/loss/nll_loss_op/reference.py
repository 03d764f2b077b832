"""Per-sequence mean NLL; the aten operator is the specification.

F.nll_loss(reduction="none") picks -log_probs[t, labels[t]] for every token, then the mean over each sequence.
fp32 in and out (float64 for the evaluator's anchor).
"""

import torch.nn.functional as F


def run(log_probs, labels):
    B, S, V = log_probs.shape
    per_token = F.nll_loss(log_probs.reshape(B * S, V), labels.reshape(B * S), reduction="none")
    return per_token.view(B, S).mean(dim=1)
