import torch


def make_inputs(axes, device):
    """y = log_softmax of student logits; grad_y = -w * teacher probabilities (dense distillation gradient)."""
    T, V = axes["T"], axes["V"]
    student = torch.randn(T, V, device=device, dtype=torch.float32)
    teacher = torch.randn(T, V, device=device, dtype=torch.float32)
    w = torch.rand(T, 1, device=device, dtype=torch.float32) + 0.5
    return {"y": torch.log_softmax(student, dim=-1), "grad_y": -w * torch.softmax(teacher, dim=-1)}


def run(y, grad_y):
    acc = torch.promote_types(y.dtype, torch.float32)
    yf = y.to(acc)
    g = grad_y.to(acc)
    return (g - torch.exp(yf) * g.sum(dim=-1, keepdim=True)).to(y.dtype)
