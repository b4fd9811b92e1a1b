"""Encoders, class prototypes and every loss (RFCMH as released [C], RFCMH as written in the
paper [P], and the baselines [R]). Spec §3-4; tags name where each formula comes from."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def mlp(d_in: int, hidden: int, bits: int) -> nn.Sequential:
    last = nn.Linear(hidden, bits, bias=False)
    b = 1.0 / math.sqrt(d_in)  # [C] bound uses the encoder's *input* dimension
    nn.init.uniform_(last.weight, -b, b)
    return nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), last)


def prototypes(bits: int, K: int, gen: torch.Generator) -> torch.Tensor:
    """Fixed unit-column prototypes W (L x K) [C]."""
    if bits >= K:
        q, _ = torch.linalg.qr(torch.randn(bits, bits, generator=gen, dtype=torch.float64))
        return q[:, :K].float()
    W = F.normalize(torch.randn(bits, K, generator=gen, dtype=torch.float64), dim=0)
    for _ in range(50):
        G = W.T @ W - torch.diag(torch.diag(W.T @ W))
        W = F.normalize(W - 0.05 * W @ G, dim=0)
    return W.float()


class HashNet(nn.Module):
    """Image and text encoders into one L-bit space: z = tanh(o) / ||tanh(o)||."""

    def __init__(self, d_img: int, d_txt: int, hidden: int, bits: int, n_classes: int, seed: int) -> None:
        super().__init__()
        self.img = mlp(d_img, hidden, bits)
        self.txt = mlp(d_txt, hidden, bits)
        g = torch.Generator().manual_seed(seed + 12345)
        self.register_buffer("W", prototypes(bits, n_classes, g))

    @staticmethod
    def embed(o: torch.Tensor) -> torch.Tensor:
        return F.normalize(torch.tanh(o), dim=1)

    def forward(self, x_img: torch.Tensor, x_txt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.embed(self.img(x_img)), self.embed(self.txt(x_txt))


def numpy_forward(weights: dict[str, np.ndarray], prefix: str, x: np.ndarray) -> np.ndarray:
    """Pre-activation outputs o of one encoder from exported weights (sign(o) = sign(z))."""
    h = x.astype(np.float32)
    for idx, act in ((0, True), (2, True), (4, False)):
        h = h @ weights[f"{prefix}.{idx}.weight"].T
        if f"{prefix}.{idx}.bias" in weights:
            h = h + weights[f"{prefix}.{idx}.bias"]
        if act:
            h = np.maximum(h, 0.0)
    return h


# ------------------------------------------------------------------------------------------------
# helpers


def label_index(y: torch.Tensor) -> torch.Tensor:
    return y.argmax(1)


def positive_mask(y: torch.Tensor, multilabel: bool) -> torch.Tensor:
    """ζ_ij = +1 mask: same class (single-label) or any shared label (multi-label)."""
    if multilabel:
        return (y.float() @ y.float().T) > 0
    t = label_index(y)
    return t[:, None] == t[None, :]


def lq(P: torch.Tensor, q: float) -> torch.Tensor:
    return (1 - q) * (1 - P.clamp_min(1e-12) ** q) / q + q * (1 - P)


def _topk_mean_masked(v: torch.Tensor, mask: torch.Tensor, k: int) -> torch.Tensor:
    """Mean of the k largest entries of v where mask is True (k clipped to the mask count >= 1)."""
    neg_inf = torch.finfo(v.dtype).min
    vv = v.masked_fill(~mask, neg_inf)
    kk = max(1, min(k, int(mask.sum(1).min().item())))
    top = vv.topk(kk, dim=1).values
    return top.mean(1)


# ------------------------------------------------------------------------------------------------
# RFCMH as released [C]


def possibility_code(z: torch.Tensor, W: torch.Tensor, temp: float, multilabel: bool) -> torch.Tensor:
    m = torch.sigmoid(z @ W / temp) ** 2
    return m if multilabel else m / m.sum(1, keepdim=True)


def admissibility_code(p: torch.Tensor, y: torch.Tensor, kappa: int, multilabel: bool) -> torch.Tensor:
    pos = y > 0
    c = _topk_mean_masked(p, ~pos, kappa)  # competitor: mean of the κ largest non-label scores
    if multilabel:
        denom = pos.sum(1).clamp_min(1)
        pos_mean = (p * pos).sum(1) / denom
        n = torch.where(pos, (1 - c)[:, None], (1 - pos_mean)[:, None])
    else:
        pt = p.gather(1, label_index(y)[:, None])
        n = torch.where(pos, (1 - c)[:, None], 1 - pt)
    a = (p + kappa * n) / (1 + kappa)
    return a.clamp(1e-6, 1 - 1e-6)


def warm_far(a1: torch.Tensor, a2: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    yf = y.float()
    return ((a1 - yf) ** 2).sum(1).mean() + ((a2 - yf) ** 2).sum(1).mean()


def intra_code(z1: torch.Tensor, z2: torch.Tensor, tau: float, q: float) -> torch.Tensor:
    B = z1.shape[0]
    Z = torch.cat([z1, z2])
    logits = Z @ Z.T / tau
    eye = torch.eye(2 * B, dtype=torch.bool, device=Z.device)
    logits = logits.masked_fill(eye, float("-inf"))  # s_ii = 0
    partner = torch.cat([torch.arange(B, 2 * B), torch.arange(0, B)]).to(Z.device)
    logP = logits.gather(1, partner[:, None]).squeeze(1) - torch.logsumexp(logits, dim=1)
    return 2 * lq(logP.exp(), q).mean()


def gap(abar: torch.Tensor, y: torch.Tensor, multilabel: bool) -> torch.Tensor:
    pos = y > 0
    hi = abar.masked_fill(pos, float("-inf")).max(1).values
    if multilabel:
        lo = abar.masked_fill(~pos, float("inf")).min(1).values
    else:
        lo = abar.gather(1, label_index(y)[:, None]).squeeze(1)
    return lo - hi


def reliability_code(a1: torch.Tensor, a2: torch.Tensor, y: torch.Tensor, tau_w: float, multilabel: bool) -> torch.Tensor:
    g = gap((a1 + a2) / 2, y, multilabel)
    g = (g - g.mean()) / (g.std(unbiased=False) + 1e-6)  # z-scored in the batch, δ = 0
    return torch.sigmoid(g / tau_w).detach()


def margin(z1: torch.Tensor, z2: torch.Tensor, y: torch.Tensor, w: torch.Tensor, gamma: float,
           multilabel: bool, normalize: str) -> torch.Tensor:
    """Σ_{i≠j} min(w_i,w_j) max(0, γ − ζ_ij S_ij); normalize = 'weights' [C] or 'pairs' [R]."""
    h1, h2 = F.normalize(torch.tanh(z1), dim=1), F.normalize(torch.tanh(z2), dim=1)
    S = (h1 @ h2.T).clamp(-1, 1)
    zeta = positive_mask(y, multilabel).float() * 2 - 1
    B = z1.shape[0]
    off = ~torch.eye(B, dtype=torch.bool, device=z1.device)
    wm = torch.minimum(w[:, None], w[None, :]) * off
    hinge = F.relu(gamma - zeta * S)
    total = (wm * hinge).sum()
    if normalize == "weights":
        return total / wm.sum().clamp_min(1e-12)
    return total / (B * (B - 1))


def inter_code(z1: torch.Tensor, z2: torch.Tensor, y: torch.Tensor, gamma: float, shift: float,
               multilabel: bool) -> torch.Tensor:
    """DGSA inter loss as released [C: `FARLoss._inter_loss`]: tanh(z) not renormalised, τ_e = 1,
    same-label off-diagonal exponents multiplied by 0 (each adds exp(0) = 1), the diagonal kept in
    the sum as max(S_ii, 0), the second direction thresholding on the column diagonal S_jj while
    summing along rows."""
    S = torch.tanh(z1) @ torch.tanh(z2).T
    B = S.shape[0]
    eye = torch.eye(B, dtype=torch.bool, device=S.device)
    same = positive_mask(y, multilabel) & ~eye
    d = S.diagonal()
    out = S.new_zeros(())
    for thr in (d[:, None] - gamma, d[None, :] - gamma):
        C = torch.where(S >= thr, S, S - shift)
        E = torch.where(eye, C.clamp_min(0.0), C.masked_fill(same, 0.0))
        out = out + (-d + torch.logsumexp(E, dim=1) + gamma).mean()
    return out


# ------------------------------------------------------------------------------------------------
# RFCMH as written in the paper [P]


def possibility_paper(z: torch.Tensor, W: torch.Tensor, temp: float) -> torch.Tensor:
    return torch.sigmoid(z @ W / temp)


def admissibility_paper(p: torch.Tensor, y: torch.Tensor, kappa: int, multilabel: bool) -> torch.Tensor:
    """Eq. 1-2 as written: y=1: n = 1 − max_{j≠k} p_ij, a = (p + κn)/(1+κ); y=0: n = p_{i,t}
    (multi-label: mean positive possibility), a = (p + n)/2."""
    pos = y > 0
    K = p.shape[1]
    # max over j != k, per entry: the row max unless k is the argmax, then the second largest
    top2 = p.topk(min(2, K), dim=1)
    first, second = top2.values[:, :1], top2.values[:, -1:]
    is_arg = torch.zeros_like(p, dtype=torch.bool).scatter_(1, top2.indices[:, :1], True)
    max_other = torch.where(is_arg, second, first)
    if multilabel:
        pt = ((p * pos).sum(1) / pos.sum(1).clamp_min(1))[:, None]
    else:
        pt = p.gather(1, label_index(y)[:, None])
    a = torch.where(pos, (p + kappa * (1 - max_other)) / (1 + kappa), (p + pt) / 2)
    return a.clamp(1e-6, 1 - 1e-6)


def intra_paper(z1: torch.Tensor, z2: torch.Tensor, tau: float, q: float) -> torch.Tensor:
    S = z1 @ z2.T / tau
    p_i2t = torch.log_softmax(S, dim=1).diagonal().exp()
    p_t2i = torch.log_softmax(S.T, dim=1).diagonal().exp()
    return lq(p_i2t, q).mean() + lq(p_t2i, q).mean()


def reliability_paper(a1: torch.Tensor, a2: torch.Tensor, y: torch.Tensor, delta: float, tau: float,
                      multilabel: bool) -> torch.Tensor:
    return torch.sigmoid((gap((a1 + a2) / 2, y, multilabel) - delta) / tau).detach()


def inter_paper(z1: torch.Tensor, z2: torch.Tensor, gamma: float, shift: float, tau_e: float) -> torch.Tensor:
    """Eq. 8-9: hard negatives keep their score, easy ones shift by −Δ; sum over j ≠ i; I2T rows
    plus the true T2I transpose."""
    S = z1 @ z2.T
    B = S.shape[0]
    eye = torch.eye(B, dtype=torch.bool, device=S.device)
    out = S.new_zeros(())
    for M in (S, S.T):
        d = M.diagonal()
        C = torch.where(M >= d[:, None] - gamma, M, M - shift)
        lse = torch.logsumexp((C / tau_e).masked_fill(eye, float("-inf")), dim=1)
        out = out + (-d + tau_e * lse + gamma).mean()
    return out


# ------------------------------------------------------------------------------------------------
# baselines [R]


def class_logits(z: torch.Tensor, W: torch.Tensor, temp: float) -> torch.Tensor:
    return z @ W / temp


def label_loss(z1: torch.Tensor, z2: torch.Tensor, W: torch.Tensor, y: torch.Tensor, temp: float,
               multilabel: bool, eps: float = 0.0, reduce: bool = True) -> torch.Tensor:
    """CE (single-label, targets (1−ε)y + ε/K) or BCE (multi-label) on prototype logits, both
    modalities; per-sample values if reduce=False."""
    K = y.shape[1]
    target = y.float() * (1 - eps) + eps / K
    out = []
    for z in (z1, z2):
        lg = class_logits(z, W, temp)
        if multilabel:
            out.append(F.binary_cross_entropy_with_logits(lg, target, reduction="none").mean(1))
        else:
            out.append(-(target * torch.log_softmax(lg, dim=1)).sum(1))
    per = out[0] + out[1]
    return per.mean() if reduce else per / 2
