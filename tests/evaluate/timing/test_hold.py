"""The spin-kernel hold's length (evaluate/timing/rounds.py ``Hold``): it covers the call and the harness's own
launches before a sample's end event."""

from solbench.evaluate.timing.rounds import Hold, TimingConfig

CLOCK_MHZ = 1000.0  # 1e9 cycles a second: a microsecond is 1,000 cycles


def _hold(**cfg) -> Hold:
    return Hold(TimingConfig(**cfg), CLOCK_MHZ)


def _us(cycles: int) -> float:
    return cycles / 1e3


def test_no_hold_before_a_calibration_nor_with_the_hold_off():
    assert _hold().cycles == 0
    off = _hold(hold=False)
    off.calibrate(100e-6)
    off.shorten([100e-6], [100e-6])
    assert off.cycles == 0


def test_the_hold_covers_the_harness_launches_as_well_as_the_call():
    h = _hold()
    h.calibrate(20e-6)
    call_only = _us(h.cycles)
    assert abs(call_only - (1.5 * 20 + 50)) < 0.01
    h.shorten([20e-6] * 10, [60e-6] * 10)  # the harness's flush, events and marks: 60 us of the host
    assert abs(_us(h.cycles) - (1.5 * (20 + 60) + 50)) < 0.01
    # the host's enqueue from the spin kernel to the end event (80 us) lies inside the hold with room to spare
    assert _us(h.cycles) > 80 + 50


def test_the_call_share_only_shortens_and_the_harness_share_follows_each_batch():
    h = _hold()
    h.calibrate(200e-6)  # a warm-up call that still compiled
    h.shorten([20e-6, 21e-6, 19e-6], [30e-6])
    assert abs(_us(h.cycles) - (1.5 * (20 + 30) + 50)) < 0.01
    # a call that blocks on the stream times its wait on the hold: its host time must not lengthen the hold
    h.shorten([5e-3] * 10, [30e-6] * 10)
    assert abs(_us(h.cycles) - (1.5 * (20 + 30) + 50)) < 0.01
    # a launch of the harness that waited on a full launch queue, or a collector's pause, does not set it
    h.shorten([20e-6] * 10, [2e-3, 90e-6, 95e-6, 2e-3, 3e-3])
    assert abs(_us(h.cycles) - (1.5 * (20 + 90) + 50)) < 0.01
    h.shorten([20e-6] * 10, [10e-6] * 10)
    assert abs(_us(h.cycles) - (1.5 * (20 + 10) + 50)) < 0.01


def test_the_hold_is_capped():
    h = _hold(max_hold_s=0.001)
    h.calibrate(0.01)
    assert _us(h.cycles) == 1000
