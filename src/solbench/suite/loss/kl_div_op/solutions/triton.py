import torch
import triton
import triton.language as tl


@triton.jit
def _kl_partial_kernel(s_ptr, t_ptr, part_ptr, row_len, chunk, SPLIT: tl.constexpr, BLOCK: tl.constexpr):
    # grid: (tokens, SPLIT); sum over one vocab chunk of t * (log t - s), with xlogy's 0 * log 0 = 0
    row = tl.program_id(0).to(tl.int64)
    sp = tl.program_id(1)
    base = row * row_len
    start = sp.to(tl.int64) * chunk
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, chunk, BLOCK):
        idx = start + off + tl.arange(0, BLOCK)
        mask = idx < row_len
        s = tl.load(s_ptr + base + idx, mask=mask, other=0.0)
        t = tl.load(t_ptr + base + idx, mask=mask, other=0.0)
        tlogt = tl.where(t > 0.0, t * tl.log(tl.where(t > 0.0, t, 1.0)), 0.0)
        acc += tlogt - t * s
    tl.store(part_ptr + row * SPLIT + sp, tl.sum(acc, axis=0))


@triton.jit
def _kl_final_kernel(part_ptr, out_ptr, SPLIT: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    p = tl.load(part_ptr + row * SPLIT + tl.arange(0, SPLIT))
    tl.store(out_ptr + row, tl.sum(p, axis=0))


def run(student_log_probs, teacher_probs, kl=None):
    # returns kl [T] fp32; also writes into a preallocated `kl` if given
    t = student_log_probs.shape[0]
    if kl is None:
        kl = torch.empty((t,), dtype=torch.float32, device=student_log_probs.device)
    if t == 0:
        return kl
    s = student_log_probs.contiguous()
    p = teacher_probs.contiguous()
    v = s.shape[1]
    block = 2048
    split = 1
    while split < 64 and t * split < 1024 and triton.cdiv(v, split * 2) >= block:
        split *= 2
    chunk = triton.cdiv(triton.cdiv(v, split), block) * block
    part = torch.empty((t, split), dtype=torch.float32, device=s.device)
    _kl_partial_kernel[(t, split)](s, p, part, v, chunk, SPLIT=split, BLOCK=block, num_warps=8)
    _kl_final_kernel[(t,)](part, kl, SPLIT=split, num_warps=1)
    return kl
