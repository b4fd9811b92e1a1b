"""Action-centricity estimators (spec c.4; the paper's estimator code is not public: [recon]).

- `ksg_mi`: Kraskov-Stoegbauer-Grassberger algorithm 1 (max-norm, strict inequalities), nats.
- `mixed_mi`: Ross (2014) estimator for a discrete Z (code tuples) and continuous A.
- `kl_entropy`: Kozachenko-Leonenko differential entropy (Euclidean), nats.
- `ba_bound`: Barber-Agakov lower bound H(A) + E[log q(a|z)] with a diagonal-Gaussian MLP q.
- `ridge_probe`: ridge a ~ Wz + b, alpha by grouped 5-fold CV on train; NMSE on test (also per target dim).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.spatial import cKDTree
from scipy.special import digamma, gammaln


def standardize(x: np.ndarray, ref: np.ndarray | None = None, rtol: float = 1e-6) -> np.ndarray:
    """(x - mean(ref)) / sd(ref) per column. A column of `ref` whose sd is at most `rtol` x the largest |value|
    of `ref` is treated as constant (divided by 1, not by its sd): below float32 precision its spread is
    rounding, and scaling rounding up to unit variance would hand the estimators a spurious variable."""
    x = np.asarray(x, np.float64).reshape(len(x), -1)
    ref = x if ref is None else np.asarray(ref, np.float64).reshape(len(ref), -1)
    sd = ref.std(0) if len(ref) else np.zeros(ref.shape[1])
    finite = np.abs(ref[np.isfinite(ref)])
    scale = float(finite.max()) if finite.size else 0.0  # a NaN elsewhere must not switch scaling off
    return (x - ref.mean(0)) / np.where(sd > rtol * scale, sd, 1.0)


def _jitter(x: np.ndarray, rng: np.random.Generator, scale: float = 1e-10) -> np.ndarray:
    return x + scale * rng.standard_normal(x.shape)


def ksg_mi(z: np.ndarray, a: np.ndarray, k: int = 4, seed: int = 0) -> float:
    """KSG estimator 1 of I(Z;A) in nats (standardised inputs, 1e-10 jitter against ties)."""
    rng = np.random.default_rng(seed)
    z = _jitter(standardize(z), rng)
    a = _jitter(standardize(a), rng)
    N = len(z)
    if N <= k + 1:
        return float("nan")
    joint = np.hstack([z, a])
    eps = cKDTree(joint).query(joint, k=k + 1, p=np.inf)[0][:, k]
    r = np.nextafter(eps, 0)  # strict inequality
    nz = cKDTree(z).query_ball_point(z, r, p=np.inf, return_length=True) - 1
    na = cKDTree(a).query_ball_point(a, r, p=np.inf, return_length=True) - 1
    return float(digamma(k) + digamma(N) - np.mean(digamma(nz + 1) + digamma(na + 1)))


def mixed_mi(codes: np.ndarray, a: np.ndarray, k: int = 4, seed: int = 0) -> tuple[float, int]:
    """Ross (2014) I(C;A) for discrete codes C (N,) or (N, Q) tuples. Returns (nats, #samples kept)."""
    rng = np.random.default_rng(seed)
    a = _jitter(standardize(a), rng)
    codes = np.asarray(codes)
    if codes.ndim > 1:
        _, codes = np.unique(codes, axis=0, return_inverse=True)
    codes = codes.ravel()
    labels, counts = np.unique(codes, return_counts=True)
    keep_labels = set(labels[counts > k].tolist())
    keep = np.array([c in keep_labels for c in codes])
    if keep.sum() <= k + 1:
        return float("nan"), int(keep.sum())
    a, codes = a[keep], codes[keep]
    N = len(a)
    full = cKDTree(a)
    d = np.empty(N)
    nc = np.empty(N)
    for c in np.unique(codes):
        idx = np.nonzero(codes == c)[0]
        d[idx] = cKDTree(a[idx]).query(a[idx], k=k + 1, p=np.inf)[0][:, k]
        nc[idx] = len(idx)
    m = full.query_ball_point(a, d, p=np.inf, return_length=True) - 1
    return float(digamma(N) - np.mean(digamma(nc)) + digamma(k) - np.mean(digamma(m))), N


def kl_entropy(x: np.ndarray, k: int = 4, seed: int = 0) -> float:
    rng = np.random.default_rng(seed)
    x = _jitter(np.asarray(x, np.float64).reshape(len(x), -1), rng)
    N, d = x.shape
    r = cKDTree(x).query(x, k=k + 1)[0][:, k]
    log_vd = d / 2 * np.log(np.pi) - gammaln(d / 2 + 1)
    return float(digamma(N) - digamma(k) + log_vd + d * np.mean(np.log(r)))


def gaussian_entropy(x: np.ndarray) -> float:
    x = np.asarray(x, np.float64).reshape(len(x), -1)
    d = x.shape[1]
    cov = np.atleast_2d(np.cov(x, rowvar=False))
    return float(0.5 * np.linalg.slogdet(2 * np.pi * np.e * cov)[1]) if d else 0.0


def ba_bound(z_tr: np.ndarray, a_tr: np.ndarray, z_va: np.ndarray, a_va: np.ndarray, z_te: np.ndarray,
             a_te: np.ndarray, seed: int = 0, hidden: int = 128, max_epochs: int = 200, patience: int = 15,
             k: int = 4) -> dict[str, float]:
    """Barber-Agakov: I(Z;A) >= H(A) + E_test[log q(a|z)]. q: diagonal Gaussian from a 2x`hidden` MLP,
    fit on train, early-stopped on val NLL. H(A) by Kozachenko-Leonenko on the test actions (and the
    Gaussian-fit upper bound on entropy, reported separately)."""
    import torch

    torch.manual_seed(seed)
    zt, at = (torch.tensor(v, dtype=torch.float32) for v in (z_tr, a_tr))
    zv, av = (torch.tensor(v, dtype=torch.float32) for v in (z_va, a_va))
    ze, ae = (torch.tensor(v, dtype=torch.float32) for v in (z_te, a_te))
    d_a = at.shape[1]
    net = torch.nn.Sequential(torch.nn.Linear(zt.shape[1], hidden), torch.nn.GELU(), torch.nn.Linear(hidden, hidden),
                              torch.nn.GELU(), torch.nn.Linear(hidden, 2 * d_a))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3, weight_decay=1e-4)

    def loglik(zz: Any, aa: Any) -> Any:
        mu, logvar = net(zz).chunk(2, -1)
        logvar = logvar.clamp(-8, 6)
        return (-0.5 * (np.log(2 * np.pi) + logvar + (aa - mu) ** 2 / logvar.exp())).sum(-1)

    best, best_state, bad = -np.inf, None, 0
    g = torch.Generator().manual_seed(seed)
    for _ in range(max_epochs):
        perm = torch.randperm(len(zt), generator=g)
        for i in range(0, len(zt), 128):
            b = perm[i:i + 128]
            loss = -loglik(zt[b], at[b]).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            v = float(loglik(zv, av).mean()) if len(zv) else -float(loss)
        if v > best + 1e-4:
            best, bad = v, 0
            best_state = {kk: t.clone() for kk, t in net.state_dict().items()}
        else:
            bad += 1
            if bad >= patience:
                break
    net.load_state_dict(best_state)
    with torch.no_grad():
        ll = float(loglik(ze, ae).mean())
    h_kl = kl_entropy(a_te, k=k, seed=seed)
    h_gauss = gaussian_entropy(a_te)
    return {"test_loglik": ll, "H_A_kl": h_kl, "H_A_gauss": h_gauss, "ba_kl": h_kl + ll, "ba_gauss": h_gauss + ll,
            "val_loglik": best}


def _sse_sst(pred: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per target dimension: squared error of `pred` and squared spread of `a` about its own mean."""
    return ((pred - a) ** 2).sum(0), ((a - a.mean(0)) ** 2).sum(0)


def nmse(pred: np.ndarray, a: np.ndarray) -> tuple[float, float]:
    """(mean over dims of SSE_d / SST_d, pooled SSE / SST), SST about the test mean."""
    err, tot = _sse_sst(pred, a)
    return float(np.mean(err / np.where(tot > 0, tot, np.nan))), float(err.sum() / tot.sum())


def nmse_per_dim(pred: np.ndarray, a: np.ndarray) -> list[float]:
    """SSE_d / SST_d for each target dimension d (their mean is `nmse(...)[0]`): which motion the latent carries."""
    err, tot = _sse_sst(pred, a)
    return [float(e / t) if t > 0 else float("nan") for e, t in zip(np.atleast_1d(err), np.atleast_1d(tot))]


def ridge_probe(z_tr: np.ndarray, a_tr: np.ndarray, groups_tr: np.ndarray, tests: dict[str, tuple[np.ndarray, np.ndarray]],
                alphas: tuple[float, ...] = (1e-3, 1e-2, 1e-1, 1, 10, 100, 1000)) -> dict[str, Any]:
    """Ridge probe with alpha by 5-fold CV grouped by episode on train; NMSE on each test set."""
    from sklearn.linear_model import Ridge
    from sklearn.model_selection import GroupKFold

    n_groups = len(np.unique(groups_tr))
    folds = min(5, n_groups)
    cv = {}
    for al in alphas:
        errs = []
        for tr, va in GroupKFold(n_splits=folds).split(z_tr, a_tr, groups_tr):
            m = Ridge(alpha=al).fit(z_tr[tr], a_tr[tr])
            errs.append(np.mean((m.predict(z_tr[va]) - a_tr[va]) ** 2))
        cv[al] = float(np.mean(errs))
    best = min(cv, key=cv.get)
    m = Ridge(alpha=best).fit(z_tr, a_tr)
    out: dict[str, Any] = {"alpha": best}
    for name, (z, a) in tests.items():
        if len(z) < 2:
            out[name] = {"nmse": float("nan"), "nmse_pooled": float("nan"), "n": int(len(z))}
            continue
        pred = m.predict(z)
        per_dim, pooled = nmse(pred, a)
        out[name] = {"nmse": per_dim, "nmse_pooled": pooled, "nmse_per_dim": nmse_per_dim(pred, a), "n": int(len(z))}
    return out


def bootstrap_episodes(fn: Any, groups: np.ndarray, n_boot: int, seed: int, frac: float = 0.8) -> tuple[float, float]:
    """95% percentile interval of fn(index array) over episode-level resamples.

    Episodes are subsampled *without* replacement (a fraction `frac` of them): resampling with
    replacement duplicates points, which makes nearest-neighbour estimators (KSG) see zero distances
    and inflates them. The interval is therefore a subsampling interval (conservative, wider)."""
    rng = np.random.default_rng(seed)
    ug = np.unique(groups)
    members = {g: np.nonzero(groups == g)[0] for g in ug}
    m = max(2, int(round(frac * len(ug))))
    vals = []
    for _ in range(n_boot):
        pick = rng.choice(ug, min(m, len(ug)), replace=False)
        idx = np.concatenate([members[g] for g in pick])
        vals.append(fn(idx))
    vals = np.array([v for v in vals if np.isfinite(v)])
    if len(vals) == 0:
        return float("nan"), float("nan")
    return float(np.percentile(vals, 2.5)), float(np.percentile(vals, 97.5))
