"""Probes: FC features, subject-level splits without leakage, selection on validation only."""

import warnings

import numpy as np
import pytest

from paperflow.fmri.evaluate import fc_features, probe, subject_splits


def test_fc_features_are_the_correlation_upper_triangle(rng):
    ts = rng.standard_normal((50, 7))
    f = fc_features(ts)
    assert f.shape == (21,)
    assert np.allclose(f, np.corrcoef(ts.T)[np.triu_indices(7, 1)])


def test_subject_splits_are_disjoint_and_stratified():
    subj = np.repeat([f"s{i}" for i in range(30)], 2)
    y = np.repeat(np.arange(30) % 2, 2)
    for tr, va, te in subject_splits(subj, y, (4 / 6, 1 / 6, 1 / 6), 5, 0):
        assert not (set(tr) & set(va)) and not (set(tr) & set(te)) and not (set(va) & set(te))
        assert len(tr) + len(va) + len(te) == 30
        lab = {f"s{i}": i % 2 for i in range(30)}
        assert {lab[s] for s in te} == {0, 1} and {lab[s] for s in va} == {0, 1}


def test_probe_finds_signal_and_reports_chance_on_noise(rng):
    n = 120
    subj = np.array([f"s{i // 2}" for i in range(n)])
    y = np.array([(i // 2) % 3 for i in range(n)])
    Cs = list(np.logspace(-3, 3, 4))
    splits = subject_splits(subj, None, (4 / 6, 1 / 6, 1 / 6), 4, 0)
    X = rng.standard_normal((n, 20))
    X[:, :3] += 3 * np.eye(3)[y]
    good = probe(X, y, subj, splits, Cs, 200, False, 50, 0, "logistic")
    assert good["mean"] > 0.9 and good["n_splits"] == 4 and good["fixed_split_boot_std"] >= 0
    noise = probe(rng.standard_normal((n, 20)), y, subj, splits, Cs, 200, False, 0, 0, "ridge")
    assert noise["mean"] < 0.6


def test_balanced_accuracy_equals_sklearn(rng):
    from sklearn.metrics import balanced_accuracy_score

    from paperflow.fmri.evaluate import _balanced_acc

    for k in (2, 3, 6):
        y = rng.integers(0, k, 40)
        p = rng.integers(0, k + 1, 40)  # includes a class absent from y (sklearn skips it after a warning)
        y[:k] = np.arange(k)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert _balanced_acc(y, p) == balanced_accuracy_score(y, p)


def _old_probe(X, y, subjects, splits, Cs, max_iter, balanced, n_boot, seed, kind):
    """The probe before issue 24: one validated sklearn pipeline per C, sklearn's balanced accuracy."""
    from sklearn.metrics import balanced_accuracy_score

    from paperflow.fmri.evaluate import _make

    def score(a, b):
        return float(balanced_accuracy_score(a, b)) if balanced else float((a == b).mean())

    scores, boot = [], None
    for i, (tr, va, te) in enumerate(splits):
        mtr, mva, mte = (np.isin(subjects, s) for s in (tr, va, te))
        best, best_c = -1.0, Cs[0]
        for C in Cs:
            s = score(y[mva], _make(kind, C, max_iter).fit(X[mtr], y[mtr]).predict(X[mva]))
            if s > best:
                best, best_c = s, C
        m = _make(kind, best_c, max_iter).fit(np.concatenate([X[mtr], X[mva]]), np.concatenate([y[mtr], y[mva]]))
        p = m.predict(X[mte])
        scores.append(score(y[mte], p))
        if i == 0:
            r = np.random.default_rng([seed, 11])
            vals = []
            for _ in range(n_boot):
                idx = np.concatenate([r.choice(np.flatnonzero(y[mte] == c), (y[mte] == c).sum()) for c in np.unique(y[mte])])
                vals.append(score(y[mte][idx], p[idx]))
            boot = float(np.std(vals))
    return scores, boot


@pytest.mark.parametrize("kind,balanced", [("logistic", True), ("ridge", False)])
def test_probe_equals_the_validated_sklearn_path(rng, kind, balanced):
    """The fast probe (scaler fitted once per split, no sklearn input validation, numpy balanced
    accuracy) gives the old per-C pipeline's numbers (to 1e-8; in practice bit for bit)."""
    n = 72
    subj = np.array([f"s{i // 2}" for i in range(n)])
    y = np.array([(i // 2) % 3 for i in range(n)])
    X = rng.standard_normal((n, 40)).astype(np.float32)
    X[:, :3] += 0.8 * np.eye(3, dtype=np.float32)[y]
    Cs = list(np.logspace(-3, 3, 4))
    splits = subject_splits(subj, y, (4 / 6, 1 / 6, 1 / 6), 3, 0)
    new = probe(X, y, subj, splits, Cs, 200, balanced, 30, 0, kind)
    old_scores, old_boot = _old_probe(X, y, subj, splits, Cs, 200, balanced, 30, 0, kind)
    assert np.allclose(new["scores"], old_scores, rtol=0, atol=1e-8)
    assert abs(new["fixed_split_boot_std"] - old_boot) <= 1e-8
