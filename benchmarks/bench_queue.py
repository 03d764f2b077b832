"""The scheduler's own cost per job: N jobs through the queue and the scheduler on two fake slots whose
"evaluation" is immediate (claim, lease, a minimal evaluation stored with its job in one transaction).

    PYTHONPATH=. python benchmarks/bench_queue.py --jobs 1000
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from solbench.schedule.devices import Slot
from solbench.schedule.queue import JobQueue
from solbench.schedule.scheduler import Scheduler, wait_for
from tests.schedule.helpers import FakeExecutor, spec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1000)
    args = ap.parse_args()
    q = JobQueue(Path(tempfile.mkdtemp()) / "queue.db")
    t0 = time.perf_counter()
    ids = q.submit([spec("rmsnorm") for _ in range(args.jobs)])
    submitted = time.perf_counter() - t0
    t0 = time.perf_counter()
    with Scheduler(q, FakeExecutor([Slot("fake:0", "cpu"), Slot("fake:1", "cpu")]), tick_s=0.05):
        wait_for(q, ids, poll_s=0.05)
    drained = time.perf_counter() - t0
    print(f"{args.jobs} jobs: submitted in {submitted:.2f} s; run and stored on 2 fake slots in {drained:.2f} s "
          f"({drained / args.jobs * 1e3:.2f} ms per job)")


if __name__ == "__main__":
    main()
