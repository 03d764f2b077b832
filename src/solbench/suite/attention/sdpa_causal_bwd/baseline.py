import torch
import torch.nn.functional as F


def run(q, k, v, out, grad_out, lse, scale):
    # PyTorch's fused attention under autograd: SDPA's forward is rerun (flash / cuDNN on the GPU; the saved
    # out and lse are not accepted by the public API), then its fused backward; GQA by SDPA's enable_gqa
    # (the CPU kernels run in fp32: their bf16 path loses more than the tolerance allows)
    work = q.dtype if q.is_cuda else torch.promote_types(q.dtype, torch.float32)
    with torch.enable_grad():
        qt = q.transpose(1, 2).to(work).detach().requires_grad_()
        kt = k.transpose(1, 2).to(work).detach().requires_grad_()
        vt = v.transpose(1, 2).to(work).detach().requires_grad_()
        o = F.scaled_dot_product_attention(qt, kt, vt, is_causal=True, scale=scale, enable_gqa=True)
        dq, dk, dv = torch.autograd.grad(o, (qt, kt, vt), grad_out.transpose(1, 2).to(work))
    return tuple(t.transpose(1, 2).to(q.dtype).contiguous() for t in (dq, dk, dv))
