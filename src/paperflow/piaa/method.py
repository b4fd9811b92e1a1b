"""PIAA without gradient updates (our restatement of akang-wang/PIAA learn.py and test.py):

PVCL (one pass over unlabelled train patches f, L2-normalised; class text embeddings t):
1. pseudo-label each patch: ŷ = argmax_c ⟨f, t_c⟩, p = softmax(τ_pl·⟨f, t⟩) (τ_pl = 60), entropy H(p);
2. per class keep the K lowest-entropy patches labelled c, by a streaming top-K merged every
   `merge_every` batches (memory bounded by K + the patches of `merge_every` batches);
3. GDA on the bank, grouped by argmax p: μ_c = Σ p_c f / Σ p_c (t_c when the class has no patch),
   shared precision Λ = D·pinv((N−1)Σ̂ + tr(Σ̂)·I) of the class-centred bank, W_c = Λμ_c,
   b_c = log(1/C) − ½ μ_cᵀΛμ_c;
4. refine once: q = softmax(τ_d·(fW + b)) on the bank, per predicted class keep patches whose
   probability of that class is ≥ mean + 1 std, refit with the GDA probabilities as the weights.

Inference: q[i, c] = softmax_c((f_i W + b)/T_inf) (T_inf = 500); m[c] = max_i q[i, c] (or mean /
log-sum-exp); P = softmax(α_patch·m); G = softmax(α_cls·⟨g, t⟩); score = w·G + (1 − w)·P (w = 0.1).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    z = x - x.max(axis=axis, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


def entropy(p: np.ndarray) -> np.ndarray:
    return -(p * np.log(np.clip(p, 1e-10, None))).sum(-1)


@dataclass
class Bank:
    feats: np.ndarray  # [M, D] kept patch features
    probs: np.ndarray  # [M, C] their pseudo-label probabilities
    entropy: np.ndarray  # [M]
    label: np.ndarray  # [M] pseudo label (argmax of the text logits)


def build_bank(batches: Iterator[np.ndarray], text: np.ndarray, *, k: int, tau_pl: float = 60.0,
               merge_every: int = 20) -> Bank:
    """Streaming per-class top-K (lowest entropy) over batches of patch features [n, D] (normalised)."""
    C = text.shape[0]
    kept: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    pending: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {c: [] for c in range(C)}

    def merge() -> None:
        for c in range(C):
            if not pending[c]:
                continue
            parts = ([kept[c]] if c in kept else []) + pending[c]
            f = np.concatenate([p[0] for p in parts])
            pr = np.concatenate([p[1] for p in parts])
            h = np.concatenate([p[2] for p in parts])
            top = np.argsort(h, kind="stable")[:k]
            kept[c] = (f[top], pr[top], h[top])
            pending[c] = []

    i = -1
    for i, f in enumerate(batches):
        logits = f @ text.T
        p = softmax(tau_pl * logits)
        h = entropy(p)
        y = logits.argmax(1)
        for c in np.unique(y):
            m = y == c
            pending[int(c)].append((f[m], p[m], h[m]))
        if (i + 1) % merge_every == 0:
            merge()
    merge()
    D = text.shape[1]
    cs = sorted(kept)
    if not cs:
        return Bank(np.zeros((0, D)), np.zeros((0, C)), np.zeros(0), np.zeros(0, int))
    return Bank(np.concatenate([kept[c][0] for c in cs]), np.concatenate([kept[c][1] for c in cs]),
                np.concatenate([kept[c][2] for c in cs]), np.concatenate([np.full(len(kept[c][0]), c) for c in cs]))


def gda_fit(feats: np.ndarray, probs: np.ndarray, init_mean: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """GDA with a shared precision: patches grouped by argmax(probs), class means weighted by the
    class's probability; empty classes keep `init_mean` (the text embedding). Returns W [D, C], b [C]."""
    C, D = init_mean.shape
    f = feats / np.maximum(np.linalg.norm(feats, axis=1, keepdims=True), 1e-12)
    grp = probs.argmax(1)
    mus = init_mean.astype(np.float64).copy()
    centred = []
    for c in np.unique(grp):
        m = grp == c
        w = probs[m, c]
        mus[c] = (w[:, None] * f[m]).sum(0) / max(w.sum(), 1e-12)
        centred.append(f[m] - mus[c])
    Z = np.concatenate(centred) if centred else np.zeros((0, D))
    if len(Z) >= 2:
        cov = np.cov(Z.T)
        prec = D * np.linalg.pinv((len(Z) - 1) * cov + np.trace(cov) * np.eye(D))
    else:  # degenerate bank: identity precision (no covariance to estimate)
        prec = np.eye(D)
    W = prec @ mus.T  # [D, C]
    b = np.log(1.0 / C) - 0.5 * np.einsum("cd,de,ce->c", mus, prec, mus)
    return W, b


def refine(bank_feats: np.ndarray, W: np.ndarray, b: np.ndarray, tau_d: float) -> tuple[np.ndarray, np.ndarray]:
    """One refinement round: keep, per predicted class, the patches whose GDA probability is ≥ mean + std;
    return (features, GDA probabilities) of the kept patches."""
    logits = bank_feats @ W + b
    q = softmax(tau_d * logits)
    pred = logits.argmax(1)
    keep = np.zeros(len(pred), bool)
    for c in np.unique(pred):
        m = np.flatnonzero(pred == c)
        pc = q[m, c]
        thr = pc.mean() + (pc.std(ddof=1) if len(pc) > 1 else 0.0)
        keep[m[pc >= thr - 1e-12]] = True  # tolerance: saturated probabilities
    return bank_feats[keep], q[keep]


@dataclass
class PVCL:
    W: np.ndarray  # [D, C]
    b: np.ndarray  # [C]
    W0: np.ndarray  # before refinement
    b0: np.ndarray
    bank_size: int
    refined_size: int
    bank_purity: float  # share of bank patches whose pseudo label is a true label of their image (if known)


def learn_pvcl(batches: Iterator[np.ndarray], text: np.ndarray, *, k: int, tau_pl: float, tau_d: float,
               merge_every: int) -> tuple[PVCL, Bank]:
    bank = build_bank(batches, text, k=k, tau_pl=tau_pl, merge_every=merge_every)
    W0, b0 = gda_fit(bank.feats, bank.probs, text)
    rf, rq = refine(bank.feats, W0, b0, tau_d)
    W, b = gda_fit(rf, rq, text) if len(rf) else (W0, b0)
    return PVCL(W, b, W0, b0, len(bank.feats), len(rf), float("nan")), bank


def aggregate(q: np.ndarray, how: str, lse_beta: float = 10.0) -> np.ndarray:
    """Patch class probabilities q [N, P, C] -> per-image evidence [N, C]."""
    if how == "max":
        return q.max(1)
    if how == "mean":
        return q.mean(1)
    if how == "lse":  # smooth maximum: (1/β) log mean_i exp(β q_i)
        z = lse_beta * q
        mx = z.max(1, keepdims=True)
        return ((mx + np.log(np.exp(z - mx).mean(1, keepdims=True))) / lse_beta)[:, 0]
    raise ValueError(f"unknown aggregation {how!r}")


def gda_patch_probs(patches: np.ndarray, W: np.ndarray, b: np.ndarray, t_inf: float) -> np.ndarray:
    """q[n, i, c] = softmax_c((f W + b) / T_inf)."""
    return softmax((patches @ W + b) / t_inf)


def text_patch_probs(patches: np.ndarray, text: np.ndarray, tau: float) -> np.ndarray:
    return softmax(tau * (patches @ text.T))


def patch_score(q: np.ndarray, alpha_patch: float, how: str = "max", lse_beta: float = 10.0) -> np.ndarray:
    return softmax(alpha_patch * aggregate(q, how, lse_beta))


def cls_score(cls: np.ndarray, text: np.ndarray, alpha_cls: float) -> np.ndarray:
    return softmax(alpha_cls * (cls @ text.T))


def fuse(G: np.ndarray, P: np.ndarray, w_cls: float) -> np.ndarray:
    return w_cls * G + (1.0 - w_cls) * P
