"""benchmarks/service_load.py's account of where the served jobs' time went, read from the database a service
stores into: the baselines measured and the waits for native builds apart from the evaluations' own work."""

from __future__ import annotations

import importlib.util

from solbench.schedule.devices import Slot
from solbench.schedule.queue import JobQueue
from tests.paths import ROOT
from tests.schedule.helpers import evaluation, spec


def _script():
    loaded = importlib.util.spec_from_file_location("service_load", ROOT / "benchmarks" / "service_load.py")
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    return module


def test_the_served_time_is_split_into_baselines_builds_and_the_evaluations_own(tmp_path):
    db = tmp_path / "s.db"
    q = JobQueue(db)
    slot = Slot("cpu:0", "cpu")
    ids = q.submit([spec(), spec(), spec()])
    spent = {ids[0]: (10.0, {"worker": 4.0, "baselines": 6.0}), ids[1]: (53.0, {"worker": 3.0, "build": 50.0}),
             ids[2]: (5.0, {"worker": 5.0})}
    for _ in ids:
        job = q.claim("slot", 60)
        elapsed, phases = spent[job.id]
        ev = evaluation(job, slot).model_copy(update={"elapsed_s": elapsed, "phases": phases})
        assert q.finish(job, ev, "{}") is not None
    script = _script()
    out = script.spent(str(db), ids, n_workloads=12)
    assert out == {"evaluations_s": 68.0, "baselines_s": 6.0, "build_s": 50.0, "own_s": 12.0,
                   "workloads_per_hour_own": 3600.0}
    assert script.spent(str(db), ids[2:], n_workloads=4)["own_s"] == 5.0  # only the jobs named
