"""Probe what torch's kineto session reports on this GPU: the device events of a held, flushed call, their
timestamps against the host clock, their correlation to the runtime launches, and the session's start cost."""
import time

import torch
from torch.autograd import profiler as ap


def main() -> None:
    dev = torch.device("cuda")
    x = torch.randn(4096, device=dev)
    buf = torch.randn(40 << 20, device=dev)
    out = torch.empty((), device=dev)
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    for use_cpu in (False, True):
        t0 = time.perf_counter()
        with ap.profile(use_cpu=use_cpu, use_device="cuda", use_kineto=True) as prof:
            t1 = time.perf_counter()
            marks = []
            for k in range(3):
                marks.append(("before_hold", k, time.time_ns(), time.monotonic_ns()))
                with torch.profiler.record_function(f"solbench.hold.{k}"):
                    torch.cuda._sleep(20000)
                    torch.sum(buf, dim=0, out=out)
                marks.append(("call", k, time.time_ns(), time.monotonic_ns()))
                with torch.profiler.record_function(f"solbench.call.{k}"):
                    y = x * 2
                    side.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(side):
                        z = y + 1
                    torch.cuda.current_stream().wait_stream(side)
                    z.sum()
                marks.append(("after", k, time.time_ns(), time.monotonic_ns()))
            torch.cuda.synchronize()
            t2 = time.perf_counter()
        t3 = time.perf_counter()
        print(f"use_cpu={use_cpu}: enter {1e3*(t1-t0):.2f} ms, body {1e3*(t2-t1):.2f} ms, exit {1e3*(t3-t2):.2f} ms")
        for m in marks:
            print("  mark", m)
        t4 = time.perf_counter()
        evs = list(prof.kineto_results.events())
        t5 = time.perf_counter()
        print(f"  {len(evs)} raw events in {1e3*(t5-t4):.2f} ms; trace_start_ns {prof.kineto_results.trace_start_ns()}")
        for e in evs:
            fields = {}
            for name in ("name", "device_type", "start_ns", "duration_ns", "end_ns", "correlation_id",
                         "linked_correlation_id", "device_index", "device_resource_id", "activity_type",
                         "start_thread_id", "external_id", "is_user_annotation"):
                try:
                    fields[name] = getattr(e, name)()
                except Exception as exc:
                    fields[name] = f"<{type(exc).__name__}>"
            fields["name"] = str(fields["name"])[:60]
            print("  ev", fields)
    # session start/stop cost with CUDA activity only, repeated
    costs = []
    for _ in range(5):
        t0 = time.perf_counter()
        with ap.profile(use_cpu=False, use_device="cuda", use_kineto=True) as prof:
            y = x * 2
            torch.cuda.synchronize()
        list(prof.kineto_results.events())
        costs.append(1e3 * (time.perf_counter() - t0))
    print("session cost ms", [round(c, 2) for c in costs])


if __name__ == "__main__":
    main()
