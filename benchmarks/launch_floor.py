"""Measure the shortest duration of a kernel on this GPU under solbench's timing protocol, by both clocks.

A one-element kernel queued behind the read flush: between two CUDA events (the ``cuda_events`` clock), and as
its own CUPTI activity record (the ``cupti`` clock, solbench's default). The CUPTI minimum, lowered by a margin,
is a lower bound usable as the roofline's latency floor (hardware/data/*.json ``launch_floor_us``).
"""

import json
import sys

import torch

from solbench.evaluate.integrity.language import profiler_session
from solbench.evaluate.timing.rounds import Flusher

if not torch.cuda.is_available():
    sys.exit("needs a GPU")
x = torch.zeros(1, device="cuda")
flush = Flusher(torch.cuda.get_device_properties(0).L2_cache_size, torch.device("cuda"))
for _ in range(20):
    x.add_(1)
torch.cuda.synchronize()
events, kernels = [], []
for _ in range(50):
    evs = []
    with profiler_session("cuda") as prof:
        for _ in range(20):
            flush()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            x.add_(1)
            e.record()
            evs.append((s, e))
        torch.cuda.synchronize()
    events += [s.elapsed_time(e) * 1e3 for s, e in evs]
    kernels += [(r.end_ns() - r.start_ns()) / 1e3 for r in prof.kineto_results.events()
                if r.device_type() == torch.autograd.DeviceType.CUDA and "elementwise" in str(r.name())
                and not r.is_user_annotation()]
res = {"device": torch.cuda.get_device_name()}
for name, xs in (("events", sorted(events)), ("cupti", sorted(kernels))):
    if xs:
        res[name] = {"n": len(xs), "min_us": xs[0], "p05_us": xs[len(xs) // 20], "median_us": xs[len(xs) // 2]}
print(json.dumps(res))
