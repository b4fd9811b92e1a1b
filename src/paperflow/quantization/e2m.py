"""Weight quantizers: RTN ternary / RTN int4 baselines and E2M-ATQ (spec §3) with the GPTQ-style
blockwise error-compensation loop. Grouping is "lite" (one order-1 group per row and 128-column
block); the official "arb" grouping is not implemented (see README)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from paperflow.quantization.ops import fp16_round, int4_dequant, ternary_dequant


@dataclass
class TernaryLayer:
    t: torch.Tensor  # int8 [m, n] in {-1, 0, 1}
    mu: torch.Tensor  # fp32 holding fp16 values [m, n_blocks]
    alpha: torch.Tensor  # same
    block: int

    def dequant(self) -> torch.Tensor:
        return ternary_dequant(self.t, self.mu, self.alpha, self.block)


@dataclass
class Int4Layer:
    q: torch.Tensor  # int8 [m, n] in [-8, 7]
    scale: torch.Tensor  # fp32 holding fp16 values [m]

    def dequant(self) -> torch.Tensor:
        return int4_dequant(self.q, self.scale)


def rtn_ternary(W: torch.Tensor) -> TernaryLayer:
    """BitNet b1.58 absmean rule per row: α = mean|w|, t = round(clip(w/α, −1, 1)); μ = 0."""
    alpha = fp16_round(W.abs().mean(dim=1, keepdim=True).clamp(min=1e-8))
    t = torch.round(torch.clamp(W / alpha, -1, 1)).to(torch.int8)
    return TernaryLayer(t, torch.zeros_like(alpha), alpha, block=W.shape[1])


def rtn_int4(W: torch.Tensor) -> Int4Layer:
    """Per-output-channel symmetric 4-bit, absmax scale (levels −7..7)."""
    scale = fp16_round(W.abs().amax(dim=1).clamp(min=1e-8) / 7)
    q = torch.clamp(torch.round(W / scale[:, None]), -8, 7).to(torch.int8)
    return Int4Layer(q, scale)


# ---------------------------------------------------------------- E2M-ATQ (order 1, one group)
def _fit(w: torch.Tensor, mu: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    d = w - mu[:, None]
    delta = 0.75 * d.abs().mean(dim=1, keepdim=True)
    t = torch.sign(d) * (d.abs() > delta)
    alpha = (t * d).sum(1) / t.abs().sum(1).clamp(min=1)
    return t, alpha


def e2m_stage1(w: torch.Tensor, iters: int = 15) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Euclidean warm start: TWN-style threshold + least-squares scale, alternating offset shifts.
    Returns (t float in {-1,0,1}, μ [m], α [m])."""
    mu = w.mean(dim=1)
    t, alpha = _fit(w, mu)
    for _ in range(iters):
        mu = mu + (w - mu[:, None] - alpha[:, None] * t).mean(dim=1)
        t, alpha = _fit(w, mu)
    return t, mu, alpha


def e2m_stage2(w: torch.Tensor, t: torch.Tensor, mu: torch.Tensor, alpha: torch.Tensor, S: torch.Tensor,
               alt_iters: int = 15) -> tuple[torch.Tensor, torch.Tensor]:
    """Manifold relocation: with t frozen, minimise eᵀSe over (α, μ) per row (closed-form 2×2
    normal equations; alternating coordinate updates where the determinant is < 1e-10)."""
    St = t @ S
    Sw = w @ S
    one_S_one = S.sum()
    a11 = (St * t).sum(1)
    a12 = St.sum(1)
    b1 = (Sw * t).sum(1)
    b2 = Sw.sum(1)
    det = a11 * one_S_one - a12 * a12
    ok = det.abs() >= 1e-10
    safe = torch.where(ok, det, torch.ones_like(det))
    alpha_cf = (b1 * one_S_one - a12 * b2) / safe
    mu_cf = (a11 * b2 - a12 * b1) / safe
    # fallback: alternating coordinate descent (official code), from the stage-1 values
    a_alt, m_alt = alpha.clone(), mu.clone()
    if not bool(ok.all()):
        for _ in range(alt_iters):
            a_alt = torch.where(a11 > 0, (b1 - a12 * m_alt) / a11.clamp(min=1e-30), a_alt)
            m_alt = torch.where(one_S_one > 0, (b2 - a12 * a_alt) / one_S_one.clamp(min=1e-30), m_alt)
    return torch.where(ok, alpha_cf, a_alt), torch.where(ok, mu_cf, m_alt)


def output_error(w: torch.Tensor, what: torch.Tensor, S: torch.Tensor) -> torch.Tensor:
    """Per-row eᵀSe with e = w − ŵ."""
    e = w - what
    return ((e @ S) * e).sum(1)


def e2m_block(w: torch.Tensor, S: torch.Tensor, stage2: bool = True, iters: int = 15):
    """E2M-ATQ of one block (rows × ≤128 columns). Returns (t, μ, α) before fp16 rounding."""
    t, mu, alpha = e2m_stage1(w, iters)
    if stage2:
        alpha, mu = e2m_stage2(w, t, mu, alpha, S, iters)
    return t, mu, alpha


def e2m_gptq(W: torch.Tensor, H: torch.Tensor | None, block: int = 128, damp: float = 0.1, stage2: bool = True,
             gptq: bool = True, iters: int = 15, log: dict | None = None) -> TernaryLayer:
    """E2M-ATQ over 128-column blocks with GPTQ error feedback (spec §3).

    H = mean x xᵀ of the layer's (rotated) calibration inputs; S for stage 2 is H restricted to the
    block (undamped). With gptq=False the weights are quantized block by block with no feedback.
    `log` (optional) receives the per-layer output error after stage 1 and after stage 2.
    Runs on W's device (H is moved there; float64 throughout, as on the CPU); the returned codes
    and scales are on that device too (store.save_quantized moves them to the CPU for packing).
    """
    W = W.clone().to(torch.float64)
    dev = W.device
    m, n = W.shape
    nb = (n + block - 1) // block
    Hd = H.to(device=dev, dtype=torch.float64)
    U = None
    if gptq:
        Hdamp = 2 * Hd + damp * torch.mean(torch.diagonal(2 * Hd)) * torch.eye(n, dtype=torch.float64, device=dev)
        dead = torch.diagonal(Hd) == 0
        Hdamp[dead, dead] = 1.0
        L = torch.linalg.cholesky(Hdamp)
        Hinv = torch.cholesky_inverse(L)
        U = torch.linalg.cholesky(Hinv, upper=True)
    t_all = torch.zeros(m, n, dtype=torch.int8, device=dev)
    mu_all = torch.zeros(m, nb, device=dev)
    al_all = torch.zeros(m, nb, device=dev)
    err1 = err2 = 0.0
    for bi in range(nb):
        b0, b1 = bi * block, min(n, (bi + 1) * block)
        Wb = W[:, b0:b1]
        S = Hd[b0:b1, b0:b1]
        t1, mu1, a1 = e2m_stage1(Wb, iters)
        e1 = output_error(Wb, mu1[:, None] + a1[:, None] * t1, S).sum()
        if stage2:
            a2, mu2 = e2m_stage2(Wb, t1, mu1, a1, S, iters)
            e2 = output_error(Wb, mu2[:, None] + a2[:, None] * t1, S).sum()
        else:
            a2, mu2, e2 = a1, mu1, e1
        err1 += float(e1)
        err2 += float(e2)
        t_all[:, b0:b1] = t1.to(torch.int8)
        mu_all[:, bi] = fp16_round(mu2.to(torch.float32))
        al_all[:, bi] = fp16_round(a2.to(torch.float32))
        if gptq:
            Qb = ternary_dequant(t_all[:, b0:b1], mu_all[:, bi:bi + 1], al_all[:, bi:bi + 1], block).to(torch.float64)
            # GPTQ's in-block recursion, err_j = (w_j - sum_{i<j} err_i U_ij - q_j) / U_jj, is the triangular
            # system Err U_bb = Wb - Qb (the block's codes are fixed before it). One solve replaces the
            # column loop (issue 24: same system, float64; the tiny default's packed weights are unchanged).
            Err = torch.linalg.solve_triangular(U[b0:b1, b0:b1], Wb - Qb, upper=True, left=False)
            W[:, b1:] -= Err @ U[b0:b1, b1:]
    if log is not None:
        log["err_stage1"] = err1
        log["err_stage2"] = err2
    return TernaryLayer(t_all, mu_all, al_all, block)
