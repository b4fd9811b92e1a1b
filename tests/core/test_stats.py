from __future__ import annotations

import math

import numpy as np
import pytest

from paperflow.core.stats import bootstrap_ci, fmt_mean_se, linear_fit, mean_se, paired_diff, t_ci, wilson


def test_mean_se_and_format():
    m, se = mean_se([1.0, 2.0, 3.0])
    assert m == 2.0 and se == pytest.approx(1 / math.sqrt(3))
    assert fmt_mean_se([1.0, 2.0, 3.0]) == "2.000 ± 0.577 (3 seeds)"
    assert mean_se([4.0]) == (4.0, None)
    assert fmt_mean_se([0.25]) == "0.250 (1 seed, no s.e.)"  # never '± 0.000'
    with pytest.raises(ValueError):
        mean_se([])


def test_t_ci_matches_scipy_and_covers_mean():
    x = [0.1, 0.4, 0.35, 0.2, 0.3]
    e = t_ci(x)
    from scipy import stats

    lo, hi = stats.t.interval(0.95, len(x) - 1, loc=np.mean(x), scale=stats.sem(x))
    assert e.lo == pytest.approx(lo) and e.hi == pytest.approx(hi) and e.n == 5
    assert t_ci([1.0]).has_ci is False


def test_paired_diff_uses_pairs():
    a, b = [1.0, 2.0, 3.0], [0.9, 1.9, 2.9]
    d = paired_diff(a, b)
    assert d.value == pytest.approx(0.1) and d.lo == pytest.approx(0.1) and d.hi == pytest.approx(0.1)
    with pytest.raises(ValueError):
        paired_diff([1.0], [1.0, 2.0])


def test_wilson_known_values():
    e = wilson(0, 100)
    assert e.value == 0 and e.lo == 0 and 0.03 < e.hi < 0.04
    e = wilson(50, 100)
    assert e.lo == pytest.approx(0.4038, abs=1e-3) and e.hi == pytest.approx(0.5962, abs=1e-3)


def test_bootstrap_ci_contains_statistic():
    x = np.random.default_rng(0).normal(1.0, 1.0, size=200)
    e = bootstrap_ci(x, seed=1)
    assert e.lo < e.value < e.hi and e.lo < 1.0 < e.hi + 0.2


def test_linear_fit_slope_r2_monotone():
    x = np.log10([1e3, 1e4, 1e5, 1e6])
    f = linear_fit(x, 0.5 * x + 1)
    assert f.slope == pytest.approx(0.5) and f.r2 == pytest.approx(1.0) and f.monotone
    g = linear_fit([1, 2, 3, 4], [1.0, 0.5, 1.2, 0.9])
    assert not g.monotone and g.r2 < 0.5 and g.lo < g.slope < g.hi
    with pytest.raises(ValueError):
        linear_fit([1, 1], [2, 3])


def test_two_level_bootstrap_covers_the_mean_and_widens_with_seed_spread():
    from paperflow.core.stats import two_level_bootstrap

    rng = np.random.default_rng(0)
    items = rng.normal(0.0, 1.0, 300)
    same = two_level_bootstrap(np.stack([items, items, items]) + 1.0, n_boot=500)
    assert same.lo < 1.0 < same.hi and same.n == 300
    spread = two_level_bootstrap(np.stack([items - 2, items, items + 2]) + 1.0, n_boot=500)
    assert (spread.hi - spread.lo) > 2 * (same.hi - same.lo)
    assert not two_level_bootstrap(np.ones((3, 1))).has_ci


def test_paired_two_level_bootstrap_cancels_shared_item_effects():
    """Two arms on the same items: item difficulty is shared, so the paired CI of the difference is far
    narrower than the spread of the items; one item gives no CI."""
    from paperflow.core.stats import paired_two_level_bootstrap

    rng = np.random.default_rng(0)
    items = rng.normal(0, 5, 40)  # large shared item effects
    a = items + 1.0 + rng.normal(0, 0.1, (3, 40))  # 3 seeds
    b = items + rng.normal(0, 0.1, (3, 40))
    e = paired_two_level_bootstrap([a, b], lambda x, y: x.mean(-1) - y.mean(-1), 1000, 0)
    assert e.lo < 1.0 < e.hi and e.hi - e.lo < 0.2 and e.n == 40
    unpaired = paired_two_level_bootstrap([a], lambda x: x.mean(-1), 1000, 0)
    assert unpaired.hi - unpaired.lo > 1.0  # the item spread itself
    undefined = paired_two_level_bootstrap([a, b], lambda x, y: np.full(x.shape[:-1], np.nan), 200, 0)
    assert undefined.lo is None  # no finite draws: no CI
    one = paired_two_level_bootstrap([a[:, :1], b[:, :1]], lambda x, y: x.mean(-1) - y.mean(-1), 100, 0)
    assert one.lo is None and one.n == 1
