import pytest

from solbench.errors import UserError
from solbench.evaluate.timing.stats import converged, summarize
from solbench.records.verdict import Evaluation, WorkloadResult, worst
from solbench.store.db import Store


def test_summary_and_median_interval():
    xs = [float(i) for i in range(1, 101)]
    s = summarize(xs)
    assert s.median == 50.5 and s.min == 1 and s.max == 100
    assert s.ci_low < 50.5 < s.ci_high
    assert converged([1.0] * 20, 0.005, 10)
    assert not converged([1.0, 2.0] * 10, 0.005, 10)
    assert not converged([1.0] * 5, 0.005, 10)


def test_worst_verdict_order():
    assert worst(["passed", "incorrect_numerical", "unsupported"]) == "incorrect_numerical"
    assert worst(["passed", "timeout", "incorrect_shape"]) == "timeout"
    assert worst(["passed", "passed"]) == "passed"


def _ev():
    return Evaluation(problem="p", problem_dir="/x", problem_digest="d", solution="s", solution_digest="sd",
                      language="pytorch", hardware="h200", device="cuda", verdict="passed", seed=123,
                      workloads=[WorkloadResult(uuid="w", verdict="passed", time_ms=1.0, samples_ms=[1.0, 1.1],
                                                max_abs_err=float("inf"))])


def test_store_roundtrip_keeps_raw_samples_and_never_overwrites(tmp_path):
    store = Store(tmp_path / "r.db")
    a = store.add_evaluation(_ev(), "{}")
    b = store.add_evaluation(_ev(), "{}")
    assert a != b and store.evaluation_ids() == [a, b]
    ev, _ = store.evaluation(a)
    assert ev.workloads[0].samples_ms == [1.0, 1.1] and ev.seed == 123


def test_baseline_cache_key_includes_software(tmp_path):
    store = Store(tmp_path / "r.db")
    store.put_baseline("d", "w", "H200", "torch=2.11", "eager", "passed", 1.5, [1.5])
    assert store.get_baseline("d", "w", "H200", "torch=2.11", "eager")["time_ms"] == 1.5
    assert store.get_baseline("d", "w", "H200", "torch=2.12", "eager") is None


def test_not_a_database(tmp_path):
    p = tmp_path / "junk.db"
    p.write_text("this is not sqlite" * 100)
    with pytest.raises(UserError):
        Store(p)


def test_unknown_evaluation(tmp_path):
    with pytest.raises(UserError, match="no evaluation"):
        Store(tmp_path / "r.db").evaluation(42)


def test_older_database_gains_new_columns_and_keeps_its_rows(tmp_path):
    import sqlite3

    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    # a baselines table as an older solbench wrote it: no `message` column
    conn.execute("CREATE TABLE baselines (problem_digest TEXT NOT NULL, workload TEXT NOT NULL, device_name TEXT NOT "
                 "NULL, software TEXT NOT NULL, kind TEXT NOT NULL, verdict TEXT NOT NULL, time_ms REAL, samples_ms "
                 "TEXT, created TEXT NOT NULL, PRIMARY KEY (problem_digest, workload, device_name, software, kind))")
    conn.execute("INSERT INTO baselines VALUES ('d','w','H200','sw','eager','passed',1.5,'[1.5]','then')")
    conn.commit()
    conn.close()
    store = Store(path)
    assert store.get_baseline("d", "w", "H200", "sw", "eager") == {"verdict": "passed", "time_ms": 1.5,
                                                                   "message": None}
    store.put_baseline("d", "w2", "H200", "sw", "eager", "runtime_error", None, [], message="boom")
    assert store.get_baseline("d", "w2", "H200", "sw", "eager")["message"] == "boom"
