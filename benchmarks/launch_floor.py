"""Measure the shortest event-timed duration of a kernel on this GPU, under solbench's timing protocol.

A one-element kernel queued behind the read flush, between two CUDA events: the
smallest interval any kernel can show. Its minimum, lowered by a margin, is a
lower bound usable as the roofline's latency floor.
"""

import json
import sys

import torch

from solbench.evaluate.timing import Flusher

if not torch.cuda.is_available():
    sys.exit("needs a GPU")
x = torch.zeros(1, device="cuda")
flush = Flusher(torch.cuda.get_device_properties(0).L2_cache_size, torch.device("cuda"))
for _ in range(20):
    x.add_(1)
torch.cuda.synchronize()
samples = []
for _ in range(50):
    evs = []
    for _ in range(20):
        flush()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        x.add_(1)
        e.record()
        evs.append((s, e))
    torch.cuda.synchronize()
    samples += [s.elapsed_time(e) * 1e3 for s, e in evs]
samples.sort()
res = {"device": torch.cuda.get_device_name(), "n": len(samples), "min_us": samples[0],
       "p05_us": samples[len(samples) // 20], "median_us": samples[len(samples) // 2]}
print(json.dumps(res))
