import torch


def run(logits, labels, grad_loss):
    # what autograd runs for F.cross_entropy(logits.float(), labels, reduction="none"): the fp32 log-softmax
    # (saved by the forward, recomputed here), nll_loss's backward (a scatter), then ATen's log-softmax backward
    ls = torch.log_softmax(logits, dim=-1, dtype=torch.float32)
    g_ls = torch.zeros_like(ls).scatter_(1, labels[:, None], -grad_loss[:, None].float())
    return torch.ops.aten._log_softmax_backward_data(g_ls, ls, 1, torch.float32).to(logits.dtype)
