import torch


def run(x, weight, grad_out):
    # bf16 tensor-core GEMMs with fp32 accumulation: the data gradient rounded to bf16, the weight gradient
    # written in fp32 straight from the accumulator (torch.mm's out_dtype, CUDA only)
    grad_x = grad_out @ weight
    if grad_out.is_cuda:
        grad_weight = torch.mm(grad_out.t(), x, out_dtype=torch.float32)
    else:
        grad_weight = grad_out.t().float() @ x.float()
    return grad_x, grad_weight
