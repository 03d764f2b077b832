"""Honest: computes on a private CUDA stream (e.g. to overlap with a caller's other work) but orders it
correctly: the side stream waits for the producer of x, the current stream waits for the side stream before
returning, and the allocator is told the output is used on the side stream."""
import torch

_side = {}


def run(x, scale):
    if not x.is_cuda:
        return torch.softmax(x * scale, dim=-1)
    s = _side.get(x.device)
    if s is None:
        s = _side[x.device] = torch.cuda.Stream(device=x.device)
    current = torch.cuda.current_stream(x.device)
    s.wait_stream(current)
    with torch.cuda.stream(s):
        out = torch.softmax(x * scale, dim=-1)
    x.record_stream(s)
    out.record_stream(current)
    current.wait_stream(s)
    return out
