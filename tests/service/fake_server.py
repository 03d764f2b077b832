"""The service with the real queue and scheduler on two fake devices whose "evaluation" is a stored result after
a delay: ``python -m tests.service.fake_server DB PORT DELAY_S`` (a test kills it and starts it again)."""

import sys
from pathlib import Path

import uvicorn

from solbench.schedule.devices import Slot
from solbench.schedule.queue import JobQueue
from solbench.schedule.scheduler import Scheduler
from solbench.service.app import create_app
from tests.schedule.helpers import FakeExecutor

if __name__ == "__main__":
    db, port, delay = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    executor = FakeExecutor([Slot("fake:0", "cpu"), Slot("fake:1", "cpu")], delay_s=delay)
    sched = Scheduler(JobQueue(db), executor, tick_s=0.05)
    uvicorn.run(create_app(db, sched, open_access=True), host="127.0.0.1", port=port, log_level="error")
