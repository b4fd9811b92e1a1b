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


def _bootstrap_loop(cs, groups, n, ks, n_boot, rng, alpha=0.05):
    """The per-resample loop `bootstrap_ci` replaced (one concatenation and mean per resample)."""
    cs, groups = np.asarray(cs), np.asarray(groups)
    uniq = np.unique(groups)
    per = {k: np.array([leak_at_k(n, int(c), k) for c in cs]) for k in ks}
    idx = [np.flatnonzero(groups == g) for g in uniq]
    draws = rng.integers(0, len(uniq), size=(n_boot, len(uniq)))
    out = {}
    for k in ks:
        vals = np.array([per[k][np.concatenate([idx[g] for g in d])].mean() for d in draws])
        out[k] = (float(np.quantile(vals, alpha / 2)), float(np.quantile(vals, 1 - alpha / 2)))
    return out


@pytest.mark.parametrize("groups", [np.arange(40), np.arange(40) // 10, np.arange(40)[::-1] % 7])
def test_bootstrap_ci_equals_the_per_resample_loop_exactly(groups):
    # prompts (size 1), authors (equal sizes: the index-matrix path) and unequal groups (the loop path)
    rng = np.random.default_rng(5)
    cs = rng.integers(0, 65, 40)
    ks = [1, 2, 4, 8, 16, 32, 64]
    got = bootstrap_ci(cs, groups, 64, ks, 500, np.random.default_rng(9))
    assert got == _bootstrap_loop(cs, groups, 64, ks, 500, np.random.default_rng(9))  # ==, not approx


def test_expected_max_matches_bruteforce():
    s = [0.1, 0.9, 0.3, 0.5, 0.2]
    for k in range(1, 6):
        b = np.mean([max(sub) for sub in itertools.combinations(s, k)])
        assert expected_max_at_k(s, k) == pytest.approx(b)
    assert comb(5, 2) == 10


def test_judge_output_keeps_labels_and_scores_per_response():
    from paperflow.unlearning.evaluate import judge_samples

    row = {"answer": "The author was born in Kalotor .", "key_facts": ["Kalotor"], "author_id": 0}
    resp = ["The author was born in Kalotor .", "born in Misha", "The author was born in Kalotor", ""]
    recs = [{**row, "split": "forget", "decoder": "T1.0", "idx": 0, "responses": resp},
            {**row, "split": "forget", "decoder": "T1.0", "idx": 1, "responses": resp[::-1]},
            {**row, "split": "forget", "decoder": "greedy", "idx": 0, "responses": resp[:1]},
            {**row, "split": "retain", "decoder": "greedy", "idx": 0, "responses": resp[1:2]}]
    p = {"judges": ["keyfact", "rouge"], "judge_kw": {"gate": 0.1, "threshold": 0.5}, "n_samples": 4, "ks": [1, 2, 4],
         "bootstrap": 10, "accuracy_judge": "keyfact"}
    m, _ = judge_samples(recs, p, seed=0)
    kept = m["labels"]["forget"]["T1.0"]["keyfact"]
    assert kept["idx"] == [0, 1] and kept["labels"] == [[1, 0, 1, 0], [0, 1, 0, 1]]
    assert [sum(x) for x in kept["labels"]] == m["leak"]["T1.0"]["keyfact"]["c"] == [2, 2]
    assert kept["scores"]["rougeL_recall"][0][0] == 1.0 and kept["scores"]["keyfact"][1] == [0.0, 1.0, 0.0, 1.0]
    assert m["labels"]["retain"]["greedy"]["rouge"]["labels"] == [[0]]
    # an independent re-check: recompute leak@k from the stored labels
    from paperflow.unlearning.leak import leak_curve

    assert leak_curve([sum(x) for x in kept["labels"]], 4, [1, 2, 4]) == {
        int(k): v for k, v in m["leak"]["T1.0"]["keyfact"]["leak"].items()}
