"""Clock (b) of benchmarks/ncu_agreement.py: one Nsight Compute run over ncu_target.py, every step bounded.

``ncu --cache-control all --clock-control none --metrics gpu__time_duration.sum --csv --nvtx --nvtx-include
"solbench_ncu/"``: only the cases' calls are profiled (not the input generation, not the warm-up). The run is a
session of its own, ended as a group at its timeout (ncu and the Python it started alike).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import ncu_report as rep
from ncu_cases import Case

# ---------------------------------------------------------------- bounded subprocesses


def run_bounded(cmd: list[str], timeout_s: float, env: dict[str, str] | None = None) -> tuple[int | None, str, str, bool]:
    """(returncode, stdout, stderr, timed_out): the command in a session of its own, so that at the timeout the
    whole process group (ncu and the Python it launched) is ended: SIGTERM, then SIGKILL 5 s later."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                            env=env, start_new_session=True, errors="replace")
    try:
        out, err = proc.communicate(timeout=max(timeout_s, 1.0))
        return proc.returncode, out, err, False
    except subprocess.TimeoutExpired:
        for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                out, err = proc.communicate(timeout=wait)
                return proc.returncode, out or "", err or "", True
            except subprocess.TimeoutExpired:
                continue
        return None, "", "", True


def find_ncu(explicit: str | None = None) -> str | None:
    for cand in (explicit, shutil.which("ncu"), "/usr/local/cuda/bin/ncu"):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def _tail(text: str, n: int = 400) -> str:
    return " | ".join(ln.strip() for ln in text.strip().splitlines()[-4:])[-n:]


# ---------------------------------------------------------------- clock (b): Nsight Compute


def ncu_times(cases: list[Case], launches: int, seed: int, timeout_s: float, counts: dict[str, int],
              ncu: str | None = None) -> dict[str, Any]:
    """One ncu run over ncu_target.py for every case: {"per_case": {case: ncu figures}, "error": ..., ...}. A flat
    retry (no per-call ranges, attribution by order) when the nested ranges selected no kernel and time is left."""
    started = time.monotonic()
    path = find_ncu(ncu)
    res: dict[str, Any] = {"path": path, "per_case": {}, "error": None, "kernels": []}
    if path is None:
        res["error"] = "ncu not found (not on PATH, no /usr/local/cuda/bin/ncu)"
        return res
    rc, out, err, _ = run_bounded([path, "--version"], 20)
    res["version"] = next((ln.strip() for ln in out.splitlines() if "version" in ln.lower()), _tail(out, 200)) \
        if rc == 0 else None
    names = [c.name for c in cases]
    for flat in (False, True):
        left = timeout_s - (time.monotonic() - started)
        if left < 30:
            res["error"] = "; ".join(filter(None, [res["error"], f"no time left for ncu ({left:.0f} s)"]))
            break
        with tempfile.TemporaryDirectory(prefix="solbench-ncu-") as tmp:
            manifest = Path(tmp) / "manifest.json"
            cmd = [path, "--cache-control", "all", "--clock-control", "none", "--metrics", rep.METRIC, "--csv",
                   "--nvtx", "--nvtx-include", f"{rep.PROFILED_RANGE}/", sys.executable, str(HERE / "ncu_target.py"),
                   "--cases", ",".join(names), "--launches", str(launches), "--seed", str(seed),
                   "--manifest", str(manifest), "--deadline-s", str(max(left - 40, 10))] + (["--flat"] if flat else [])
            t0 = time.monotonic()
            rc, out, err, timed_out = run_bounded(cmd, left, dict(os.environ))
            res["ncu_s"] = round(time.monotonic() - t0, 1)
            res["flat"] = flat
            try:
                info = json.loads(manifest.read_text())
            except (OSError, ValueError):
                info = {}
        res["target_errors"] = info.get("errors", {})
        try:
            kernels = rep.parse_ncu_csv(out)
        except ValueError as exc:
            how = "timed out" if timed_out else f"rc {rc}"
            res["error"] = f"ncu ({how}): {exc}: {_tail(out + chr(10) + err)}"
            if not flat and not timed_out and ("No kernels were profiled" in out + err or rc == 0):
                continue  # the nested NVTX filter matched nothing: once more with the flat ranges
            break
        res["error"] = None
        res["kernels"] = kernels
        per_call, method, problems = rep.attribute(kernels, names, launches, counts, info.get("ran"))
        res["attribution"] = method
        if problems:
            res["error"] = "; ".join(problems)
        for name, calls in per_call.items():
            res["per_case"][name] = rep.ncu_case_time(calls)
        break
    return res
