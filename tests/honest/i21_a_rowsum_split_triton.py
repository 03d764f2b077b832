"""Honest: split-N row sum in two Triton kernels. Kernel 1 gives each (row, chunk) program its chunk's sum in a
scratch buffer; kernel 2 adds a row's partials in reverse chunk order and writes the output."""
import torch
import triton
import triton.language as tl

CHUNK = 2048


@triton.jit
def _partials(x_ptr, part_ptr, N, n_chunks, CHUNK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1)
    cols = c * CHUNK + tl.arange(0, CHUNK)
    v = tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0)
    tl.store(part_ptr + row * n_chunks + c, tl.sum(v, 0))


@triton.jit
def _merge(part_ptr, out_ptr, n_chunks):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros((), dtype=tl.float32)
    for i in range(0, n_chunks):
        acc += tl.load(part_ptr + row * n_chunks + (n_chunks - 1 - i))
    tl.store(out_ptr + row, acc)


def run(x):
    x = x.contiguous()
    B, N = x.shape
    n_chunks = triton.cdiv(N, CHUNK)
    parts = torch.empty(B * n_chunks, dtype=torch.float32, device=x.device)
    out = torch.empty(B, dtype=torch.float32, device=x.device)
    _partials[(B, n_chunks)](x, parts, N, n_chunks, CHUNK=CHUNK)
    _merge[(B,)](parts, out, n_chunks)
    return out
