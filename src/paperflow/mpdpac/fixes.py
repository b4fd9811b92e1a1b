"""The two training-free fixes, written against `model.Backbone` (our restatement of the official code,
hong-sujung/MPD-PAC, LaViDa/.../llada_ours/generate.py and modeling_llada.py).

MPS (Mask Prior Suppression). The prior is built once from the mean embedding row e, run alone (length 1)
through the network: H [n_layers, D] (one state per layer, the last one final-normed), μ = mean_ℓ H_ℓ,
U = top-k right singular vectors of H − μ, u = normalize(Uᵀ(H_last − μ)). At every decoding step, on masked
slots only: z = Uᵀ(h − μ), a = λ·clip(cos(z, u), 0, 1), h ← h + U((z − a(zᵀu)u) − z) — the code's form,
which removes only the component along u inside the subspace (the README's h − λcosθ·UUᵀ(h − μ) differs).

MRS (Monotonic RoPE Scaling): rotary pair i's angle is multiplied by s_i = 1 + γβ·σ(η(i/(d/2−1) − τ0)),
γ = 0.1 hard-coded and β clamped to [0, 1] as in the code. `s_max` (an off-spec arm, labelled as such)
replaces γβ by s_max − 1 and lifts the clamp. Scale vectors are cached on (head_dim, β, η, τ0, shape, γ).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import Tensor

from paperflow.mpdpac.model import Backbone

MRS_GAMMA = 0.1  # hard-coded in the official code (`low_strength`)


@dataclass
class Prior:
    mu: Tensor  # [D]
    U: Tensor  # [D, k], orthonormal columns
    u: Tensor  # [k], unit
    kind: str  # paper | random | calibrated


@torch.no_grad()
def prior_states(model: Backbone) -> Tensor:
    """H [n_layers, D]: the per-layer states of the mean embedding row run alone (position 0)."""
    E = model.embedding_matrix()
    e = E.mean(dim=0)
    ids = torch.zeros((1, 1), dtype=torch.long, device=E.device)
    st = model.states(ids, embed_override=e)
    return torch.stack([h[0, 0] for h in st.layer_states]).float()


def paper_prior(model: Backbone, k: int) -> Prior:
    """The official prior. k is capped at n_layers − 1 (the rank of n_layers centred states)."""
    H = prior_states(model)
    k = max(1, min(int(k), H.shape[0] - 1))
    mu = H.mean(dim=0)
    _, _, Vh = torch.linalg.svd(H - mu, full_matrices=False)
    U = Vh[:k].T.contiguous()
    u = torch.nn.functional.normalize((H[-1] - mu) @ U, dim=-1)
    return Prior(mu, U, u, "paper")


def random_prior(like: Prior, seed: int) -> Prior:
    """The random-subspace control: same μ and k, random orthonormal U and random unit u."""
    g = torch.Generator().manual_seed(int(seed))
    D, k = like.U.shape
    Q, _ = torch.linalg.qr(torch.randn(D, k, generator=g, dtype=torch.float64))
    u = torch.nn.functional.normalize(torch.randn(k, generator=g, dtype=torch.float64), dim=-1)
    dev = like.mu.device
    return Prior(like.mu.clone(), Q.float().to(dev), u.float().to(dev), "random")


def calibrated_prior(like: Prior, masked_states: Tensor) -> Prior:
    """Ablation: the paper's μ and U, u = the mean direction of masked final states at step 0 (estimated
    on training scenes, never the test split)."""
    z = (masked_states.float() - like.mu) @ like.U
    u = torch.nn.functional.normalize(z.mean(dim=0), dim=-1)
    return Prior(like.mu.clone(), like.U.clone(), u, "calibrated")


def prior_cos(h: Tensor, prior: Prior) -> Tensor:
    """Unclipped cos(Uᵀ(h − μ), u) per row of h [..., D] (the drift diagnostic)."""
    z = (h.float() - prior.mu) @ prior.U
    return (z @ prior.u) / (z.norm(dim=-1) + 1e-6)


def mps_apply(h: Tensor, masked: Tensor, prior: Prior, lam: float) -> tuple[Tensor, Tensor]:
    """Suppress the prior direction in the final states h [B, T, D] at masked positions ([B, T] bool).
    Returns (new h, factor a [B, T] — zero where not masked or where cos ≤ 0)."""
    z = (h.float() - prior.mu) @ prior.U  # [B, T, k]
    proj = z @ prior.u  # [B, T]
    cos = proj / (z.norm(dim=-1) + 1e-6)
    a = float(lam) * cos.clamp(0.0, 1.0) * masked.float()
    z_new = z - (a * proj)[..., None] * prior.u
    return (h.float() + (z_new - z) @ prior.U.T).to(h.dtype), a


_MRS_CACHE: dict[tuple, Tensor] = {}


def mrs_scale(head_dim: int, beta: float, eta: float, tau0: float, shape: str = "sigmoid",
              s_max: float | None = None) -> Tensor:
    """s [head_dim / 2]: the multiplier of each rotary pair's angle (1 everywhere when β = 0)."""
    key = (int(head_dim), float(beta), float(eta), float(tau0), shape, None if s_max is None else float(s_max),
           MRS_GAMMA)
    if key in _MRS_CACHE:
        return _MRS_CACHE[key]
    half = head_dim // 2
    x = torch.arange(half, dtype=torch.float64) / max(half - 1, 1)
    if shape == "sigmoid":
        y = torch.sigmoid(eta * (x - tau0))
    elif shape == "linear":
        y = x
    elif shape == "cosine":
        y = 0.5 * (1 - torch.cos(math.pi * x))
    else:
        raise ValueError(f"unknown MRS shape {shape!r}")
    amp = (float(s_max) - 1.0) if s_max is not None else MRS_GAMMA * min(1.0, max(0.0, float(beta)))
    s = (1.0 + amp * y).float()
    _MRS_CACHE[key] = s
    return s


@contextmanager
def rotary_scaled(model: Backbone, scale: Tensor | None) -> Iterator[None]:
    """Multiply the model's rotary frequencies by `scale` (queries and keys alike) inside the block."""
    if scale is None:
        yield
        return
    base = model.rotary_inv_freq().clone()
    model.set_rotary_inv_freq(base * scale.to(device=base.device, dtype=base.dtype))
    try:
        yield
    finally:
        model.set_rotary_inv_freq(base)
