import torch


def run(grad_out, weight):
    # the cuDNN / oneDNN dgrad kernel on the bf16 tensors (what autograd runs for F.conv2d)
    N, _, H, W = grad_out.shape
    return torch.nn.grad.conv2d_input((N, weight.shape[1], H, W), weight, grad_out, stride=1, padding=1)
