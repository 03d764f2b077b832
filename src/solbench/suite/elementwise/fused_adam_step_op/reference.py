"""One AdamW step, in place on param, exp_avg and exp_avg_sq (the order of torch.optim.AdamW's single-tensor path).

Hyperparameters are Python scalars; the bias corrections are computed in double on the host. The tensors are
updated in their own dtype (fp32 here, float64 for the evaluator's anchor). Nothing is returned.
"""

import math


def run(param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, step):
    bias_correction1 = 1.0 - beta1 ** step
    bias_correction2 = 1.0 - beta2 ** step
    param.mul_(1.0 - lr * weight_decay)
    exp_avg.lerp_(grad, 1.0 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
    denom = (exp_avg_sq.sqrt() / math.sqrt(bias_correction2)).add_(eps)
    param.addcdiv_(exp_avg, denom, value=-lr / bias_correction1)
