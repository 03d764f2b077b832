"""Summary statistics of timing samples (pure Python; used by the trusted side)."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass


@dataclass
class Summary:
    n: int
    median: float
    q1: float
    q3: float
    min: float
    max: float
    mean: float
    ci_low: float  # distribution-free 95% interval of the median
    ci_high: float

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @property
    def ci_rel_halfwidth(self) -> float:
        if self.median <= 0:
            return math.inf
        return (self.ci_high - self.ci_low) / 2 / self.median


def _quantile(sorted_xs: list[float], q: float) -> float:
    if len(sorted_xs) == 1:
        return sorted_xs[0]
    pos = q * (len(sorted_xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def median_ci(sorted_xs: list[float], z: float = 1.96) -> tuple[float, float]:
    """Order-statistic interval for the median (normal approximation to the binomial)."""
    n = len(sorted_xs)
    if n < 6:
        return sorted_xs[0], sorted_xs[-1]
    half = z * math.sqrt(n) / 2
    lo = max(0, math.floor(n / 2 - half))
    hi = min(n - 1, math.ceil(n / 2 + half) - 1)
    return sorted_xs[lo], sorted_xs[hi]


def summarize(samples: list[float]) -> Summary | None:
    xs = sorted(x for x in samples if x is not None and math.isfinite(x))
    if not xs:
        return None
    lo, hi = median_ci(xs)
    return Summary(
        n=len(xs),
        median=statistics.median(xs),
        q1=_quantile(xs, 0.25),
        q3=_quantile(xs, 0.75),
        min=xs[0],
        max=xs[-1],
        mean=statistics.fmean(xs),
        ci_low=lo,
        ci_high=hi,
    )


def converged(samples: list[float], rel: float, min_samples: int) -> bool:
    if len(samples) < min_samples:
        return False
    s = summarize(samples)
    return s is not None and s.ci_rel_halfwidth <= rel
