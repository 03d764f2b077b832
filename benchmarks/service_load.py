"""The evaluation service under a bounded load: its own overhead per request, its throughput, and whether a
solution's kernel times stay put while it is busy (issue 24's targets; figures in docs/PERFORMANCE.md).

It starts ``solbench serve`` on a free loopback port (a fresh token in DB), then:

1. **idle**: the reference solution (``--reference``, default rmsnorm's Triton example) alone, its public
   workloads' times;
2. **load**: every example solution of the selected problems submitted one request each, while ``--pollers``
   threads send ``--gets`` GET requests in all (a fixed number: the test stops by itself) for random submitted
   jobs; the reference solution is submitted again in the middle of the load;
3. it waits for every job (long polls, not counted as overhead) until ``--limit-s`` from the start, cancels what
   has not ended by then, and reports: each request kind's latency (p50, p99, max; target p99 under 20 ms on
   loopback) as this client measured it and as the server did (its ``Server-Timing``: from the request reaching
   the app to its answer), evaluations and workloads per hour from the first submission to the last result (to
   the bound, where jobs were left unfinished), where the done jobs' time went (``spent``: baselines measured,
   waits for native builds, the evaluations' own work, and the rate that work alone gives), and the reference's
   per-workload time under load against idle (target: medians within 1%). The report is written also when a
   step fails.

    python benchmarks/service_load.py --db gpu.db --device cuda --suite starter --out service.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

TARGET_P99_S = 0.020
TARGET_DRIFT = 0.01


def quantiles(xs: list[float]) -> dict:
    xs = sorted(xs)
    if not xs:
        return {"n": 0}
    pick = lambda q: xs[min(len(xs) - 1, int(q * len(xs)))]  # noqa: E731
    return {"n": len(xs), "p50_ms": round(pick(0.5) * 1e3, 2), "p99_ms": round(pick(0.99) * 1e3, 2),
            "max_ms": round(xs[-1] * 1e3, 2)}


def start_service(args, port: int) -> tuple[subprocess.Popen, str]:
    from solbench.service.tokens import Tokens

    token = Tokens(args.db).add(f"load-{os.getpid()}-{int(time.time())}", rate=1_000_000)
    cmd = [sys.executable, "-m", "solbench.cli", "serve", "--db", args.db, "--port", str(port), "--device",
           args.device, "--slots", str(args.slots)]
    log = open(Path(args.out).with_suffix(".serve.log"), "w")
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    return proc, token


def bodies(args) -> list[tuple[str, dict]]:
    """(problem, Solution JSON) of every example solution of the selection."""
    from solbench.problems.problem import load_problem
    from solbench.problems.solution import load_solution
    from solbench.problems.suite import select_problems

    problems = [load_problem(p) for p in args.problem] if args.problem else select_problems(suite=args.suite)
    return [(p.name, load_solution(s, p.definition).model_dump()) for p in problems for s in p.example_solutions]


#: (kind, when it started, seconds taken, the server's own seconds or None) of every request: when the slow ones
#: came, and whether the server or the way to it took the time
STARTS: list[tuple[str, float, float, float | None]] = []
#: the server's own time of this thread's last answer (its ``Server-Timing`` header)
LAST = threading.local()


def heard(response) -> None:
    """The client's response hook: the answer's server time, for ``timed`` in the same thread."""
    from solbench.service.middleware import server_ms

    ms = server_ms(response.headers)
    LAST.server_s = None if ms is None else ms / 1e3


def timed(latency: dict, kind: str, fn):
    LAST.server_s = None
    t0 = time.perf_counter()
    out = fn()
    took = time.perf_counter() - t0
    latency.setdefault(kind, []).append(took)
    if LAST.server_s is not None:
        latency.setdefault(f"{kind} (server)", []).append(LAST.server_s)
    STARTS.append((kind, t0, took, LAST.server_s))
    return out


def slowest(latency: dict, n: int = 12) -> dict:
    """The slowest request of each kind and where it stood in the sequence of its kind; the ``n`` slowest of all
    with when each started (seconds from the first request of the load), to tell a start-up's from a steady cost."""
    first = min((r[1] for r in STARTS), default=0.0)
    worst = sorted(STARTS, key=lambda r: -r[2])[:n]
    return {**{k: {"index": v.index(max(v)), "ms": round(max(v) * 1e3, 2)} for k, v in latency.items() if v},
            "all": [{"kind": k, "at_s": round(at - first, 2), "ms": round(took * 1e3, 2),
                     "server_ms": None if srv is None else round(srv * 1e3, 2)} for k, at, took, srv in worst]}


def spent(db: str, job_ids: list[int], n_workloads: int) -> dict:
    """Where the done jobs' time went, from the database the service stores into: their evaluations' seconds, of
    them the baselines measured (a problem's first job) and the waits for a native build, and the rest (the
    evaluations' own work); with the workloads per hour that rest alone would give, the service's rate once its
    baselines are measured and its builds done."""
    import sqlite3

    marks = ",".join("?" * len(job_ids)) or "NULL"
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute(f"SELECT e.elapsed_s, e.summary FROM jobs j JOIN evaluations e ON e.id = j.evaluation_id "
                            f"WHERE j.id IN ({marks})", job_ids).fetchall()
    phases = [(json.loads(summary or "{}") or {}).get("phases") or {} for _, summary in rows]
    total = sum(elapsed or 0.0 for elapsed, _ in rows)
    baselines, build = (sum(p.get(k, 0.0) for p in phases) for k in ("baselines", "build"))
    own = max(total - baselines - build, 1e-9)
    return {"evaluations_s": round(total, 1), "baselines_s": round(baselines, 1), "build_s": round(build, 1),
            "own_s": round(own, 1), "workloads_per_hour_own": round(n_workloads / (own / 3600), 1)}


def public_times(job: dict) -> dict[str, float]:
    r = job.get("result") or {}
    return {w["uuid"]: w["time_ms"] for w in r.get("workloads") or [] if w.get("time_ms")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--slots", type=int, default=1)
    ap.add_argument("--suite", default="starter")
    ap.add_argument("--problem", action="append", help="only these problems (default: the suite's)")
    ap.add_argument("--reference", default="rmsnorm", help="the problem whose first example is timed idle and "
                    "under load")
    ap.add_argument("--gets", type=int, default=2000)
    ap.add_argument("--pollers", type=int, default=4)
    ap.add_argument("--limit-s", type=float, default=1500, help="the whole test's bound from the service's start: "
                    "what has not ended by then is cancelled and reported as unfinished")
    ap.add_argument("--out", default="service.json")
    args = ap.parse_args()

    from solbench.cli_serve import SWITCH_S
    from solbench.client import Client

    port = 18000 + os.getpid() % 2000
    proc, token = start_service(args, port)
    client_core = pin_client(args)
    # this client's threads (the pollers, the submitter) hand over the interpreter's lock as often as the
    # server's do (cli_serve.SWITCH_S): a request's time is not a poller's wait behind another's parsing
    sys.setswitchinterval(SWITCH_S)
    # and its start-up's objects (torch's, imported to count the GPUs) stay out of its collections, as the
    # server's do (cli_serve.quiet_collector): a full collection of them here takes 50 to 60 ms on the CPU
    # machine, and would be timed as every poller's request at once
    gc.collect()
    gc.freeze()
    c = Client(f"http://127.0.0.1:{port}", token, max_in_flight=64)
    c.http.event_hooks["response"] = [heard]
    report: dict = {"device": args.device, "slots": args.slots, "limit_s": args.limit_s, "client_core": client_core}
    deadline = time.monotonic() + args.limit_s
    try:
        report["health"] = warm(c, deadline)
        load(c, args, report, deadline)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        Path(args.out).write_text(json.dumps(report, indent=1))  # what was measured, also when a step failed
    print(json.dumps({k: report.get(k) for k in ("requests", "done", "unfinished", "evaluations_per_hour",
                                                 "workloads_per_hour", "wall_s", "spent")}, indent=1))
    print("reference drift under load:", (report.get("reference") or {}).get("median_drift"))


def pin_client(args) -> int | None:
    """This load generator's core, after the service has started with every core in view: one the slots leave,
    beside the HTTP server's own (``cli_serve._split_cores``, with as many slots as the service has: a GPU's each,
    or ``--slots`` on the CPU), so that a request's measured time is the service's, not this process waiting behind
    an evaluation's busy cores; it shares that core with niced builds ahead. None on a host too small to leave one."""
    from solbench.evaluate.native.pool import slot_split

    slots = args.slots
    if args.device != "cpu":
        import torch

        slots = torch.cuda.device_count() or slots
    _, theirs = slot_split(slots)
    if len(theirs) < 2:
        return None
    core = sorted(theirs)[-2]
    os.sched_setaffinity(0, {core})
    return core


def warm(c, deadline: float) -> dict:
    """The service's health once every slot has started (its process and trusted worker), as in steady use."""
    while True:
        try:
            health = c.health()
            if all(s["state"] != "starting" for s in health["slots"].values()):
                return health
        except Exception:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def load(c, args, report: dict, deadline: float) -> None:
    """The idle reference, then every example under load with pollers beside; each wait bounded by ``deadline``,
    jobs not ended by then cancelled. Fills ``report``."""
    left = lambda: max(0.1, deadline - time.monotonic())  # noqa: E731
    work = bodies(args)
    ref = next(b for b in work if b[0] == args.reference)
    latency: dict[str, list[float]] = {}
    idle = c.wait(timed(latency, "submit", lambda: c.submit(ref[0], solution=ref[1])), left())
    ids: list[int] = []
    t_first = time.time()

    def poll(n: int) -> None:
        for _ in range(n):
            if ids:
                jid = random.choice(ids)
                timed(latency, "get", lambda: c.job(jid))
            time.sleep(0.05)

    pollers = [threading.Thread(target=poll, args=(args.gets // args.pollers,)) for _ in range(args.pollers)]
    for t in pollers:
        t.start()
    half = len(work) // 2
    loaded_id = None
    for i, (problem, solution) in enumerate(work):
        ids.append(timed(latency, "submit", lambda: c.submit(problem, solution=solution)))
        if i == half:
            loaded_id = timed(latency, "submit", lambda: c.submit(ref[0], solution=ref[1]))
            ids.append(loaded_id)
    jobs = [c.wait(j, left()) for j in ids]
    for t in pollers:
        t.join()
    done = [j for j in jobs if j["state"] == "done"]
    unfinished = [j["id"] for j in jobs if j["state"] in ("queued", "running")]
    for jid in unfinished:  # the bound reached: the service stops working on them
        c.cancel(jid)
    ended = [j["finished"] for j in done if j.get("finished")]
    t_last = max(ended) if ended and not unfinished else time.time()
    hours = max(t_last - t_first, 1e-9) / 3600
    n_workloads = sum(len(j["result"]["workloads"]) + j["result"]["heldout"]["count"] for j in done)
    loaded = next(j for j in jobs if j["id"] == loaded_id)
    a, b = public_times(idle), public_times(loaded)
    drift = {u: round(b[u] / a[u] - 1, 4) for u in a if u in b}
    report.update({
        "requests": {**{k: quantiles(v) for k, v in latency.items()},
                     "all": quantiles([x for k, v in latency.items() if "server" not in k for x in v]),
                     "all (server)": quantiles([x for k, v in latency.items() if "server" in k for x in v])},
        "slowest": slowest(latency), "evaluations": len(jobs), "done": len(done), "unfinished": len(unfinished),
        "verdicts": {v: sum(j["result"]["verdict"] == v for j in done) for v in
                     sorted({j["result"]["verdict"] for j in done})},
        "wall_s": round(t_last - t_first, 1), "evaluations_per_hour": round(len(done) / hours, 1),
        "workloads_per_hour": round(n_workloads / hours, 1),
        "spent": spent(args.db, [j["id"] for j in done], n_workloads),
        "reference": {"problem": ref[0], "idle_ms": a, "loaded_ms": b, "drift": drift,
                      "median_drift": statistics.median(drift.values()) if drift else None},
        "targets": {"p99_s": TARGET_P99_S, "drift": TARGET_DRIFT},
    })


if __name__ == "__main__":
    main()
