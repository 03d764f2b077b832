"""Optimized PyTorch formulation: cuBLASLt's fp8 GEMM with row-wise scales through torch._scaled_mm.

On devices without fp8 GEMM support (the CPU, pre-Hopper GPUs) it falls back to the reference's
formulation, so the baseline stays defined everywhere.
"""

import torch


def run(A, B, a_scale, b_scale):
    if A.is_cuda and torch.cuda.get_device_capability(A.device) >= (8, 9):
        return torch._scaled_mm(A, B.t(), scale_a=a_scale.reshape(-1, 1), scale_b=b_scale.reshape(1, -1),
                                out_dtype=torch.bfloat16)
    return ((A.to(torch.float32) @ B.to(torch.float32).T) * a_scale[:, None] * b_scale[None, :]).to(torch.bfloat16)
