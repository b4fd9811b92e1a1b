"""Small statistics every study reports with: mean ± s.e., t and bootstrap CIs, Wilson intervals,
paired differences across seeds, and a log-log slope with its CI. One implementation, used everywhere."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its uncertainty: `lo`/`hi` bound a CI (None when n is too small for one)."""

    value: float
    lo: float | None = None
    hi: float | None = None
    n: int = 1
    se: float | None = None

    @property
    def has_ci(self) -> bool:
        return self.lo is not None and self.hi is not None

    def fmt(self, digits: int = 3, unit: str = "seeds") -> str:
        v = f"{self.value:.{digits}f}"
        u = unit if self.n != 1 else unit.rstrip("s")
        if self.has_ci:
            return f"{v} [{self.lo:.{digits}f}, {self.hi:.{digits}f}] (n = {self.n} {u})"
        return f"{v} (n = {self.n} {u}, no CI)"


def mean_se(x: Sequence[float]) -> tuple[float, float | None]:
    """Mean and standard error (None with fewer than 2 values: one seed has no s.e.)."""
    a = np.asarray(list(x), dtype=float)
    if a.size == 0:
        raise ValueError("mean_se of an empty sample")
    if a.size < 2:
        return float(a.mean()), None
    return float(a.mean()), float(a.std(ddof=1) / math.sqrt(a.size))


def fmt_mean_se(x: Sequence[float], digits: int = 3, unit: str = "seeds") -> str:
    """'0.123 ± 0.004 (3 seeds)'; one value prints '0.123 (1 seed, no s.e.)' — never '± 0.000'."""
    vals = list(x)
    m, se = mean_se(vals)
    n = len(vals)
    if se is None:
        return f"{m:.{digits}f} (1 {unit.rstrip('s')}, no s.e.)"
    return f"{m:.{digits}f} ± {se:.{digits}f} ({n} {unit})"


def t_ci(x: Sequence[float], level: float = 0.95) -> Estimate:
    """Mean with a Student-t CI across independent replicates (seeds)."""
    from scipy import stats

    a = np.asarray(list(x), dtype=float)
    m, se = mean_se(a)
    if se is None:
        return Estimate(m, None, None, int(a.size), None)
    if se == 0.0:
        return Estimate(m, m, m, int(a.size), 0.0)
    h = float(stats.t.ppf(0.5 + level / 2, a.size - 1)) * se
    return Estimate(m, m - h, m + h, int(a.size), se)


def paired_diff(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> Estimate:
    """a − b paired by position (the same seeds), with a t CI of the mean difference."""
    a_, b_ = np.asarray(list(a), float), np.asarray(list(b), float)
    if a_.shape != b_.shape:
        raise ValueError(f"paired_diff needs equal lengths, got {a_.size} and {b_.size}")
    return t_ci(a_ - b_, level)


def bootstrap_ci(x: Sequence[float] | np.ndarray, stat: Callable[[np.ndarray], float] = np.mean,
                 n_boot: int = 2000, level: float = 0.95, seed: int = 0) -> Estimate:
    """Percentile bootstrap CI of `stat` over the first axis of x."""
    a = np.asarray(x, dtype=float)
    n = a.shape[0]
    if n < 2:
        return Estimate(float(stat(a)), None, None, n)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))
    boots = np.array([stat(a[i]) for i in idx])
    q = (1 - level) / 2
    return Estimate(float(stat(a)), float(np.quantile(boots, q)), float(np.quantile(boots, 1 - q)), n,
                    float(boots.std(ddof=1)))


def two_level_bootstrap(x: Sequence[Sequence[float]] | np.ndarray, n_boot: int = 2000, level: float = 0.95,
                        seed: int = 0) -> Estimate:
    """Mean of a (seeds, items) matrix with a percentile CI that resamples seeds, then items (paired
    designs: every seed evaluated on the same items). n = the number of items; one item: no CI."""
    a = np.asarray(x, dtype=float)
    if a.ndim != 2:
        raise ValueError(f"two_level_bootstrap needs a (seeds, items) matrix, got shape {a.shape}")
    S, Q = a.shape
    val = float(a.mean())
    if Q < 2 or S < 1:
        return Estimate(val, None, None, Q)
    rng = np.random.default_rng(seed)
    rows = a[rng.integers(0, S, (n_boot, S))].mean(axis=1)  # (n_boot, Q): seed-resampled mean per item
    boots = np.take_along_axis(rows, rng.integers(0, Q, (n_boot, Q)), axis=1).mean(axis=1)
    q = (1 - level) / 2
    return Estimate(val, float(np.quantile(boots, q)), float(np.quantile(boots, 1 - q)), Q, float(boots.std(ddof=1)))


def paired_two_level_bootstrap(arrays: Sequence[np.ndarray], stat: Callable[..., np.ndarray], n_boot: int, seed: int,
         level: float = 0.95) -> Estimate:
    """stat(*arrays) with a two-level percentile CI, for several arms evaluated on the same items (houses,
    queries, ...). Each (seeds, items) array is first resampled over its own seeds and averaged per item,
    then every array is resampled by the same item indices (paired). `stat` maps (..., items) arrays to
    (...) values, vectorised over the bootstrap draws (e.g. a difference of item means, or a ratio that
    may be NaN: NaN draws are dropped). n = items. `two_level_bootstrap` is the one-array mean case
    (it draws its indices in another order, so the two give different draws)."""
    h = arrays[0].shape[1]
    val = float(stat(*[a.mean(axis=0)[None] for a in arrays])[0])
    if h < 2:
        return Estimate(val, None, None, h)
    rng = np.random.default_rng(seed)
    hi = rng.integers(0, h, (n_boot, h))
    res = []
    for a in arrays:
        rows = a[rng.integers(0, a.shape[0], (n_boot, a.shape[0]))].mean(axis=1) if a.shape[0] > 1 else \
            np.broadcast_to(a, (n_boot, h))
        res.append(np.take_along_axis(rows, hi, axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        vals = np.asarray(stat(*res), float)
    vals = vals[np.isfinite(vals)]
    if vals.size < 2 or val != val:
        return Estimate(val, None, None, h)
    q = (1 - level) / 2
    return Estimate(val, float(np.quantile(vals, q)), float(np.quantile(vals, 1 - q)), h, float(vals.std(ddof=1)))


def wilson(k: int, n: int, level: float = 0.95) -> Estimate:
    """Success rate k/n with the Wilson score interval."""
    from scipy import stats

    if n <= 0:
        raise ValueError("wilson needs n > 0")
    z = float(stats.norm.ppf(0.5 + level / 2))
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    lo = 0.0 if k == 0 else max(0.0, centre - half)
    hi = 1.0 if k == n else min(1.0, centre + half)
    return Estimate(p, lo, hi, n)


@dataclass(frozen=True)
class SlopeFit:
    slope: float
    lo: float | None
    hi: float | None
    r2: float
    n: int
    monotone: bool  # y strictly monotone in x in the fitted direction

    def estimate(self) -> Estimate:
        return Estimate(self.slope, self.lo, self.hi, self.n)


def linear_fit(x: Sequence[float], y: Sequence[float], level: float = 0.95) -> SlopeFit:
    """Least-squares slope of y on x with its t CI, R² and whether y is monotone in the slope's direction.
    For a log-log slope pass logs."""
    from scipy import stats

    xa, ya = np.asarray(list(x), float), np.asarray(list(y), float)
    n = xa.size
    if n < 2 or np.ptp(xa) == 0:
        raise ValueError("linear_fit needs ≥ 2 distinct x values")
    res = stats.linregress(xa, ya)
    order = np.argsort(xa)
    dy = np.diff(ya[order])
    monotone = bool(np.all(dy < 0)) if res.slope < 0 else bool(np.all(dy > 0))
    if n > 2:
        h = float(stats.t.ppf(0.5 + level / 2, n - 2)) * float(res.stderr)
        lo, hi = float(res.slope) - h, float(res.slope) + h
    else:
        lo = hi = None
    r2 = float(res.rvalue ** 2) if np.ptp(ya) > 0 else 0.0
    return SlopeFit(float(res.slope), lo, hi, r2, n, monotone)
