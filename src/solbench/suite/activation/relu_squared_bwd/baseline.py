import torch


def run(grad_out, x):
    # bf16 all the way: relu(x) is exact in bf16, the product is rounded once, the factor 2 is exact
    return torch.mul(torch.relu(x), grad_out).mul_(2.0)
