"""The trusted side's plan of a timing (evaluate/timing/stopping.py): rounds, the stopping rule and the ring's capacity."""

from solbench.evaluate.timing.rounds import Round, TimingConfig
from solbench.evaluate.timing.stopping import Plan, measure


def _runner(ms):
    rounds = []

    def run(kinds):
        rounds.append(list(kinds))
        return Round(samples_ms=[ms(len(rounds), i) for i, k in enumerate(kinds) if k == "held"],
                     wall_ms=[1.0] * kinds.count("wall"), wall_event_ms=[1.0] * kinds.count("wall"))
    return run, rounds


def test_the_first_round_warms_up_then_walls_then_samples():
    run, rounds = _runner(lambda r, i: 1.0)
    t = measure(run, TimingConfig(), True, 64)
    assert rounds[0][:5] == ["warm", "warm", "wall", "wall", "wall"] and set(rounds[0][5:]) == {"held"}
    assert len(t.samples_ms) >= 10 and len(t.wall_ms) == 3 and t.calls == sum(len(r) for r in rounds)


def test_a_small_ring_splits_the_first_round_and_never_exceeds_its_capacity():
    run, rounds = _runner(lambda r, i: 1.0)
    measure(run, TimingConfig(), True, 2)
    assert all(len(r) <= 2 for r in rounds)
    flat = [k for r in rounds for k in r]
    assert flat[:5] == ["warm", "warm", "wall", "wall", "wall"] and flat.count("held") >= 10


def test_noisy_samples_run_until_the_budget_or_the_cap():
    import random

    rng = random.Random(1)
    run, rounds = _runner(lambda r, i: rng.uniform(1.0, 3.0))
    t = measure(run, TimingConfig(max_samples=60), True, 16)
    assert len(t.samples_ms) <= 60 and len(rounds) >= 4


def test_the_cpu_plan_has_no_wall_calls_and_its_own_targets():
    p = Plan(TimingConfig(), False, 8)
    from solbench.evaluate.timing.rounds import Timing

    kinds = p.next(Timing(samples_ms=[]), 0.0, None)
    assert kinds[0] == "warm" and "wall" not in kinds and kinds.count("held") == TimingConfig().cpu_min_samples
