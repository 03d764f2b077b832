"""Baseline: PyTorch's fused AdamW kernel (what torch.optim.AdamW(fused=True) launches), one tensor in each list."""

import torch


def run(param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, step):
    steps = torch.full((), float(step), dtype=torch.float32, device=param.device)
    torch._fused_adamw_([param], [grad], [exp_avg], [exp_avg_sq], [], [steps], lr=lr, beta1=beta1, beta2=beta2,
                        weight_decay=weight_decay, eps=eps, amsgrad=False, maximize=False)
