import torch


def run(y, grad_y):
    # ATen's fused log-softmax backward (what autograd runs for torch.log_softmax)
    return torch.ops.aten._log_softmax_backward_data(grad_y, y, -1, y.dtype)
