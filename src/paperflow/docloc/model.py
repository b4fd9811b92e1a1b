"""The relevance-potential network and the five trained arms (how each turns potentials into densities ρ_k).

PotentialNet [choice, not the spec's tiny model]: the spec's 3-layer dilated CNN over cells cannot see a
block's section header (keyword-matching level, exact match ≈ 1/(1 + distractors); README). So the
potential gets global context from the OCR lines first:

    line tokens (mean word embedding ⊕ box ⊕ lexical match with each question word ⊕ present flag)
      → bidirectional transformer (`paperflow.nn.transformer`, RoPE over reading order)
      → each line's contextual vector scattered onto the grid cells the line covers (a learned vector
        for empty cells)
      → the spec's dilated CNN over [scattered vectors ⊕ coordinates ⊕ ρ_{k−1} ⊕ stage one-hot] → V_θ.

The line encoder runs once per page; the CNN head once per stage (weights shared over the K stages).

Arms (spec §2–3; all [recon]):
- single : one stage, ρ = softmax(−V), KL to the sharp mask                       (the K → ∞ limit)
- now2   : K stages fed ρ_{k−1}, ρ_k = softmax(−V_k), Σ_k KL(ρ_k ‖ ρ*_k), blurred targets (τ = ∞)
- jko_b  : now2 + (1/2τ) W_ε²(ρ_k, stopgrad ρ_{k−1})                               (JKO-consistency)
- jko_a  : ρ_k = entropic JKO step from ρ_{k−1} under V_k, Σ_k S_ε(ρ_k, ρ*_k)       (unrolled JKO);
           V_k shifted to min 0 and softly bounded by `v_range` (`bounded_potential`)
The W_ε² and S_ε terms are entropic OT values (dual form) whose gradients come from their Sinkhorn dual
potentials (envelope theorem, `jko.ot_eps_envelope`); the JKO steps of jko_a are unrolled under autograd.
- poe    : a coarse head (to ρ*_1) and a fine head (to the sharp mask) on one line encoder, fused as
           ρ ∝ ρ_c^γ ⊙ ρ_f with γ chosen on validation; heads narrower so the parameters match jko_b's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from paperflow.docloc.jko import Grid, JKOParams, jko_step, ot_eps_envelope, sinkhorn_divergence_envelope
from paperflow.nn.transformer import Transformer, TransformerConfig

ARMS = ("single", "now2", "jko_b", "jko_a", "poe")
STAGED = ("now2", "jko_b", "jko_a")
FLOOR = 1e-6
GAMMA_GRID = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)


class Head(nn.Module):
    """Dilated CNN over [scattered line vectors ⊕ coordinates ⊕ ρ_{k−1} ⊕ stage one-hot] → V (B, H, W)."""

    def __init__(self, d_in: int, channels: int, dilations: Sequence[int], n_stages: int) -> None:
        super().__init__()
        self.n_stages = n_stages
        c = d_in + 2 + 1 + n_stages
        self.convs = nn.ModuleList()
        for d in dilations:
            self.convs.append(nn.Conv2d(c, channels, 3, padding=d, dilation=d))
            c = channels
        self.out = nn.Conv2d(c, 1, 1)

    def forward(self, grid_feats: torch.Tensor, rho_prev: torch.Tensor, stage: int) -> torch.Tensor:
        B, _, H, W = grid_feats.shape
        dev = grid_feats.device
        ys = (torch.arange(H, dtype=grid_feats.dtype, device=dev) + 0.5) / H
        xs = (torch.arange(W, dtype=grid_feats.dtype, device=dev) + 0.5) / W
        yy, xx = torch.meshgrid(ys, xs, indexing="ij")
        coords = torch.stack([yy, xx])[None].expand(B, 2, H, W)
        st = torch.zeros(B, self.n_stages, H, W, dtype=grid_feats.dtype, device=dev)
        st[:, stage] = 1.0
        x = torch.cat([grid_feats, coords, (rho_prev.to(grid_feats.dtype) * (H * W))[:, None], st], 1)
        for conv in self.convs:
            x = F.gelu(conv(x))
        return self.out(x)[:, 0]


class LineEncoder(nn.Module):
    """OCR-line tokens → contextual vectors → scattered onto the cell grid (B, d, H, W)."""

    def __init__(self, token_dim: int, d_model: int, n_layers: int, n_heads: int) -> None:
        super().__init__()
        self.tf = Transformer(TransformerConfig(d_model=d_model, n_heads=n_heads, n_layers=n_layers,
                                                input_dim=token_dim, causal=False, d_ff=2 * d_model))
        self.empty = nn.Parameter(torch.zeros(d_model))

    def forward(self, tokens: torch.Tensor, line_id: torch.Tensor) -> torch.Tensor:
        present = tokens[..., -1] > 0.5  # the last token feature is the "line present" flag
        h = self.tf(tokens, padding_mask=present).last_hidden  # (B, L, d)
        B, L, d = h.shape
        table = torch.cat([h, self.empty.expand(B, 1, d)], 1)  # index L = empty cell
        idx = torch.where(line_id < 0, torch.full_like(line_id, L), line_id).long()  # (B, H, W)
        g = torch.gather(table, 1, idx.reshape(B, -1, 1).expand(-1, -1, d))
        return g.reshape(B, *line_id.shape[1:], d).permute(0, 3, 1, 2)


class PotentialNet(nn.Module):
    def __init__(self, token_dim: int, p: Mapping[str, Any], heads: Mapping[str, tuple[int, int]]) -> None:
        """heads: name → (channels, n_stages)."""
        super().__init__()
        d = int(p["d_model"])
        self.enc = LineEncoder(token_dim, d, int(p["layers"]), int(p["heads"]))
        self.heads = nn.ModuleDict({k: Head(d, c, tuple(p["dilations"]), s) for k, (c, s) in heads.items()})


def n_params(m: nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())


def _heads(arm: str, token_dim: int, p: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    K, ch = int(p["stages"]), int(p["channels"])
    if arm != "poe":
        return {"main": (ch, K if arm in STAGED else 1)}
    # PoE: two single-stage heads whose total parameter count is closest to jko_b's (spec §3)
    target = n_params(PotentialNet(token_dim, p, {"main": (ch, K)}))
    c = min(range(2, ch + 1), key=lambda c: abs(n_params(PotentialNet(token_dim, p, {"coarse": (c, 1), "fine": (c, 1)}))
                                                - target))
    return {"coarse": (c, 1), "fine": (c, 1)}


def build(arm: str, token_dim: int, p: Mapping[str, Any]) -> PotentialNet:
    if arm not in ARMS:
        raise ValueError(f"unknown arm {arm!r} (known: {', '.join(ARMS)})")
    return PotentialNet(token_dim, p, _heads(arm, token_dim, p))


# ---- targets ---------------------------------------------------------------------------------------------

def _blur_matrix(n: int, sigma: float) -> torch.Tensor:
    c = (torch.arange(n, dtype=torch.float64) + 0.5) / n
    return torch.exp(-(c[:, None] - c[None, :]) ** 2 / (2 * sigma ** 2))


def targets(mask: torch.Tensor, sigmas: Sequence[float | None]) -> list[torch.Tensor]:
    """ρ*_k: the evidence mask blurred with σ_k page units (None: sharp), + FLOOR, normalised (float64)."""
    m = mask.to(torch.float64)
    H, W = m.shape[-2:]
    out = []
    for s in sigmas:
        t = m if s is None else _blur_matrix(H, s) @ m @ _blur_matrix(W, s).T
        t = t / t.sum((-2, -1), keepdim=True).clamp_min(1e-300) + FLOOR
        out.append(t / t.sum((-2, -1), keepdim=True))
    return out


def stage_sigmas(K: int, base: float) -> list[float]:
    """σ_k = base · 2^{−k}, k = 1..K (spec: base 0.2 page units)."""
    return [base * 2.0 ** (-k) for k in range(1, K + 1)]


def bounded_potential(V: torch.Tensor, c: float) -> torch.Tensor:
    """V − min V per page, softly bounded to [0, c) (c·tanh(·/c)) for the unrolled JKO step: the scalings'
    exponents stay within ±σc/(1 + σβ), so float64 neither overflows nor underflows to an all-zero ρ
    (an unbounded learned V made the step return NaN within 25 training steps). Adding a constant to V
    does not change the step's result; the bound only caps contrasts above c (e^{−c/β} relative mass)."""
    V = V.to(torch.float64)
    V = V - V.flatten(-2).amin(-1)[..., None, None]
    return c * torch.tanh(V / c)


def _softmax2d(V: torch.Tensor) -> torch.Tensor:
    return torch.softmax(-V.to(torch.float64).flatten(-2), -1).reshape(V.shape)


def kl(rho: torch.Tensor, target: torch.Tensor, direction: str) -> torch.Tensor:
    """reverse: KL(ρ ‖ ρ*) = F(ρ) with V* = −log ρ*, β = 1 (spec's L_B); forward: KL(ρ* ‖ ρ) (cross-entropy)."""
    r = rho.to(torch.float64).clamp_min(1e-300)
    if direction == "forward":
        return (target * (torch.log(target) - torch.log(r))).sum((-2, -1))
    return (r * (torch.log(r) - torch.log(target))).sum((-2, -1))


# ---- forward passes ----------------------------------------------------------------------------------------

def densities(arm: str, net: PotentialNet, tokens: torch.Tensor, line_id: torch.Tensor, p: Mapping[str, Any],
              gamma: float = 1.0) -> list[torch.Tensor]:
    """ρ_1..ρ_K of an arm (float64; PoE: [ρ_coarse, ρ_fine, ρ_fused]; single: [ρ])."""
    g = net.enc(tokens, line_id)
    B, _, H, W = g.shape
    uni = torch.full((B, H, W), 1.0 / (H * W), dtype=torch.float64, device=g.device)
    if arm == "single":
        return [_softmax2d(net.heads["main"](g, uni, 0))]
    if arm == "poe":
        lc = torch.log_softmax(-net.heads["coarse"](g, uni, 0).to(torch.float64).flatten(-2), -1)
        lf = torch.log_softmax(-net.heads["fine"](g, uni, 0).to(torch.float64).flatten(-2), -1)
        fused = torch.softmax(gamma * lc + lf, -1).reshape(B, H, W)
        return [lc.exp().reshape(B, H, W), lf.exp().reshape(B, H, W), fused]
    rhos: list[torch.Tensor] = []
    prev = uni
    jp = JKOParams(p["tau"], p["eps"], p["beta"], p["sinkhorn_iters"])
    kernels = tuple(k.to(g.device) for k in Grid(H, W).kernels(p["eps"])) if arm == "jko_a" else None
    for k in range(int(p["stages"])):
        V = net.heads["main"](g, prev.detach() if arm == "jko_b" else prev, k)
        if arm == "jko_a":
            rho = jko_step(prev, bounded_potential(V, float(p["v_range"])), jp, kernels=kernels)
            rho = rho / rho.sum((-2, -1), keepdim=True)
        else:
            rho = _softmax2d(V)
        rhos.append(rho)
        prev = rho
    return rhos


def loss(arm: str, net: PotentialNet, tokens: torch.Tensor, line_id: torch.Tensor, mask: torch.Tensor,
         p: Mapping[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
    K, direction = int(p["stages"]), p["kl_direction"]
    sig = stage_sigmas(K, p["target_sigma"])
    if arm == "single":
        (rho,) = densities(arm, net, tokens, line_id, p)
        (sharp,) = targets(mask, [None])
        total = kl(rho, sharp, direction).mean()
        return total, {"kl": float(total.detach())}
    if arm == "poe":
        rc, rf, _ = densities(arm, net, tokens, line_id, p)
        coarse_t, sharp = targets(mask, [sig[0], None])
        lc, lf = kl(rc, coarse_t, direction).mean(), kl(rf, sharp, direction).mean()
        return lc + lf, {"kl_coarse": float(lc.detach()), "kl_fine": float(lf.detach())}
    rhos = densities(arm, net, tokens, line_id, p)
    tgts = targets(mask, sig)
    logs: dict[str, float] = {}
    total = torch.zeros((), dtype=torch.float64)
    if arm == "jko_a":
        for k, (r, t) in enumerate(zip(rhos, tgts)):
            s = sinkhorn_divergence_envelope(r, t, p["eps"], p["sinkhorn_iters"]).mean()
            total = total + s
            logs[f"S_{k + 1}"] = float(s.detach())
        return total * p["jko_a_scale"], logs
    B, H, W = mask.shape
    prev = torch.full((B, H, W), 1.0 / (H * W), dtype=torch.float64, device=mask.device)
    kernels = tuple(k.to(mask.device) for k in Grid(H, W).kernels(p["eps"]))
    for k, (r, t) in enumerate(zip(rhos, tgts)):
        kk = kl(r, t, direction).mean()
        total = total + kk
        logs[f"kl_{k + 1}"] = float(kk.detach())
        if arm == "jko_b":
            w2 = ot_eps_envelope(r, prev.detach(), p["eps"], p["sinkhorn_iters"], kernels).mean()
            total = total + w2 / (2 * p["tau"])
            logs[f"w2_{k + 1}"] = float(w2.detach())
        prev = r
    return total, logs
