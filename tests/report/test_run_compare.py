"""Two runs compared (report/run_compare.py): Mann-Whitney on the samples, a change called only when it is
significant and beyond the noise, the geometric mean over solutions."""

import random

from solbench.records.verdict import Evaluation, WorkloadResult
from solbench.report.run_compare import compare_runs, mann_whitney_p


def run(times: dict[str, float], spread: float = 0.01, seed: int = 0) -> list[Evaluation]:
    rng = random.Random(seed)
    out = []
    for name, t in times.items():
        samples = [t * (1 + rng.gauss(0, spread)) for _ in range(30)]
        w = WorkloadResult(uuid="w1", verdict="passed", time_ms=sorted(samples)[15], samples_ms=samples)
        out.append(Evaluation(problem="p", problem_dir="", problem_digest="d", solution=name, solution_digest=name,
                              language="triton", hardware="h200", device="cuda", verdict="passed", workloads=[w]))
    return out


def test_mann_whitney_matches_the_textbook_value():
    # U = 0 for 5 against 5 fully separated samples: z = (12.5 - 0.5) / sqrt(25 * 11 / 12), p = 0.0122
    assert abs(mann_whitney_p([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) - 0.0122) < 5e-4
    assert mann_whitney_p([1, 2], [3, 4]) is None
    assert mann_whitney_p([1.0] * 5, [1.0] * 5) == 1.0


def test_a_real_change_is_called_and_noise_is_not():
    a = run({"faster": 1.0, "slower": 1.0, "same": 1.0}, seed=1)
    b = run({"faster": 0.8, "slower": 1.25, "same": 1.0}, seed=2)
    data = compare_runs(a, b)
    calls = {r["solution"]: r["call"] for r in data["rows"]}
    assert calls == {"faster": "faster", "slower": "slower", "same": "same"}
    assert abs(data["geomean_ratio"] - (0.8 * 1.25 * 1.0) ** (1 / 3)) < 0.02


def test_a_significant_change_within_the_noise_is_not_a_change():
    a, b = run({"x": 1.0}, spread=0.001, seed=1), run({"x": 1.005}, spread=0.001, seed=2)
    (row,) = compare_runs(a, b)["rows"]
    assert row["workloads"][0]["p"] < 0.01 and row["call"] == "same"


def test_solutions_in_one_run_only_are_listed_apart():
    data = compare_runs(run({"x": 1.0, "gone": 1.0}), run({"x": 1.0, "new": 1.0}))
    assert [r["solution"] for r in data["rows"]] == ["x"]
    assert data["only_a"] == [("p", "gone")] and data["only_b"] == [("p", "new")]
