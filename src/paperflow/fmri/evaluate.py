"""Brainmarks-style evaluation on frozen features: state decoding, trait prediction, FC baseline,
chance, repeated subject-level splits. Selection (regularization C) uses validation only."""

from __future__ import annotations

from typing import Any

import numpy as np


def fc_features(ts: np.ndarray) -> np.ndarray:
    """Connectome baseline: (T, K) parcel series -> demean, L2-normalize each parcel, R = X^T X,
    strict upper triangle (no Fisher z)."""
    X = ts - ts.mean(axis=0, keepdims=True)
    n = np.linalg.norm(X, axis=0, keepdims=True)
    X = X / np.where(n > 0, n, 1.0)
    R = X.T @ X
    return R[np.triu_indices(R.shape[0], 1)]


def subject_splits(subjects: np.ndarray, strat: np.ndarray | None, frac: tuple[float, float, float], n: int,
                   seed: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """n random (train, val, test) partitions of unique subjects (stratified by a subject label)."""
    uniq = np.unique(subjects)
    rng = np.random.default_rng([seed, 7])
    lab = {s: (strat[subjects == s][0] if strat is not None else 0) for s in uniq}
    out = []
    for _ in range(n):
        tr, va, te = [], [], []
        for c in sorted(set(lab.values())):
            group = rng.permutation([s for s in uniq if lab[s] == c])
            # every class in train; in val/test only when it has >= 3 subjects
            n_te = max(1, int(round(frac[2] * len(group)))) if len(group) >= 3 else 0
            n_va = max(1, int(round(frac[1] * len(group)))) if len(group) >= 3 else 0
            te += list(group[:n_te])
            va += list(group[n_te:n_te + n_va])
            tr += list(group[n_te + n_va:])
        out.append((np.array(tr), np.array(va), np.array(te)))
    return out


def _balanced_acc(y: np.ndarray, p: np.ndarray) -> float:
    """`sklearn.metrics.balanced_accuracy_score(y, p)` without its input validation (most of the probe
    grid's time went there): the mean over the classes present in `y` (sorted) of (correct / count),
    integer counts divided in float64 as sklearn does; a class predicted but absent from `y` is skipped,
    as sklearn does after its warning. Equality with sklearn: test_balanced_accuracy_equals_sklearn."""
    classes, yi = np.unique(y, return_inverse=True)
    count = np.bincount(yi, minlength=len(classes))
    correct = np.bincount(yi[np.asarray(y) == np.asarray(p)], minlength=len(classes))
    return float(np.mean(correct / count))


def _classifier(kind: str, C: float, max_iter: int):
    from sklearn.linear_model import LogisticRegression, RidgeClassifier

    if kind == "ridge":  # alpha = 1/C; closed form, fast with many features and few samples
        return RidgeClassifier(alpha=1.0 / C)
    return LogisticRegression(C=C, max_iter=max_iter)


def _make(kind: str, C: float, max_iter: int):
    """StandardScaler + L2 linear classifier (the probe's model as one pipeline)."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), _classifier(kind, C, max_iter))


def _scaled_fit(kind: str, C: float, max_iter: int, X: np.ndarray, y: np.ndarray):
    """`_make(kind, C, max_iter).fit(X, y)`: the same fitted steps (the pipeline fits the scaler, transforms X
    and fits the classifier on the result), returned as that pipeline."""
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    sc = StandardScaler().fit(X)
    clf = _classifier(kind, C, max_iter).fit(sc.transform(X), y)
    return Pipeline([("standardscaler", sc), (type(clf).__name__.lower(), clf)])


def fit_select(Xtr, ytr, Xva, yva, Cs, max_iter: int, balanced: bool, kind: str = "logistic"):
    """StandardScaler + L2 linear classifier; C picked on validation; refit on train + val.

    The scaler is fitted once on the training subjects (it does not depend on C) and every C's
    classifier is fitted on that transform, which is what `_make(kind, C).fit(Xtr, ytr)` computes for
    each C (test_fit_select_equals_one_pipeline_per_C)."""
    from sklearn.preprocessing import StandardScaler

    sc = StandardScaler().fit(Xtr)
    Ztr, Zva = sc.transform(Xtr), sc.transform(Xva)
    best, best_c = -1.0, Cs[0]
    for C in Cs:
        pv = _classifier(kind, C, max_iter).fit(Ztr, ytr).predict(Zva)
        s = _balanced_acc(yva, pv) if balanced else float((pv == yva).mean())
        if s > best:
            best, best_c = s, C
    m = _scaled_fit(kind, best_c, max_iter, np.concatenate([Xtr, Xva]), np.concatenate([ytr, yva]))
    return m, best_c, best


def bootstrap_std(y: np.ndarray, p: np.ndarray, n: int, seed: int, balanced: bool) -> float:
    if n == 0:
        return float("nan")
    rng = np.random.default_rng([seed, 11])
    classes = np.unique(y)
    vals = []
    for _ in range(n):
        idx = np.concatenate([rng.choice(np.flatnonzero(y == c), (y == c).sum()) for c in classes])
        vals.append(_balanced_acc(y[idx], p[idx]) if balanced else float((y[idx] == p[idx]).mean()))
    return float(np.std(vals))


def probe(X: np.ndarray, y: np.ndarray, subjects: np.ndarray, splits, Cs, max_iter: int, balanced: bool,
          n_boot: int, seed: int, kind: str = "logistic") -> dict[str, Any]:
    """Test score on each split (split 0 = the fixed split, with a bootstrap std).

    sklearn runs with `assume_finite` and `skip_parameter_validation` (its per-call input checks were
    a third of the grid's time; the features are checked finite once here): the same fits, the same
    numbers (test_probe_equals_the_validated_sklearn_path)."""
    import sklearn

    if not np.isfinite(X).all():
        raise ValueError("probe features contain NaN/inf")
    scores, chosen = [], []
    boot = float("nan")
    with sklearn.config_context(assume_finite=True, skip_parameter_validation=True):
        for i, (tr, va, te) in enumerate(splits):
            mtr, mva, mte = (np.isin(subjects, s) for s in (tr, va, te))
            m, c, _ = fit_select(X[mtr], y[mtr], X[mva], y[mva], Cs, max_iter, balanced, kind)
            p = m.predict(X[mte])
            scores.append(_balanced_acc(y[mte], p) if balanced else float((p == y[mte]).mean()))
            chosen.append(float(c))
            if i == 0:
                boot = bootstrap_std(y[mte], p, n_boot, seed, balanced)
    return {"fixed_split": scores[0], "fixed_split_boot_std": boot, "mean": float(np.mean(scores)),
            "std": float(np.std(scores)), "n_splits": len(scores), "scores": scores, "C": chosen}


def chance(y: np.ndarray, balanced: bool) -> float:
    k = len(np.unique(y))
    return 1.0 / k if balanced else float(np.bincount(y).max() / len(y))
