"""The LSMI-style pointwise interaction estimator and the Multimodal Interaction Gate (spec §9 [code]).

Per sample (LSMI, as adapted by the authors): classifiers q_V(y|x_V), q_T(y|x_T), q_VT(y|x_V, x_T) give
i_k = log q_k(y|x_k) − log p(y) (uniform p(y)); density models give h_V = −log p̂(x_V), h_T = −log p̂(x_T);
  r = min(h_V, h_T) − min(h_V − i_V, h_T − i_T),  u_V = i_V − r,  u_T = i_T − r,  s = i_VT − r − u_V − u_T,
then the mean adjustment (:func:`adjust`). Our [choice]s: the density is a diagonal Gaussian mixture on
whitened PCA features (KNIFE-like; scikit-learn's `PCA` and `GaussianMixture`), and scores are cross-fitted (no model
scores a sample it was trained on).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from paperflow.core.seeding import stream

TERMS = ("r", "u_v", "u_t", "s")


# ---- density (entropy) model --------------------------------------------------------------------------

def fit_density(x: np.ndarray, p: Mapping[str, Any], seed: int) -> Any:
    """−log p̂(x) model: whitened PCA to `pca_dim` components, then a diagonal Gaussian mixture (scikit-learn,
    k-means++ initialisation, `reg_covar` added to every variance). Returns a fitted `Pipeline`."""
    from sklearn.decomposition import PCA
    from sklearn.mixture import GaussianMixture
    from sklearn.pipeline import make_pipeline

    x = np.asarray(x, np.float64)
    k = max(1, min(int(p["pca_dim"]), x.shape[1], len(x) - 1))
    gmm = GaussianMixture(n_components=min(int(p["gmm_components"]), len(x)), covariance_type="diag",
                          max_iter=int(p["gmm_iters"]), reg_covar=float(p["reg_covar"]), init_params="k-means++",
                          random_state=int(stream(seed, "gmm").integers(2**31 - 1)))
    return make_pipeline(PCA(k, whiten=True, random_state=0), gmm).fit(x)


def neg_log_density(model: Any, x: np.ndarray) -> np.ndarray:
    return -model.score_samples(np.asarray(x, np.float64))


# ---- classifiers ---------------------------------------------------------------------------------------

def _mlp(torch: Any, d_in: int, hidden: int, n_out: int) -> Any:
    nn = torch.nn
    return nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, n_out))


def fit_classifiers(xv: np.ndarray, xt: np.ndarray, y: np.ndarray, p: Mapping[str, Any], seed: int,
                    n_classes: int = 2) -> list[Any]:
    """q_V, q_T, q_VT trained jointly (summed cross-entropy, Adam), early-stopped on a held-out part."""
    import torch

    torch.manual_seed(seed)
    rng = stream(seed, "holdout")
    n = len(y)
    perm = rng.permutation(n)
    n_ho = max(1, int(round(float(p["holdout"]) * n)))
    ho, tr = perm[:n_ho], perm[n_ho:]
    V, T, Y = torch.tensor(xv, dtype=torch.float32), torch.tensor(xt, dtype=torch.float32), torch.tensor(y)
    J = torch.cat([V, T], 1)
    h = int(p["hidden"])
    models = [_mlp(torch, V.shape[1], h, n_classes), _mlp(torch, T.shape[1], h, n_classes),
              _mlp(torch, J.shape[1], h, n_classes)]
    from paperflow.mi_gate.model import Adam

    opt = Adam([q for m in models for q in m.parameters()], lr=float(p["lr"]))
    ce = torch.nn.functional.cross_entropy
    ins = (V, T, J)

    def loss_on(idx: Any) -> Any:
        return sum(ce(m(x[idx]), Y[idx]) for m, x in zip(models, ins))

    best, best_state, bad = float("inf"), None, 0
    bs = int(p["batch_size"])
    ho_t = torch.tensor(ho)
    for ep in range(int(p["max_epochs"])):
        order = torch.tensor(tr[rng.permutation(len(tr))])
        for m in models:
            m.train()
        for i in range(0, len(order), bs):
            b = order[i:i + bs]
            opt.zero_grad()
            loss_on(b).backward()
            opt.step()
        with torch.no_grad():
            v = float(loss_on(ho_t))
        if v < best - 1e-6:
            best, bad = v, 0
            best_state = [{k: t.clone() for k, t in m.state_dict().items()} for m in models]
        else:
            bad += 1
            if bad >= int(p["patience"]):
                break
    assert best_state is not None
    for m, st in zip(models, best_state):
        m.load_state_dict(st)
        m.eval()
    return models


def pointwise_info(models: list[Any], xv: np.ndarray, xt: np.ndarray, y: np.ndarray,
                   n_classes: int = 2) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """i_k = log q_k(y|x_k) − log p(y), uniform p(y)."""
    import torch

    V, T = torch.tensor(xv, dtype=torch.float32), torch.tensor(xt, dtype=torch.float32)
    rows = torch.arange(len(y))
    Y = torch.tensor(y)
    out = []
    with torch.no_grad():
        for m, x in zip(models, (V, T, torch.cat([V, T], 1))):
            lp = torch.log_softmax(m(x), 1)[rows, Y]
            out.append((lp + float(np.log(n_classes))).double().numpy())
    return out[0], out[1], out[2]


# ---- decomposition -------------------------------------------------------------------------------------

def decompose(i_v: np.ndarray, i_t: np.ndarray, i_vt: np.ndarray, h_v: np.ndarray,
              h_t: np.ndarray) -> dict[str, np.ndarray]:
    """Pointwise r, u_V, u_T, s (LSMI) before the mean adjustment."""
    r = np.minimum(h_v, h_t) - np.minimum(h_v - i_v, h_t - i_t)
    u_v = i_v - r
    u_t = i_t - r
    s = i_vt - r - u_v - u_t
    return {"r": r, "u_v": u_v, "u_t": u_t, "s": s}


def adjust(sc: Mapping[str, np.ndarray]) -> tuple[dict[str, np.ndarray], float]:
    """The code's mean adjustment δ: R̄ or S̄ < 0 → δ = −min(R̄, S̄); else Ū_V or Ū_T < 0 →
    δ = min(Ū_V, Ū_T); then r, s += δ and u_V, u_T −= δ (R+U_V, R+U_T and the total are preserved)."""
    R, Uv, Ut, S = (float(np.mean(sc[k])) for k in TERMS)
    if R < 0 or S < 0:
        d = -min(R, S)
    elif Uv < 0 or Ut < 0:
        d = min(Uv, Ut)
    else:
        d = 0.0
    return {"r": sc["r"] + d, "u_v": sc["u_v"] - d, "u_t": sc["u_t"] - d, "s": sc["s"] + d}, d


def fold_ids(y: np.ndarray, folds: int, seed: int) -> np.ndarray:
    """Stratified fold index per sample."""
    out = np.empty(len(y), int)
    rng = stream(seed, "folds")
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        out[idx] = np.arange(len(idx)) % folds
    return out


def lsmi_crossfit(xv: np.ndarray, xt: np.ndarray, y: np.ndarray, p: Mapping[str, Any],
                  seed: int) -> dict[str, Any]:
    """Cross-fitted per-sample r, u_V, u_T, s (adjusted) plus the raw pieces and the adjustment δ."""
    folds = fold_ids(y, int(p["folds"]), seed)
    n = len(y)
    pieces = {k: np.zeros(n) for k in ("i_v", "i_t", "i_vt", "h_v", "h_t")}
    for f in range(int(p["folds"])):
        fit, score = folds != f, folds == f
        models = fit_classifiers(xv[fit], xt[fit], y[fit], p, seed * 1000 + f)
        iv, it, ivt = pointwise_info(models, xv[score], xt[score], y[score])
        pieces["i_v"][score], pieces["i_t"][score], pieces["i_vt"][score] = iv, it, ivt
        for name, x in (("h_v", xv), ("h_t", xt)):
            dens = fit_density(x[fit], p, seed * 1000 + f)
            pieces[name][score] = neg_log_density(dens, x[score])
    raw = decompose(pieces["i_v"], pieces["i_t"], pieces["i_vt"], pieces["h_v"], pieces["h_t"])
    adj, delta = adjust(raw)
    return {"scores": adj, "raw_means": means(raw), "pieces": pieces, "delta": delta}


def means(scores: Mapping[str, np.ndarray]) -> dict[str, float]:
    return {k: float(np.mean(scores[k])) for k in TERMS}


def dominant(scores: Mapping[str, np.ndarray]) -> np.ndarray:
    """Index into TERMS of each sample's largest term."""
    return np.stack([scores[k] for k in TERMS], 1).argmax(1)


def dominance_shares(scores: Mapping[str, np.ndarray]) -> dict[str, float]:
    d = dominant(scores)
    return {k: float(np.mean(d == i)) for i, k in enumerate(TERMS)}


def gate_select(scores: Mapping[str, np.ndarray], tau: float) -> np.ndarray:
    """Positions (into the scored set) to caption: the top ⌊τ·|valid|⌋ by u_V among the U_V-dominant."""
    valid = np.flatnonzero(dominant(scores) == TERMS.index("u_v"))
    k = int(np.floor(tau * len(valid)))
    if k <= 0:
        return np.array([], dtype=np.int64)
    order = valid[np.argsort(-scores["u_v"][valid], kind="stable")]
    return np.sort(order[:k]).astype(np.int64)


def crosstab(dom: np.ndarray, types: np.ndarray, n_types: int = 4) -> list[list[int]]:
    """counts[true type][dominant term]."""
    tab = np.zeros((n_types, len(TERMS)), int)
    np.add.at(tab, (types, dom), 1)
    return tab.tolist()
