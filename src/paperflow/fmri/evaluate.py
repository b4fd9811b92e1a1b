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
    from sklearn.metrics import balanced_accuracy_score

    return float(balanced_accuracy_score(y, p))


def _make(kind: str, C: float, max_iter: int):
    from sklearn.linear_model import LogisticRegression, RidgeClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if kind == "ridge":  # alpha = 1/C; closed form, fast with many features and few samples
        return make_pipeline(StandardScaler(), RidgeClassifier(alpha=1.0 / C))
    return make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=max_iter))


def fit_select(Xtr, ytr, Xva, yva, Cs, max_iter: int, balanced: bool, kind: str = "logistic"):
    """StandardScaler + L2 linear classifier; C picked on validation; refit on train + val."""
    best, best_c = -1.0, Cs[0]
    for C in Cs:
        m = _make(kind, C, max_iter).fit(Xtr, ytr)
        pv = m.predict(Xva)
        s = _balanced_acc(yva, pv) if balanced else float((pv == yva).mean())
        if s > best:
            best, best_c = s, C
    m = _make(kind, best_c, max_iter).fit(
        np.concatenate([Xtr, Xva]), np.concatenate([ytr, yva]))
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
    """Test score on each split (split 0 = the fixed split, with a bootstrap std)."""
    scores, chosen = [], []
    boot = float("nan")
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
