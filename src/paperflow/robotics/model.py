"""Latent action model (LAM) for MVP-LAM and the single-view baseline, tiny profile (spec c.1-c.3).

    e(.)     frozen, seeded random conv stem: 64x64x3 -> 8x8 grid x C (C = 64), optionally average-pooled to
             `grid` x `grid`, parameter-free LayerNorm
    encoder  [4 action queries ; proj(e(o_t))] and [4 queries ; proj(e(o_t+k))] -> `n_layers` blocks of
             spatial attention, causal temporal attention (over the 2 frames) and an FFN (pre-LN)
             -> the future frame's queries -> linear d -> d_z = pre-quantisation latent h (4 x d_z)
    VQ       `n_codes` x d_z codebook; z = h + sg(c - h) (straight-through); dead-code reset
    decoder  spatial-only transformer over [up(z) ; proj(e(o_t))]; its last 64 outputs -> C channels
             predict e(o_t+k)

Losses (per sample, masks for missing views; see `lam_loss`):
    mvp:     1/2 sum_v [rec(v<-v) + ||sg(h_v) - c_v||^2 + beta ||h_v - sg(c_v)||^2] + 1/2 sum_{v!=u} rec(v<-u)
    single:  sum_v [rec(v<-v) + VQ terms] with views as independent samples (no cross terms)
Positional encodings are ordinary parameters, so the model runs on any device.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class LAMConfig:
    image_size: int = 64
    feat_channels: int = 64
    grid: int = 8  # stem output grid (8 = spec tiny profile; 4 = average-pooled, 4x fewer tokens)
    d_model: int = 128
    n_heads: int = 4
    n_layers: int = 2
    n_queries: int = 4
    d_z: int = 32
    n_codes: int = 16
    beta: float = 0.25
    stem_seed: int = 1234
    residual: bool = False  # decoder predicts e(o_t+k) - e(o_t) (zero-initialised output): copying is free


    def to_dict(self) -> dict:
        return asdict(self)


class FrozenStem(nn.Module):
    """Seeded random conv stem (stride 4 then 2), frozen: the tiny stand-in for a frozen DINOv2."""

    def __init__(self, cfg: LAMConfig):
        super().__init__()
        g = torch.Generator().manual_seed(cfg.stem_seed)
        c1 = 32
        self.conv1 = nn.Conv2d(3, c1, 4, stride=4)
        self.conv2 = nn.Conv2d(c1, cfg.feat_channels, 2, stride=2)
        with torch.no_grad():
            for conv in (self.conv1, self.conv2):
                fan_in = conv.weight[0].numel()
                conv.weight.copy_(torch.randn(conv.weight.shape, generator=g) * (2.0 / fan_in) ** 0.5)
                conv.bias.zero_()
        for p in self.parameters():
            p.requires_grad_(False)
        self.channels = cfg.feat_channels
        self.grid = cfg.grid

    @torch.no_grad()
    def forward(self, img_uint8: torch.Tensor) -> torch.Tensor:
        """(B,H,W,3) uint8 -> (B, P, C) tokens, P = (H/8)^2."""
        x = img_uint8.permute(0, 3, 1, 2).float() / 127.5 - 1.0
        x = self.conv2(F.gelu(self.conv1(x)))
        if x.shape[-1] != self.grid:
            x = F.adaptive_avg_pool2d(x, self.grid)
        x = x.flatten(2).transpose(1, 2)
        return F.layer_norm(x, (x.shape[-1],))


class Attention(nn.Module):
    def __init__(self, d: int, h: int):
        super().__init__()
        self.h = h
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def forward(self, x: torch.Tensor, causal: bool = False) -> torch.Tensor:
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.h, D // self.h).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return self.out(y.transpose(1, 2).reshape(B, T, D))


class STBlock(nn.Module):
    """Spatial attention, then causal temporal attention, then FFN (all pre-LN)."""

    def __init__(self, d: int, h: int, temporal: bool = True):
        super().__init__()
        self.temporal = temporal
        self.n1, self.sa = nn.LayerNorm(d), Attention(d, h)
        if temporal:
            self.n2, self.ta = nn.LayerNorm(d), Attention(d, h)
        self.n3 = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: (B, T, S, D)
        B, T, S, D = x.shape
        y = x.reshape(B * T, S, D)
        y = y + self.sa(self.n1(y))
        x = y.view(B, T, S, D)
        if self.temporal:
            y = x.transpose(1, 2).reshape(B * S, T, D)
            y = y + self.ta(self.n2(y), causal=True)
            x = y.view(B, S, T, D).transpose(1, 2)
        return x + self.ff(self.n3(x))


class VectorQuantizer(nn.Module):
    def __init__(self, n_codes: int, d: int, beta: float):
        super().__init__()
        self.codebook = nn.Parameter(torch.randn(n_codes, d) * 0.5)
        self.beta = beta
        self.register_buffer("usage", torch.zeros(n_codes))

    def forward(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """h (B, Q, d) -> z_q straight-through, per-sample VQ loss (B,), code indices (B, Q)."""
        flat = h.reshape(-1, h.shape[-1])
        d2 = (flat.pow(2).sum(1, keepdim=True) - 2 * flat @ self.codebook.t() + self.codebook.pow(2).sum(1)[None])
        idx = d2.argmin(1)
        c = self.codebook[idx].view_as(h)
        if self.training:
            self.usage += torch.bincount(idx, minlength=self.codebook.shape[0]).float()
        codebook_loss = (h.detach() - c).pow(2).mean((1, 2))
        commit = (h - c.detach()).pow(2).mean((1, 2))
        z = h + (c - h).detach()
        return z, codebook_loss + self.beta * commit, idx.view(h.shape[:2])

    @torch.no_grad()
    def reset_dead(self, gen: torch.Generator) -> int:
        """Replace every code used < 1 time since the last reset by a copy of a random live code."""
        dead = self.usage < 1
        live = (~dead).nonzero().flatten()
        n = int(dead.sum())
        if n and len(live):
            pick = live[torch.randint(len(live), (n,), generator=gen)]
            self.codebook.data[dead] = self.codebook.data[pick] + 0.01 * torch.randn(n, self.codebook.shape[1],
                                                                                     generator=gen)
        self.usage.zero_()
        return n


class LAM(nn.Module):
    def __init__(self, cfg: LAMConfig):
        super().__init__()
        self.cfg = cfg
        d, P, C = cfg.d_model, cfg.grid**2, cfg.feat_channels
        self.stem = FrozenStem(cfg)
        self.enc_in = nn.Linear(C, d)
        self.enc_pos = nn.Parameter(torch.randn(1, 1, cfg.n_queries + P, d) * 0.02)
        self.enc_time = nn.Parameter(torch.randn(1, 2, 1, d) * 0.02)
        self.queries = nn.Parameter(torch.randn(1, 1, cfg.n_queries, d) * 0.02)
        self.enc = nn.ModuleList([STBlock(d, cfg.n_heads) for _ in range(cfg.n_layers)])
        self.enc_norm = nn.LayerNorm(d)
        self.to_z = nn.Linear(d, cfg.d_z)
        self.vq = VectorQuantizer(cfg.n_codes, cfg.d_z, cfg.beta)
        self.z_up = nn.Linear(cfg.d_z, d)
        self.dec_in = nn.Linear(C, d)
        self.dec_pos = nn.Parameter(torch.randn(1, 1, cfg.n_queries + P, d) * 0.02)
        self.dec = nn.ModuleList([STBlock(d, cfg.n_heads, temporal=False) for _ in range(cfg.n_layers)])
        self.dec_norm = nn.LayerNorm(d)
        self.dec_out = nn.Linear(d, C)
        if cfg.residual:
            nn.init.zeros_(self.dec_out.weight)
            nn.init.zeros_(self.dec_out.bias)

    def encode(self, f0: torch.Tensor, f1: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Features of o_t and o_t+k (B, P, C) -> (z_q, h, vq_loss per sample, codes)."""
        B = f0.shape[0]
        x = self.enc_in(torch.stack([f0, f1], 1))  # B,2,P,d
        q = self.queries.expand(B, 2, -1, -1)
        x = torch.cat([q, x], 2) + self.enc_pos + self.enc_time
        for blk in self.enc:
            x = blk(x)
        h = self.to_z(self.enc_norm(x[:, 1, : self.cfg.n_queries]))
        z, vq_loss, codes = self.vq(h)
        return z, h, vq_loss, codes

    def decode(self, f0: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        x = torch.cat([self.z_up(z), self.dec_in(f0)], 1)[:, None] + self.dec_pos
        for blk in self.dec:
            x = blk(x)
        out = self.dec_out(self.dec_norm(x[:, 0, self.cfg.n_queries:]))
        return f0 + out if self.cfg.residual else out


def rec_loss(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return (pred - target).pow(2).mean((1, 2))


def lam_loss(model: LAM, f0: torch.Tensor, f1: torch.Tensor, mask: torch.Tensor, mode: str) -> tuple[
        torch.Tensor, dict[str, float]]:
    """f0, f1: (B, V, P, C) features of o_t / o_t+k per view; mask (B, V) float (view usable).

    mode "mvp": self + cross-view reconstruction + VQ; "single": self-view + VQ only.
    Terms involving a missing view are dropped and each sample is rescaled by (#terms / #kept).
    """
    B, V = mask.shape
    zs, vqs = [], []
    for v in range(V):
        z, _, vq, _ = model.encode(f0[:, v], f1[:, v])
        zs.append(z)
        vqs.append(vq)
    total = torch.zeros(B, device=mask.device)
    kept = torch.zeros(B, device=mask.device)
    n_terms = 0
    logs = {"rec_self": 0.0, "rec_cross": 0.0, "vq": 0.0}
    for v in range(V):
        self_term = rec_loss(model.decode(f0[:, v], zs[v]), f1[:, v]) + vqs[v]
        w = 0.5 if mode == "mvp" else 1.0
        total = total + w * mask[:, v] * self_term
        kept = kept + mask[:, v]
        n_terms += 1
        logs["rec_self"] += float((self_term - vqs[v]).detach().mean()) / V
        logs["vq"] += float(vqs[v].detach().mean()) / V
    if mode == "mvp":
        cross = []
        for v in range(V):
            for u in range(V):
                if u == v:
                    continue
                m = mask[:, v] * mask[:, u]
                r = rec_loss(model.decode(f0[:, v], zs[u]), f1[:, v])
                total = total + 0.5 * m * r
                kept = kept + m
                n_terms += 1
                cross.append(float(r.detach().mean()))
        logs["rec_cross"] = sum(cross) / max(len(cross), 1)
    elif mode != "single":
        raise ValueError(f"unknown LAM mode '{mode}'")
    per_sample = total * n_terms / kept.clamp(min=1)
    loss = per_sample[kept > 0].mean() if bool((kept > 0).any()) else total.sum() * 0
    logs["loss"] = float(loss.detach())
    return loss, logs
