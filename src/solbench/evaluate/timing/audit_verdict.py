"""The audit's judgment: a candidate's timing held against the trusted side's own clock (``audit``).

What an audit measured (``Audit``: its counted brackets' times per call, less the hand-over of ``Calibration``)
and the rule that decides from it (``verdict``): a median sample under ``AGREE`` of the audit's time, less the
audit's resolution, is a forged time; within the resolution a time is confirmed. The resolution is what the audit
can tell from noise: a fixed tolerance per bracket, shared by its group's calls, and per call the gaps between
calls, or twice the standard error of the brackets' spread, where larger. A first audit may end early where even its
slowest bracket supports the timing (``clearly_confirmed``), and an audit too noisy to convict any time confirms
nothing (``is_blind``).
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass, field
from typing import Any

#: a median sample this far below the audit's time is a forged time (docs/SECURITY.md: measured agreement)
AGREE = {"cuda": 0.8, "cpu": 0.35}
#: the audit's resolution at least, per bracket (a group's calls share it): on the GPU the hand-over between two
#: processes' streams varied by -0.18 to +0.11 ms per bracket on the H200 (docs/PERFORMANCE.md); on the CPU a null
#: candidate's CPU time per call differs from a candidate's harness's by up to about 0.1 ms on the development
#: machine (two processes, two caches)
ABS_TOL_MS = {"cuda": 0.2, "cpu": 0.15}
#: per call besides (GPU): the gaps between a call's kernels and the next call's, which a CUPTI sample leaves out
#: and the null candidate's one kernel per call does not show whole (4.5 us above the timing at decode sizes on
#: the H200 for a one-kernel call, docs/PERFORMANCE.md; more for calls of several kernels)
CALL_TOL_MS = {"cuda": 0.010, "cpu": 0.0}


@dataclass
class Calibration:
    """The hand-over between the trusted worker and a candidate's process, measured against a null one."""

    overhead_ms: float  # median bracket of a null call, less the trusted side's own work and the call
    spread_ms: float  # the brackets' interquartile range
    call_ms: float = 0.0  # GPU: per call in a group, the gap between calls (a null call's kernel included)


@dataclass
class Audit:
    #: "stamps" (GPU: %globaltimer), "stamps_bound" (GPU, late brackets only: ``bounded``) or "cpu_time" (CPU: the
    #: kernel's accounting of the process)
    method: str
    trusted_ms: list[float] = field(default_factory=list)  # per counted bracket: its time less overheads, per call
    #: per late bracket past the warm ones (GPU): the same, an upper bound of the call's time (``bounded``), and its
    #: calls
    bounds: list[tuple[float, int]] = field(default_factory=list)
    overhead_ms: float = 0.0  # the hand-over's, per bracket
    call_ms: float = 0.0  # the gap between calls, per call (GPU)
    own_ms: float = 0.0  # the trusted side's own work inside a bracket
    late: int = 0  # GPU brackets not counted: the host side outlasted the hold
    rechecked: int = 0  # audited calls judged against the reference
    group: int = 1  # calls per bracket, the fewest of any counted one (GPU: ``audit_gpu.group_size``)
    calls: int = 0  # counted calls, over every counted bracket
    short: bool = False  # ended after ``SHORT_LOOK`` brackets, the timing clearly confirmed (``clearly_confirmed``)

    @property
    def median_ms(self) -> float | None:
        """The audit's time (``center``)."""
        if not self.trusted_ms:
            return None
        return center(self.trusted_ms, "cpu" if self.method == "cpu_time" else "cuda")

    def bounded(self) -> "Audit":
        """The audit of the late brackets alone, as upper bounds (method ``stamps_bound``). A call that waits on
        the device inside itself (a synchronisation: ``cudnnDestroy``, a read of a result) cannot be queued whole
        behind any hold, so every bracket of it is late; its stamps still bracket all of its work (its inputs
        exist nowhere before the first, its outputs are read after the second), and the device's waits for its
        launches only lengthen them. Such an audit can confirm a time (``clearly_confirmed``: the timing stands
        against even its slowest bound), never convict one."""
        return dataclasses.replace(self, method="stamps_bound", trusted_ms=[ms for ms, _ in self.bounds], bounds=[],
                                   calls=sum(m for _, m in self.bounds),
                                   group=min((m for _, m in self.bounds), default=self.group), short=False)

    def record(self) -> dict[str, Any]:
        return {"audit_ms": self.median_ms, "audit_calls": self.calls, "audit_group": self.group,
                "audit_method": self.method,
                "audit_overhead_ms": round((self.overhead_ms + self.own_ms) / self.group + self.call_ms, 6),
                "audit_late": self.late,
                "audit_rechecked": self.rechecked}


def verdict(samples_ms: list[float], audit: Audit, calib: Calibration, device: str) -> tuple[str, str | None]:
    """("confirmed" | "forged" | "unconfirmed", why): the timing's median sample held against the audit.

    The audit's time is its median bracket on the GPU and its lower quartile on the CPU, where a call's CPU time
    has a long upper tail (page faults of fresh allocations, a busy neighbour core). A median sample under
    ``AGREE[device]`` of the audit's time, less the audit's resolution (``resolution``), is forged; on the CPU
    also one under that share of its fastest audited call, less the fixed tolerance (noise only adds CPU time).
    Within the resolution a time is confirmed: a forgery smaller than the resolution is not seen (docs/SECURITY.md).
    The agreement asked for is loose: on the H200 an honest call's audited time was up to 1.24 times its timed
    median (a 0.9 ms memory-bound call; twice at decode sizes, by the gaps between calls), on the CPU its audited
    CPU time up to 2.4 times on a busy 2-core machine."""
    xs = sorted(audit.trusted_ms)
    if not samples_ms or not xs:
        return "unconfirmed", "no audited call"
    kind = "cuda" if device != "cpu" else "cpu"
    claimed = statistics.median(samples_ms)
    seen = center(xs, kind)
    floor = AGREE[kind] * seen - resolution(audit, calib, kind)
    if kind == "cpu":
        floor = max(floor, AGREE[kind] * xs[0] - ABS_TOL_MS[kind])
    if claimed < floor:
        return "forged", (f"the timing reported a median of {claimed:.4g} ms, but the trusted side's own clock "
                          f"measured {seen:.4g} ms per call ({audit.calls or len(xs) * audit.group} audited calls, "
                          f"{audit.method}; the timing may report {floor:.4g} ms at least); the time did not come "
                          f"from the work")
    return "confirmed", None


def clearly_confirmed(samples_ms: list[float], audit: Audit, kind: str) -> bool:
    """Whether the timing's median sample stands against even the audit's slowest counted bracket, with only the
    audit's fixed tolerance (``CALL_TOL_MS`` and ``ABS_TOL_MS`` shared by a group's calls) allowed: then
    ``verdict`` confirms it on these brackets whatever their spread (its floor uses their median or lower
    quartile and a resolution at least that tolerance), and more brackets would only refine the audit's time.
    A forged time lies below every bracket of the real work; a disturbed bracket makes the audit go on."""
    if not samples_ms or not audit.trusted_ms:
        return False
    return statistics.median(samples_ms) >= AGREE[kind] * max(audit.trusted_ms) - fixed_tolerance(audit, kind)


def fixed_tolerance(audit: Audit, kind: str) -> float:
    """The least of the audit's resolutions: a bracket's fixed tolerance shared by its group's calls, and the gap
    between calls (``CALL_TOL_MS``)."""
    return CALL_TOL_MS[kind] + ABS_TOL_MS[kind] / max(1, audit.group)


def resolution(audit: Audit, calib: Calibration, kind: str) -> float:
    """The least disagreement the audit tells from noise, per call: the fixed tolerance of a bracket, or twice
    the standard error of its time from its brackets' spread and the calibration's (a bracket's share, for a
    group of calls in one bracket); on the GPU with the gaps between calls (``CALL_TOL_MS``) added."""
    xs, m = audit.trusted_ms, max(1, audit.group)
    noise = max(ABS_TOL_MS[kind] / m, 2 * (spread(xs, kind) + calib.spread_ms / m) / max(1, len(xs)) ** 0.5)
    return CALL_TOL_MS[kind] + noise


def center(xs: list[float], kind: str) -> float:
    """The audit's time: the median bracket on the GPU, the lower quartile on the CPU."""
    return statistics.median(xs) if kind == "cuda" else _quantile(xs, 0.25)


def spread(xs: list[float], kind: str) -> float:
    """The brackets' spread: the interquartile range on the GPU; on the CPU twice the lower tail's width (the
    upper tail is the CPU's own noise, which only adds time)."""
    if kind == "cuda":
        return _quantile(xs, 0.75) - _quantile(xs, 0.25)
    return 2 * (_quantile(xs, 0.25) - _quantile(xs, 0.1))


def _quantile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def is_blind(audit: Audit, calib: Calibration, kind: str) -> bool:
    """Whether an audit that confirmed a time could not have convicted any: by its noise, not by the fixed
    tolerance of a small call (its resolution more than twice that tolerance), even a time of zero would have
    stood against it (``AGREE`` of its time within its resolution). On the busy CPU machine a null candidate's
    calibration now and then read as slow as the calls themselves, or spread by milliseconds: a 2 ms call then
    audited at 0 to 2.5 ms with a resolution of 0.5 to 1.6 ms and confirmed a forged 0.08 ms (about one
    evaluation of ``i21_04`` in ten)."""
    t = audit.median_ms
    if t is None:
        return False
    res = resolution(audit, calib, kind)
    return res > 2 * fixed_tolerance(audit, kind) and AGREE[kind] * t <= res
