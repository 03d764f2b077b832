import math

import torch
import triton
import triton.language as tl


@triton.jit
def _adamw_kernel(p_ptr, g_ptr, m_ptr, v_ptr, n, decay, w1, beta2, w2, inv_sqrt_bc2, eps, step_size,
                  BLOCK: tl.constexpr):
    # flat: one program per BLOCK elements, int64 offsets; the same operation order as torch.optim.AdamW
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    p = tl.load(p_ptr + offs, mask=mask, other=0.0)
    g = tl.load(g_ptr + offs, mask=mask, other=0.0)
    m = tl.load(m_ptr + offs, mask=mask, other=0.0)
    v = tl.load(v_ptr + offs, mask=mask, other=1.0)
    p = p * decay                                   # param.mul_(1 - lr * wd)
    m = m + w1 * (g - m)                            # exp_avg.lerp_(grad, 1 - beta1)
    v = v * beta2 + w2 * (g * g)                    # exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2)
    denom = tl.sqrt_rn(v) * inv_sqrt_bc2 + eps      # sqrt(exp_avg_sq) / sqrt(bc2) + eps
    p = p + step_size * tl.math.div_rn(m, denom)    # param.addcdiv_(exp_avg, denom, -lr / bc1)
    tl.store(p_ptr + offs, p, mask=mask)
    tl.store(m_ptr + offs, m, mask=mask)
    tl.store(v_ptr + offs, v, mask=mask)


def run(param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, step):
    assert param.is_contiguous() and grad.is_contiguous() and exp_avg.is_contiguous() and exp_avg_sq.is_contiguous()
    n = param.numel()
    if n == 0:
        return None
    lr, beta1, beta2, eps, weight_decay = (float(v) for v in (lr, beta1, beta2, eps, weight_decay))
    step = int(step)
    # host scalars in double, as the reference computes them
    bc1 = 1.0 - beta1 ** step
    bc2 = 1.0 - beta2 ** step
    block = 1024
    _adamw_kernel[(triton.cdiv(n, block),)](
        param, grad, exp_avg, exp_avg_sq, n,
        1.0 - lr * weight_decay, 1.0 - beta1, beta2, 1.0 - beta2, 1.0 / math.sqrt(bc2), eps, -lr / bc1,
        BLOCK=block, num_warps=4)
    return None
