"""KOTMS: Kronecker Orthogonal Tri-Modal Shaping (spec §2). Learned from the weights alone."""

from __future__ import annotations

import math

import torch

from paperflow.quantization.ops import cayley, kron_factors, random_orthogonal, rotate_weight

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def trimodal_loss(Wr: torch.Tensor, bal_weight: float = 0.1) -> torch.Tensor:
    """L_nll + 0.1·L_bal: rows pulled towards three equally used modes {−c, 0, +c}.

    With σ = c/4 for all three components, z = Y/σ and the component log-densities are
    d₀ = −z²/2 − log σ − log√(2π) and d± = d₀ ± 4z − 8, which this evaluates in one pass.
    """
    Y = Wr - Wr.mean(dim=1, keepdim=True)
    c = Y.abs().mean(dim=1, keepdim=True).detach().clamp(min=1e-12)
    sigma = 0.25 * c
    z = Y / sigma
    a = 4 * z - 8  # d₊ − d₀
    b = -4 * z - 8  # d₋ − d₀
    mx = torch.clamp(torch.maximum(a, b), min=0).detach()
    lse = mx + torch.log(torch.exp(-mx) + torch.exp(a - mx) + torch.exp(b - mx))  # log Σ exp(d_k − d₀)
    log_mix = -0.5 * z * z - torch.log(sigma) - _LOG_SQRT_2PI + lse + math.log(1 / 3)
    nll = -log_mix.mean()
    g_plus = torch.exp(a - lse).mean()
    g_minus = torch.exp(b - lse).mean()
    g_zero = torch.exp(-lse).mean()
    bal = (g_minus - 1 / 3) ** 2 + (g_zero - 1 / 3) ** 2 + (g_plus - 1 / 3) ** 2
    return nll + bal_weight * bal


def trimodal_loss_reference(Wr: torch.Tensor, bal_weight: float = 0.1) -> torch.Tensor:
    """Direct transcription of the spec (three Gaussian log-densities, logsumexp, softmax); tests only."""
    Y = Wr - Wr.mean(dim=1, keepdim=True)
    c = Y.abs().mean(dim=1, keepdim=True).detach().clamp(min=1e-12)
    sigma = 0.25 * c
    comps = torch.stack([-0.5 * ((Y - mu) / sigma) ** 2 - torch.log(sigma) - _LOG_SQRT_2PI for mu in (-c, 0 * c, c)])
    log_mix = torch.logsumexp(comps + math.log(1 / 3), dim=0)
    gamma = torch.softmax(comps, dim=0)
    bal = ((gamma.mean(dim=(1, 2)) - 1 / 3) ** 2).sum()
    return -log_mix.mean() + bal_weight * bal


def learn_kotms(W: torch.Tensor, iters: int = 100, lr: float = 1e-2, rows_per_iter: int | None = None,
                gen: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """Learn C ∈ O(l), B ∈ O(r) (Cayley of S_l, S_r, both init 0 → identity) with Adam.

    rows_per_iter=None: full-batch loss (official). An int: each iteration uses a fresh random
    subset of that many weight rows (a stochastic estimate of the same loss; [project] CPU budget).
    The full loss is evaluated at the start and at the end; if the end is worse, the identity is
    kept (so the loss never increases). Returns (C, B, log); C and B on W's device.
    The row subsets are drawn where `gen` lives (the CPU in cli.py), so they do not depend on W's device.
    """
    m, n = W.shape
    l, r = kron_factors(m, n)
    W = W.detach().to(torch.float32)
    dev = W.device
    Sl = torch.zeros(l, l, requires_grad=True, device=dev)
    Sr = torch.zeros(r, r, requires_grad=True, device=dev)
    opt = torch.optim.Adam([Sl, Sr], lr=lr)
    with torch.no_grad():
        loss0 = float(trimodal_loss(W))
    trace = []
    for _ in range(iters):
        Wb = W
        if rows_per_iter is not None and rows_per_iter < m:
            idx = torch.randperm(m, generator=gen, device=gen.device if gen is not None else "cpu")
            Wb = W[idx[:rows_per_iter].to(dev)]
        loss = trimodal_loss(rotate_weight(Wb, cayley(Sl), cayley(Sr)))
        trace.append(float(loss.detach()))
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        C, B = cayley(Sl), cayley(Sr)
        loss1 = float(trimodal_loss(rotate_weight(W, C, B)))
    kept = loss1 <= loss0
    if not kept:
        C, B = torch.eye(l, device=dev), torch.eye(r, device=dev)
    return C.detach(), B.detach(), {"shape": [m, n], "l": l, "r": r, "loss_first": loss0, "loss_last": min(loss0, loss1),
                                    "loss_learned": loss1, "learned_kept": kept, "trace": trace[:: max(1, iters // 10)]}


def random_kron(W: torch.Tensor, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """QuaRot-like baseline: Haar-random orthogonal Kronecker factors of the KOTMS shape (on gen's
    device, i.e. the CPU here, whatever W's device: the same draw on every device)."""
    l, r = kron_factors(*W.shape)
    return random_orthogonal(l, gen), random_orthogonal(r, gen)
