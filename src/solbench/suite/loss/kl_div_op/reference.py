"""Per-token KL(teacher || student) from student log-probs and teacher probs; the aten operator is the specification.

F.kl_div(input, target, reduction="none") gives target * (log(target) - input) elementwise; the sum over the vocabulary
is each token's divergence (batchmean would be their mean). fp32 (float64 for the evaluator's anchor).
"""

import torch.nn.functional as F


def run(student_log_probs, teacher_probs):
    return F.kl_div(student_log_probs, teacher_probs, reduction="none").sum(dim=-1)
