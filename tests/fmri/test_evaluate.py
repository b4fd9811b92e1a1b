"""Probes: FC features, subject-level splits without leakage, selection on validation only."""

import numpy as np

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
