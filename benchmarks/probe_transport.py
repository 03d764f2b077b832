"""Probe the costs that decide how the trusted side and the candidate process exchange tensors.

Measures, on this machine:
1. the phases of a fresh Python process: interpreter, `import torch`, CUDA context, `import triton`
   (bare and inside the user/PID/network namespaces the candidate sandbox uses);
2. whether CUDA IPC (torch's shared CUDA tensors) works from this process into a namespaced child;
3. host-staged transfer through a shared memory-mapped file: device -> file -> device, in GB/s.

Usage: python benchmarks/probe_transport.py [--mb 512]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

UNSHARE = ["unshare", "--user", "--map-root-user", "--net", "--pid", "--fork", "--mount-proc", "--kill-child"]

PHASES = r"""
import time, json, sys
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
ok = torch.cuda.is_available()
if ok:
    torch.zeros(1, device="cuda"); torch.cuda.synchronize()
t2 = time.perf_counter()
try:
    import triton
except ImportError:
    pass
t3 = time.perf_counter()
print(json.dumps({"import_torch": t1 - t0, "cuda_init": t2 - t1, "import_triton": t3 - t2}))
"""

IPC_CHILD = r"""
import pickle, sys, torch
rebuild, args = pickle.loads(bytes.fromhex(sys.stdin.readline().strip()))
t = rebuild(*args)
t.add_(1)
torch.cuda.synchronize()
print("ok", float(t.sum()))
"""


def phases(wrap: list[str]) -> dict:
    t = time.perf_counter()
    r = subprocess.run(wrap + [sys.executable, "-c", PHASES], capture_output=True, text=True, timeout=120,
                       stdin=subprocess.DEVNULL)
    total = time.perf_counter() - t
    try:
        out = json.loads(r.stdout.strip().splitlines()[-1])
    except Exception:
        return {"error": (r.stderr or r.stdout)[-500:]}
    out["total"] = total
    return out


def ipc(wrap: list[str]) -> str:
    import pickle

    import torch
    from torch.multiprocessing.reductions import reduce_tensor

    x = torch.zeros(1024, device="cuda")
    payload = pickle.dumps(reduce_tensor(x)).hex()
    r = subprocess.run(wrap + [sys.executable, "-c", IPC_CHILD], input=payload + "\n", capture_output=True,
                       text=True, timeout=120)
    torch.cuda.synchronize()
    seen = float(x.sum())
    return f"rc={r.returncode} child={r.stdout.strip()[-80:]!r} parent_sum={seen} err={r.stderr.strip()[-300:]!r}"


def staged(mb: int) -> dict:
    import torch

    n = mb << 20
    src = torch.randint(0, 255, (n,), dtype=torch.uint8, device="cuda")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "buf")
        with open(path, "wb") as f:
            f.truncate(n)
        shared = torch.from_file(path, shared=True, size=n, dtype=torch.uint8)
        best_out = best_in = 1e9
        for _ in range(3):
            torch.cuda.synchronize()
            t = time.perf_counter()
            shared.copy_(src)
            best_out = min(best_out, time.perf_counter() - t)
            t = time.perf_counter()
            back = shared.to("cuda")
            torch.cuda.synchronize()
            best_in = min(best_in, time.perf_counter() - t)
        assert torch.equal(back, src)
    return {"device_to_file_GBps": n / best_out / 1e9, "file_to_device_GBps": n / best_in / 1e9}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=512)
    a = ap.parse_args()
    res = {"bare": phases([]), "namespaces": phases(UNSHARE)}
    import torch

    if torch.cuda.is_available():
        res["ipc_bare"] = ipc([])
        res["ipc_namespaces"] = ipc(UNSHARE)
        res["staged"] = staged(a.mb)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
