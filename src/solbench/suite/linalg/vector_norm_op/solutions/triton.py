import torch
import triton
import triton.language as tl


@triton.jit
def _vector_norm_kernel(x_ptr, out_ptr, row_len, BLOCK: tl.constexpr):
    # one program per row; loop over the row in BLOCK chunks, fp32 sum of squares
    row = tl.program_id(0).to(tl.int64)
    base = row * row_len
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, row_len, BLOCK):
        idx = off + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + base + idx, mask=idx < row_len, other=0.0).to(tl.float32)
        acc += v * v
    tl.store(out_ptr + row, tl.sqrt_rn(tl.sum(acc, axis=0)))


def run(x, norm=None):
    # returns norm [M] fp32; also writes into a preallocated `norm` if given
    m, d = x.shape
    if norm is None:
        norm = torch.empty((m,), dtype=torch.float32, device=x.device)
    if m == 0:
        return norm
    x = x.contiguous()
    block = min(max(triton.next_power_of_2(d), 128), 4096)
    num_warps = min(max(block // 512, 1), 8)
    _vector_norm_kernel[(m,)](x, norm, d, BLOCK=block, num_warps=num_warps)
    return norm
