"""Quantization primitives shared by every method: per-token activation quantization, Kronecker
rotations, ternary/int4 dequantization. One definition each, so the fake-quant path and the packed
loader compute bit-identical weights."""

from __future__ import annotations

import math

import torch


def act_quant(x: torch.Tensor, bits: int, clip: float) -> torch.Tensor:
    """Dynamic per-token asymmetric quantization over the last dim (spec §4)."""
    if bits >= 16:
        return x
    qmax = 2**bits - 1
    mn, mx = torch.aminmax(x, dim=-1, keepdim=True)
    lo = clip * mn
    hi = clip * mx
    s = ((hi - lo) / qmax).clamp(min=1e-8)
    z = torch.round(-lo / s)
    # s·(clamp(round(x/s) + z, 0, qmax) − z), the same IEEE operations in the same order, done in place on
    # one fresh tensor (one allocation of x's size instead of five; issue 24, bit-identical: tested)
    y = x / s
    return y.round_().add_(z).clamp_(0, qmax).sub_(z).mul_(s)


def kron_factors(m: int, n: int) -> tuple[int, int]:
    """(l, r) for a weight of shape m×n: r = largest divisor of n with r ≤ min(n, ⌊√(mn/64)⌋)."""
    cap = min(n, int(math.isqrt(m * n // 64)))
    r = max(d for d in range(1, max(cap, 1) + 1) if n % d == 0)
    return n // r, r


def rotate_in(x: torch.Tensor, C: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """x' = Q x with Q = C ⊗ Bᵀ: reshape the last dim (row-major) to l×r, apply C·X·B."""
    l, r = C.shape[0], B.shape[0]
    shp = x.shape
    X = x.reshape(*shp[:-1], l, r)
    return (C @ X @ B).reshape(shp)


def rotate_weight(W: torch.Tensor, C: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """W' = W Qᵀ (each row reshaped to l×r and replaced by C·M·B), so W'x' = Wx.

    Two plain matrix products (rows·l × r by B, then C by l × rows·r) instead of `rotate_in`'s batch of
    small ones: the same values up to float rounding, ~20% faster forward + backward in KOTMS."""
    l, r = C.shape[0], B.shape[0]
    m = W.shape[0]
    XB = (W.reshape(m * l, r) @ B).reshape(m, l, r)
    return (C @ XB.transpose(0, 1).reshape(l, m * r)).reshape(l, m, r).transpose(0, 1).reshape(W.shape)


def cayley(S: torch.Tensor) -> torch.Tensor:
    """Cayley(A) = (I + A)⁻¹(I − A) with A = S − Sᵀ: orthogonal for any S."""
    A = S - S.T
    eye = torch.eye(S.shape[0], dtype=S.dtype, device=S.device)
    return torch.linalg.solve(eye + A, eye - A)


def random_orthogonal(k: int, gen: torch.Generator) -> torch.Tensor:
    """Haar-random k×k orthogonal matrix (QR of a Gaussian with sign fix). Made where `gen` lives
    (the CPU generators used here), so the draw does not depend on the job's device; the caller
    moves it (QLinear.set_rotation moves C, B to the weight's device)."""
    g = torch.randn(k, k, generator=gen, dtype=torch.float64, device=gen.device)
    q, r = torch.linalg.qr(g)
    q = q * torch.sign(torch.diagonal(r)).unsqueeze(0)
    return q.to(torch.float32)


def ternary_dequant(t: torch.Tensor, mu: torch.Tensor, alpha: torch.Tensor, block: int) -> torch.Tensor:
    """Ŵ[i, j] = μ[i, j//block] + α[i, j//block]·t[i, j]; t int8 in {-1,0,1}, μ/α [m, n_blocks]
    (fp16 values held in fp32). The one formula used by quantizers and the packed loader."""
    n = t.shape[1]
    idx = torch.arange(n, device=t.device) // block
    mu_f = mu.to(torch.float32)[:, idx]
    al_f = alpha.to(torch.float32)[:, idx]
    return mu_f + al_f * t.to(torch.float32)


def int4_dequant(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Ŵ = scale[i]·q[i, j] with q int8 in [-8, 7], scale [m] (fp16 values)."""
    return scale.to(torch.float32)[:, None] * q.to(torch.float32)


def fp16_round(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.float16).to(torch.float32)
