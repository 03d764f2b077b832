import torch


def run(gating, topk_ids, grad_weights):
    acc = torch.promote_types(gating.dtype, torch.float32)
    ids = topk_ids.long()
    sel = torch.gather(gating.to(acc), 1, ids)                   # [T, k] selected logits
    sel = sel - sel.amax(dim=-1, keepdim=True)
    e = torch.exp(sel)
    w = e / e.sum(dim=-1, keepdim=True)                          # renormalised top-k weights
    g = grad_weights.to(acc)
    d_sel = w * (g - (w * g).sum(dim=-1, keepdim=True))          # softmax backward over the selection
    grad = torch.zeros(gating.shape, dtype=acc, device=gating.device)
    return grad.scatter(1, ids, d_sel)
