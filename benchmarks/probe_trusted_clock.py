"""Probe the evidence of a kernel's time that a candidate's process cannot write (issue 21, root cause 1).

A trusted process and a candidate process take turns on one GPU through interprocess CUDA events: per call the
trusted process stamps ``%globaltimer`` from a kernel of its own, releases the candidate's stream, waits for the
candidate's end event and stamps again. The stamps bracket whatever the candidate ran between the two events,
whoever launched it. This probe measures what that bracket adds to a call (a null call, and kernels of known
length against the candidate's own event time), with the trusted stream gated on the host (``flag``) or held by
a fixed spin (``sleep``); run it with and without MPS. ``--role ticks`` measures the timer's granularity,
``--role seccomp`` which CUDA, Triton and profiler operations still work under a seccomp filter installed after
start-up. Prints one JSON object per line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch
import triton
import triton.language as tl

RING = 4


@triton.jit
def _stamp(out, i):
    z = tl.zeros([1], tl.int32)
    t = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [z], dtype=tl.int64, is_pure=False, pack=1)
    tl.store(out + i + tl.arange(0, 1), t)


@triton.jit
def _gate(flag, want):
    v = tl.load(flag, volatile=True)
    while v < want:
        v = tl.load(flag, volatile=True)


@triton.jit
def _ticks(out, n):
    z = tl.zeros([1], tl.int32)
    for j in range(n):
        t = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [z], dtype=tl.int64, is_pure=False,
                                      pack=1)
        tl.store(out + j + tl.arange(0, 1), t)


def _pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else None


def ticks() -> dict:
    out = torch.zeros(4096, dtype=torch.int64, device="cuda")
    _ticks[(1,)](out, 4096)
    torch.cuda.synchronize()
    v = out.tolist()
    d = [b - a for a, b in zip(v, v[1:]) if b != a]
    return {"role": "ticks", "distinct": len(set(v)), "reads": len(v), "span_ns": v[-1] - v[0],
            "step_ns_median": statistics.median(d) if d else None, "step_ns_min": min(d) if d else None}


def _send(f, **msg):
    f.write(json.dumps(msg) + "\n")
    f.flush()


def _recv(f):
    line = f.readline()
    if not line:
        raise SystemExit("peer gone")
    return json.loads(line)


WORKS = {"null": None, "sleep2": 2, "sleep20": 20, "sleep200": 200, "copy8M": 8 << 20, "copy1G": 1 << 30}


def candidate() -> None:
    """The candidate's side: wait for the trusted event, run the work, record the end event."""
    inp, out = sys.stdin, sys.stdout
    dev = torch.device("cuda")
    torch.zeros(1, device=dev)
    hello = _recv(inp)
    a_events = [torch.cuda.Event.from_ipc_handle(dev, bytes.fromhex(h)) for h in hello["a"]]
    b_events = [torch.cuda.Event(enable_timing=False, interprocess=True) for _ in range(RING)]
    _send(out, b=[e.ipc_handle().hex() for e in b_events])
    s = torch.cuda.Stream()
    clock_khz = 1980000  # the H200's maximum SM clock: _sleep counts cycles
    bufs = {}
    while True:
        msg = _recv(inp)
        if msg.get("op") == "end":
            break
        work, n = msg["work"], msg["n"]
        size = WORKS[work]
        if work.startswith("copy") and work not in bufs:
            bufs[work] = (torch.randn(size // 4, device=dev), torch.empty(size // 4, device=dev))
        times = []
        evs = []
        for k in range(n):
            _recv(inp)  # go k
            with torch.cuda.stream(s):
                s.wait_event(a_events[k % RING])
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record(s)
                if work.startswith("sleep"):
                    torch.cuda._sleep(int(size * clock_khz / 1000))
                elif work.startswith("copy"):
                    bufs[work][1].copy_(bufs[work][0])
                e1.record(s)
                b_events[k % RING].record(s)
            evs.append((e0, e1))
            _send(out, enq=k)
        torch.cuda.synchronize()
        times = [a.elapsed_time(b) * 1e3 for a, b in evs]
        _send(out, event_us=times)


def trusted(gate: str, works: list[str], n: int) -> list[dict]:
    dev = torch.device("cuda")
    child = subprocess.Popen([sys.executable, __file__, "--role", "candidate"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, bufsize=1)
    a_events = [torch.cuda.Event(enable_timing=False, interprocess=True) for _ in range(RING)]
    _send(child.stdin, a=[e.ipc_handle().hex() for e in a_events])
    b_events = [torch.cuda.Event.from_ipc_handle(dev, bytes.fromhex(h)) for h in _recv(child.stdout)["b"]]
    st, opener = torch.cuda.Stream(), torch.cuda.Stream()
    flag = torch.zeros(1, dtype=torch.int32, device=dev)
    flush_buf = torch.randn(150 << 20 >> 2, device=dev)
    flush_out = torch.empty((), device=dev)
    clock_khz = 1980000  # the H200's maximum SM clock: _sleep counts cycles
    # every kernel the chain uses is loaded before a gate spins: CUDA's lazy loading waits for the context to go
    # idle before it loads a kernel, which a spinning gate never lets happen
    flag.fill_(1)
    _gate[(1,)](flag, 1)
    torch.sum(flush_buf, dim=0, out=flush_out)
    _stamp[(1,)](torch.zeros(2, dtype=torch.int64, device=dev), 0)
    torch.cuda._sleep(1000)
    flag.zero_()
    torch.cuda.synchronize()
    rows = []
    counter = 0
    for work in works:
        total = n if not work.endswith("1G") else max(10, n // 10)
        stamps = torch.zeros(2 * total, dtype=torch.int64, device=dev)
        _send(child.stdin, op="work", work=work, n=total)
        host_rt = []
        t_start = time.perf_counter()
        for k in range(total):
            counter += 1
            with torch.cuda.stream(st):
                if gate == "flag":
                    _gate[(1,)](flag, counter)
                else:
                    torch.cuda._sleep(int(300 * clock_khz / 1000))
                torch.sum(flush_buf, dim=0, out=flush_out)
                _stamp[(1,)](stamps, 2 * k)
                a_events[k % RING].record(st)
            h0 = time.perf_counter()
            _send(child.stdin, go=k)
            _recv(child.stdout)
            host_rt.append((time.perf_counter() - h0) * 1e6)
            if gate == "flag":
                with torch.cuda.stream(opener):
                    flag.fill_(counter)
            with torch.cuda.stream(st):
                st.wait_event(b_events[k % RING])
                _stamp[(1,)](stamps, 2 * k + 1)
        torch.cuda.synchronize()
        wall = time.perf_counter() - t_start
        ev = _recv(child.stdout)["event_us"]
        s = stamps.tolist()
        span = [(s[2 * k + 1] - s[2 * k]) / 1e3 for k in range(total)]
        diff = [a - b for a, b in zip(span, ev)]
        skip = 3  # the first calls warm up
        rows.append({"role": "chain", "gate": gate, "mps": bool(os.environ.get("CUDA_MPS_PIPE_DIRECTORY")),
                     "work": work, "n": total, "stamp_us_med": statistics.median(span[skip:]),
                     "stamp_us_p10": _pct(span[skip:], 0.1), "stamp_us_p90": _pct(span[skip:], 0.9),
                     "event_us_med": statistics.median(ev[skip:]),
                     "diff_us_med": statistics.median(diff[skip:]), "diff_us_p10": _pct(diff[skip:], 0.1),
                     "diff_us_p90": _pct(diff[skip:], 0.9), "host_roundtrip_us_med": statistics.median(host_rt),
                     "per_call_ms": wall / total * 1e3})
        print(json.dumps(rows[-1]), flush=True)
    _send(child.stdin, op="end")
    child.wait(timeout=30)
    return rows


def seccomp_probe() -> list[dict]:
    """Which operations still work after a filter that denies new threads, processes, exec, ptrace and sockets."""
    import errno
    import threading

    out = []

    def attempt(name, fn):
        try:
            fn()
            torch.cuda.synchronize()
            out.append({"role": "seccomp", "op": name, "ok": True})
        except BaseException as exc:  # noqa: BLE001 - a probe reports everything
            out.append({"role": "seccomp", "op": name, "ok": False, "error": f"{type(exc).__name__}: {exc}"[:200]})

    x = torch.randn(1 << 20, device="cuda")

    @triton.jit
    def add_one(p, n, B: tl.constexpr):
        i = tl.program_id(0) * B + tl.arange(0, B)
        tl.store(p + i, tl.load(p + i, mask=i < n) + 1, mask=i < n)

    add_one[(x.numel() // 1024,)](x, x.numel(), B=1024)
    torch.cuda.synchronize()
    try:
        import pyseccomp as sc
    except ImportError as exc:
        return [{"role": "seccomp", "op": "import", "ok": False, "error": str(exc)}]
    f = sc.SyscallFilter(defaction=sc.ALLOW)
    deny = sc.ERRNO(errno.EPERM)
    for name in ("execve", "execveat", "fork", "vfork", "ptrace", "process_vm_readv", "process_vm_writev"):
        f.add_rule(deny, name)
    f.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, 0x10000, 0x10000))  # CLONE_THREAD
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    for fam in (2, 10):  # AF_INET, AF_INET6
        f.add_rule(deny, "socket", sc.Arg(0, sc.EQ, fam))
    f.load()
    attempt("torch_ops", lambda: (x * 2).sum().item())
    attempt("matmul", lambda: torch.randn(512, 512, device="cuda") @ torch.randn(512, 512, device="cuda"))
    attempt("new_stream_event", lambda: torch.cuda.Stream().record_event())
    attempt("triton_cached", lambda: add_one[(x.numel() // 1024,)](x, x.numel(), B=1024))
    attempt("triton_new_compile", lambda: add_one[(x.numel() // 512,)](x, x.numel(), B=512))

    def profile():
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
            (x + 1).sum()
            torch.cuda.synchronize()
        if not [e for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA]:
            raise RuntimeError("no CUDA events")

    attempt("profiler", profile)
    attempt("thread", lambda: threading.Thread(target=lambda: None).start())
    attempt("subprocess", lambda: subprocess.run(["true"], check=True))
    attempt("ipc_event", lambda: torch.cuda.Event(interprocess=True).ipc_handle())
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--role", default="trusted", choices=["trusted", "candidate", "ticks", "seccomp"])
    ap.add_argument("--gate", default="sleep,flag")
    ap.add_argument("--works", default=",".join(WORKS))
    ap.add_argument("--n", type=int, default=200)
    args = ap.parse_args()
    import faulthandler

    faulthandler.dump_traceback_later(60, exit=True)  # a hung probe says where it hangs
    if args.role == "candidate":
        candidate()
        return
    if args.role == "ticks":
        rows = [ticks()]
    elif args.role == "seccomp":
        rows = seccomp_probe()
    else:
        rows = []
        for gate in args.gate.split(","):
            trusted(gate, args.works.split(","), args.n)  # prints each row as it is measured
    for r in rows:
        print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
