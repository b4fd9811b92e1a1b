"""KOTMS: Kronecker Orthogonal Tri-Modal Shaping (spec §2). Learned from the weights alone."""

from __future__ import annotations

import math

import torch

from paperflow.quantization.ops import cayley, kron_factors, random_orthogonal, rotate_weight

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


class _TrimodalLoss(torch.autograd.Function):
    """The loss of `trimodal_loss` with its gradient written out (issue 24: autograd through the
    ~20 elementwise ops was most of KOTMS's time; this is one forward pass and ~10 backward ops).

    Per weight (rows × n, N elements): Y = row-centred W', c = mean|Y| per row (no gradient, as the
    spec's detach), σ = c/4, z = Y/σ, γ₊, γ₋, γ₀ the mixture responsibilities, d = γ₊ − γ₋, ḡ_k = mean γ_k.
      ∂L_nll/∂z = (z − 4d)/N                     (∂lse/∂z = 4d)
      ∂L_bal/∂z = (8/N)[(ḡ₊−⅓)γ₊(1−d) − (ḡ₋−⅓)γ₋(1+d) − (ḡ₀−⅓)γ₀d]
      ∂L/∂W' = centre_rows(∂L/∂z / σ)            (the row-centring projection is symmetric)
    Checked against autograd through `trimodal_loss_reference` in tests/quantization/test_rotation.py.
    """

    @staticmethod
    def forward(ctx, Wr: torch.Tensor, bal_weight: float) -> torch.Tensor:  # type: ignore[override]
        Y = Wr - Wr.mean(dim=-1, keepdim=True)
        sigma = 0.25 * Y.abs().mean(dim=-1, keepdim=True).clamp(min=1e-12)
        z = Y / sigma
        q = 4 * z  # d± − d₀ = ±q − 8
        mx = torch.clamp(q.abs() - 8, min=0)  # max of (0, q − 8, −q − 8)
        e0, ep, em = torch.exp(-mx), torch.exp(q - 8 - mx), torch.exp(-q - 8 - mx)
        S = e0 + ep + em
        lse = mx + torch.log(S)  # log Σ_k exp(d_k − d₀)
        gp, gm, g0 = ep / S, em / S, e0 / S
        per = (-2, -1)
        nll = (0.5 * z * z - lse).mean(dim=per) + torch.log(sigma).mean(dim=per) + _LOG_SQRT_2PI - math.log(1 / 3)
        mp, mm, m0 = gp.mean(dim=per), gm.mean(dim=per), g0.mean(dim=per)
        bal = (mm - 1 / 3) ** 2 + (m0 - 1 / 3) ** 2 + (mp - 1 / 3) ** 2
        ctx.save_for_backward(z, gp, gm, g0, sigma, mp, mm, m0)
        ctx.bal_weight = bal_weight
        return nll + bal_weight * bal

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        z, gp, gm, g0, sigma, mp, mm, m0 = ctx.saved_tensors
        N = z.shape[-1] * z.shape[-2]
        d = gp - gm

        def dev(mean: torch.Tensor) -> torch.Tensor:
            return (mean - 1 / 3)[..., None, None]

        dz = (z - 4 * d) / N + ctx.bal_weight * (8 / N) * (dev(mp) * gp * (1 - d) - dev(mm) * gm * (1 + d)
                                                           - dev(m0) * g0 * d)
        dY = dz / sigma
        return grad_out[..., None, None] * (dY - dY.mean(dim=-1, keepdim=True)), None


def trimodal_loss(Wr: torch.Tensor, bal_weight: float = 0.1) -> torch.Tensor:
    """L_nll + 0.1·L_bal: rows pulled towards three equally used modes {−c, 0, +c}.

    With σ = c/4 for all three components, z = Y/σ and the component log-densities are
    d₀ = −z²/2 − log σ − log√(2π) and d± = d₀ ± 4z − 8, which this evaluates in one pass, with the
    gradient of `_TrimodalLoss`. Wr: one weight [rows, n] (a scalar) or a stack [..., rows, n].
    """
    return _TrimodalLoss.apply(Wr, bal_weight)


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
