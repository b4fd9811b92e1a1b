"""Entropic JKO steps and Sinkhorn costs on a page grid, with a separable Gaussian kernel.

Densities are (B, H, W) tensors on an H×W grid of cell centres in [0, 1]² (page units). The Gibbs
kernel K = exp(−‖x − y‖²/ε) is separable on a grid, K·B = K_y B K_xᵀ, so it is never formed densely:
every kernel application is two small matmuls. Everything runs in float64 (large σ = 2τ/ε overflows in
float32) and is differentiable, so steps can be unrolled under autograd.

JKO step (Peyré 2015, "Entropic approximation of Wasserstein gradient flows"), for the energy
F(ρ) = Σ ρ V + β Σ ρ log ρ:  ρ_{k+1} = argmin_ρ F(ρ) + W_ε²(ρ, ρ_k)/(2τ), solved by the iterations

    a = ρ_k / K(b);   Ka = K(a);   b = prox_σF(Ka) / Ka;   ρ_{k+1} = b · K(a)

with σ = 2τ/ε and the closed-form KL-proximal map prox_σF(p) = exp((log p − σV − σβ)/(1 + σβ)).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

TINY = 1e-300


@dataclass(frozen=True)
class Grid:
    """An H×W grid of cell centres in page units, and its 1-D Gibbs kernels for a given ε."""

    h: int
    w: int

    def axes(self, dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
        ys = (torch.arange(self.h, dtype=dtype) + 0.5) / self.h
        xs = (torch.arange(self.w, dtype=dtype) + 0.5) / self.w
        return ys, xs

    def kernels(self, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
        ys, xs = self.axes()
        ky = torch.exp(-(ys[:, None] - ys[None, :]) ** 2 / eps)
        kx = torch.exp(-(xs[:, None] - xs[None, :]) ** 2 / eps)
        return ky, kx

    def costs(self) -> tuple[torch.Tensor, torch.Tensor]:
        ys, xs = self.axes()
        return (ys[:, None] - ys[None, :]) ** 2, (xs[:, None] - xs[None, :]) ** 2

    def dense_kernel(self, eps: float) -> torch.Tensor:
        """The (HW, HW) kernel — for tests on small grids only."""
        ys, xs = self.axes()
        yy, xx = torch.meshgrid(ys, xs, indexing="ij")
        pts = torch.stack([yy.reshape(-1), xx.reshape(-1)], 1)
        return torch.exp(-torch.cdist(pts, pts) ** 2 / eps)


def apply_kernel(ky: torch.Tensor, kx: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """K·m for a separable kernel: K_y m K_xᵀ on the last two dims (K symmetric)."""
    return ky @ m @ kx.T


@dataclass(frozen=True)
class JKOParams:
    tau: float
    eps: float
    beta: float
    iters: int = 30
    tol: float = 0.0  # stop early when the relative change of b is below tol (0: run all iters)


def jko_step(rho: torch.Tensor, V: torch.Tensor, p: JKOParams, grid: Grid | None = None,
             kernels: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """One entropic JKO step from `rho` (B, H, W) under potential `V` (B, H, W); float64, differentiable."""
    rho = rho.to(torch.float64)
    V = V.to(torch.float64)
    if kernels is None:
        g = grid or Grid(rho.shape[-2], rho.shape[-1])
        kernels = g.kernels(p.eps)
    ky, kx = (k.to(rho.device) for k in kernels)
    sigma = 2.0 * p.tau / p.eps
    shift = -sigma * V - sigma * p.beta
    b = torch.ones_like(rho)
    a = rho
    for _ in range(p.iters):
        a = rho / apply_kernel(ky, kx, b).clamp_min(TINY)
        ka = apply_kernel(ky, kx, a).clamp_min(TINY)
        b_new = torch.exp((torch.log(ka) + shift) / (1.0 + sigma * p.beta)) / ka
        if p.tol > 0 and not torch.is_grad_enabled():
            change = ((b_new - b).abs().amax(dim=(-2, -1)) / b.abs().amax(dim=(-2, -1))).max()
            b = b_new
            if float(change) < p.tol:
                break
        else:
            b = b_new
    return b * apply_kernel(ky, kx, a)


def energy(rho: torch.Tensor, V: torch.Tensor, beta: float) -> torch.Tensor:
    """F(ρ) = Σ ρ V + β Σ ρ log ρ, per batch element."""
    rho = rho.to(torch.float64)
    return (rho * V.to(torch.float64)).sum((-2, -1)) + beta * (rho * torch.log(rho.clamp_min(TINY))).sum((-2, -1))


def gibbs(V: torch.Tensor, beta: float) -> torch.Tensor:
    """The flow's stationary density ρ_∞ ∝ exp(−V/β) — the one-step softmax localiser."""
    flat = (-V.to(torch.float64) / beta).flatten(-2)
    return torch.softmax(flat, -1).reshape(V.shape)


def sinkhorn(a: torch.Tensor, b: torch.Tensor, eps: float, iters: int = 30,
             kernels: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Scalings (u, v) of the entropic plan π = diag(u) K diag(v) between densities a, b (B, H, W)."""
    a = a.to(torch.float64)
    b = b.to(torch.float64)
    if kernels is None:
        kernels = Grid(a.shape[-2], a.shape[-1]).kernels(eps)
    ky, kx = (k.to(a.device) for k in kernels)
    v = torch.ones_like(b)
    u = a
    for _ in range(iters):
        u = a / apply_kernel(ky, kx, v).clamp_min(TINY)
        v = b / apply_kernel(ky, kx, u).clamp_min(TINY)
    return u, v


def ot_eps(a: torch.Tensor, b: torch.Tensor, eps: float, iters: int = 30,
           kernels: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """Entropic OT value (dual form) ε(⟨a, log u⟩ + ⟨b, log v⟩) per batch element; differentiable."""
    u, v = sinkhorn(a, b, eps, iters, kernels)
    a64, b64 = a.to(torch.float64), b.to(torch.float64)
    return eps * ((a64 * torch.log(u.clamp_min(TINY))).sum((-2, -1)) + (b64 * torch.log(v.clamp_min(TINY))).sum((-2, -1)))


def transport_cost(a: torch.Tensor, b: torch.Tensor, eps: float, iters: int = 30) -> torch.Tensor:
    """Primal transport cost ⟨C, π_ε⟩ of the entropic plan (W_ε² in page units²), per batch element.
    C = Δy² + Δx² is separable, so ⟨C, π⟩ = uᵀ[(K_y∘C_y) ⊗ K_x + K_y ⊗ (K_x∘C_x)] v without a dense matrix."""
    grid = Grid(a.shape[-2], a.shape[-1])
    ky, kx = grid.kernels(eps)
    cy, cx = grid.costs()
    u, v = sinkhorn(a, b, eps, iters, (ky, kx))
    kcv = (ky * cy) @ v @ kx.T + ky @ v @ (kx * cx).T
    return (u * kcv).sum((-2, -1))


def sinkhorn_divergence(a: torch.Tensor, b: torch.Tensor, eps: float, iters: int = 30) -> torch.Tensor:
    """S_ε(a, b) = OT_ε(a, b) − ½ OT_ε(a, a) − ½ OT_ε(b, b) (debiased; 0 when a = b)."""
    k = Grid(a.shape[-2], a.shape[-1]).kernels(eps)
    return ot_eps(a, b, eps, iters, k) - 0.5 * ot_eps(a, a, eps, iters, k) - 0.5 * ot_eps(b, b, eps, iters, k)


def ot_eps_envelope(a: torch.Tensor, b: torch.Tensor, eps: float, iters: int = 30,
                    kernels: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """OT_ε(a, b) with its gradient through the dual potentials (envelope theorem): the value of
    :func:`ot_eps`, and ∂/∂a = f = ε log u, ∂/∂b = g = ε log v, without back-propagating through the
    Sinkhorn iterations (spec §2: "the gradient of W_ε² with respect to ρ_k is its Sinkhorn dual
    potential"). Exact at convergence; the potentials' constant shift does not matter for densities."""
    a64, b64 = a.to(torch.float64), b.to(torch.float64)
    with torch.no_grad():
        u, v = sinkhorn(a64.detach(), b64.detach(), eps, iters, kernels)
        f = eps * torch.log(u.clamp_min(TINY))
        g = eps * torch.log(v.clamp_min(TINY))
        value = (a64 * f).sum((-2, -1)) + (b64 * g).sum((-2, -1))
    return value + ((a64 - a64.detach()) * f).sum((-2, -1)) + ((b64 - b64.detach()) * g).sum((-2, -1))


def sinkhorn_divergence_envelope(a: torch.Tensor, b: torch.Tensor, eps: float, iters: int = 30) -> torch.Tensor:
    """S_ε(a, b) as :func:`sinkhorn_divergence`, with envelope-theorem gradients (:func:`ot_eps_envelope`)."""
    k = tuple(x.to(a.device) for x in Grid(a.shape[-2], a.shape[-1]).kernels(eps))
    return (ot_eps_envelope(a, b, eps, iters, k) - 0.5 * ot_eps_envelope(a, a, eps, iters, k)
            - 0.5 * ot_eps_envelope(b, b, eps, iters, k))
