"""leak@k: the unbiased pass@k-style estimator (Chen et al. 2021) with "correct" -> "leaks".

Per prompt with n samples of which c leak: leak@k = 1 - C(n-c, k) / C(n, k), computed as
1 - prod_{j<k} (n-c-j)/(n-j) in float64 (= 1 when n-c < k). The reported number is the arithmetic
mean over the prompts actually scored; a bootstrap CI resamples authors (or prompts).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def leak_at_k(n: int, c: int, k: int) -> float:
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got c={c}, n={n}")
    if n - c < k:
        return 1.0
    j = np.arange(k, dtype=np.float64)
    return float(1.0 - np.prod((n - c - j) / (n - j)))


def default_ks(n: int) -> list[int]:
    """1, 2, 4, ..., up to n (n itself included)."""
    ks, k = [], 1
    while k < n:
        ks.append(k)
        k *= 2
    ks.append(n)
    return ks


def leak_curve(cs: Sequence[int], n: int, ks: Sequence[int]) -> dict[int, float]:
    return {k: float(np.mean([leak_at_k(n, c, k) for c in cs])) if len(cs) else float("nan") for k in ks}


def bootstrap_ci(cs: Sequence[int], groups: Sequence[int], n: int, ks: Sequence[int], n_boot: int,
                 rng: np.random.Generator, alpha: float = 0.05) -> dict[int, tuple[float, float]]:
    """Percentile CI of mean leak@k, resampling groups (authors; or prompts when groups are unique)."""
    cs = np.asarray(cs)
    groups = np.asarray(groups)
    uniq = np.unique(groups)
    per = {k: np.array([leak_at_k(n, int(c), k) for c in cs]) for k in ks}
    idx_by_g = [np.flatnonzero(groups == g) for g in uniq]
    out = {}
    draws = rng.integers(0, len(uniq), size=(n_boot, len(uniq)))
    sizes = {len(ix) for ix in idx_by_g}
    # equal group sizes (always: prompts, or authors with the same number of QA): every resample is one
    # row of an index matrix, and numpy's mean over a row equals the 1-D mean of that row's values (the
    # same pairwise summation), so this is the loop below without 1,000 × len(ks) Python iterations.
    sel_all = np.stack(idx_by_g)[draws].reshape(n_boot, -1) if len(sizes) == 1 else None
    for k in ks:
        if sel_all is not None:
            vals = per[k][sel_all].mean(axis=1)
        else:
            vals = np.empty(n_boot)
            for b in range(n_boot):
                sel = np.concatenate([idx_by_g[g] for g in draws[b]])
                vals[b] = per[k][sel].mean()
        out[k] = (float(np.quantile(vals, alpha / 2)), float(np.quantile(vals, 1 - alpha / 2)))
    return out


def expected_max_at_k(scores: Sequence[float], k: int) -> float:
    """[recon, optional] unbiased E[max of k draws without replacement] of a continuous score."""
    s = np.sort(np.asarray(scores, dtype=np.float64))
    n = len(s)
    if not 1 <= k <= n:
        raise ValueError("need 1 <= k <= n")
    from math import comb

    w = np.array([comb(j - 1, k - 1) for j in range(1, n + 1)], dtype=np.float64)
    return float((w * s).sum() / comb(n, k))
