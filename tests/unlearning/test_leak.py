"""leak@k estimator: brute force over all k-subsets, extremes, monotonicity, spec sanity values."""
import itertools
from math import comb

import numpy as np
import pytest

from paperflow.unlearning.leak import bootstrap_ci, default_ks, expected_max_at_k, leak_at_k, leak_curve


def brute(labels, k):
    subs = list(itertools.combinations(range(len(labels)), k))
    return sum(any(labels[i] for i in s) for s in subs) / len(subs)


def test_matches_bruteforce_on_random_cases():
    rng = np.random.default_rng(0)
    for _ in range(60):
        n = int(rng.integers(1, 13))
        labels = rng.random(n) < rng.random()
        c = int(labels.sum())
        for k in range(1, n + 1):
            assert leak_at_k(n, c, k) == pytest.approx(brute(list(labels), k), abs=1e-12)


def test_extremes_and_leak1():
    for n in (1, 5, 64):
        for k in range(1, n + 1):
            assert leak_at_k(n, 0, k) == 0.0
            assert leak_at_k(n, n, k) == 1.0
        for c in range(n + 1):
            assert leak_at_k(n, c, 1) == pytest.approx(c / n)
            assert leak_at_k(n, c, n - c + 1 if n - c + 1 <= n else n) == (1.0 if n - c + 1 <= n else leak_at_k(n, c, n))
    assert leak_at_k(10, 7, 4) == 1.0  # n - c < k


def test_monotone_in_k_and_spec_sanity_values():
    for c in range(0, 20):
        vals = [leak_at_k(200, c, k) for k in range(1, 201)]
        assert all(b >= a - 1e-15 for a, b in zip(vals, vals[1:]))
    assert leak_at_k(200, 1, 1) == pytest.approx(0.005)
    assert leak_at_k(200, 1, 128) == pytest.approx(0.64, abs=0.005)
    assert leak_at_k(200, 2, 128) == pytest.approx(0.87, abs=0.005)
    assert leak_at_k(200, 2, 1) == pytest.approx(0.010)


def test_invalid_k_rejected():
    with pytest.raises(ValueError):
        leak_at_k(4, 1, 5)
    with pytest.raises(ValueError):
        leak_at_k(4, 1, 0)


def test_curve_mean_over_prompts_and_ks():
    assert default_ks(64) == [1, 2, 4, 8, 16, 32, 64]
    assert default_ks(200)[-2:] == [128, 200]
    cur = leak_curve([0, 4, 8], 8, [1, 8])
    assert cur[1] == pytest.approx((0 + 0.5 + 1) / 3)
    assert cur[8] == pytest.approx((0 + 1 + 1) / 3)


def test_bootstrap_ci_brackets_mean():
    rng = np.random.default_rng(1)
    cs = rng.integers(0, 9, 40)
    ci = bootstrap_ci(cs, np.arange(40) // 10, 8, [1, 4], 300, np.random.default_rng(2))
    for k, (lo, hi) in ci.items():
        m = leak_curve(cs, 8, [k])[k]
        assert lo <= m <= hi and lo < hi


def test_expected_max_matches_bruteforce():
    s = [0.1, 0.9, 0.3, 0.5, 0.2]
    for k in range(1, 6):
        b = np.mean([max(sub) for sub in itertools.combinations(s, k)])
        assert expected_max_at_k(s, k) == pytest.approx(b)
    assert comb(5, 2) == 10
