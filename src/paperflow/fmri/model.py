"""CortexMAE-style masked autoencoder over patch tokens (flat patches, parcels or volume cubes).

Input x: (B, T, P, S) — T frames, P patches of S positions (zeros where invalid); `valid` (P, S)
marks positions that carry data. Tubelets of t frames -> tokens (T/t * P, t*S) -> linear embed +
separable learned position (spatial + temporal); one CLS token; pre-norm ViT blocks.
Tube masking: one spatial mask per sample shared over time; n_vis = int((1 - r) * P) counted over
the FULL grid (background patches included), drawn among non-empty patches.
Decoder: mask tokens carry a decoder position, visible tokens none; predicts every other frame of
each tubelet (t_pred_stride = 2). Loss: mean squared error over valid positions of masked patches.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def n_visible(n_grid: int, mask_ratio: float) -> int:
    """int((1 - r) * N) in float64, as the reference code does (490 -> 48, 136 -> 13)."""
    return int((1.0 - float(mask_ratio)) * n_grid)


def draw_visible(B: int, nonempty: torch.Tensor, n_vis: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """(B, n_vis) indices of visible patches, uniform among `nonempty` (P,) patches.

    The noise is drawn on the generator's device (the CPU when `generator` is None or a plain
    `torch.Generator()`, from the global CPU stream) and the indices stay there; callers move them
    to their model's device. On a CPU-only run this is exactly the previous draw
    (`torch.rand(B, P, generator=g)`, background filled with 2.0, argsort)."""
    dev = generator.device if generator is not None else torch.device("cpu")
    noise = torch.rand(B, nonempty.shape[0], generator=generator, device=dev)
    noise = noise.masked_fill(~nonempty.to(dev), 2.0)
    return noise.argsort(dim=1)[:, :n_vis]


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, mlp_ratio: float = 4.0):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, int(dim * mlp_ratio)), nn.GELU(), nn.Linear(int(dim * mlp_ratio), dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, N, C = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, N, C)
        x = x + self.proj(a)
        return x + self.mlp(self.norm2(x))


class MAE(nn.Module):
    def __init__(self, n_patches: int, patch_size: int, valid: np.ndarray, n_frames: int = 16, t_patch: int = 4,
                 dim: int = 192, depth: int = 3, heads: int = 3, dec_dim: int = 128, dec_depth: int = 1,
                 dec_heads: int = 4, mask_ratio: float = 0.9, t_pred_stride: int = 2):
        super().__init__()
        self.P, self.S, self.T, self.t = n_patches, patch_size, n_frames, t_patch
        self.nt = n_frames // t_patch
        self.stride = t_pred_stride
        self.mask_ratio = mask_ratio
        self.register_buffer("valid", torch.as_tensor(valid, dtype=torch.bool))
        self.register_buffer("nonempty", self.valid.any(dim=1))
        self.embed = nn.Linear(t_patch * patch_size, dim)
        self.pos_s = nn.Parameter(torch.zeros(1, 1, n_patches, dim))
        self.pos_t = nn.Parameter(torch.zeros(1, self.nt, 1, dim))
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.dec_embed = nn.Linear(dim, dec_dim)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, dec_dim))
        self.dec_pos_s = nn.Parameter(torch.zeros(1, 1, n_patches, dec_dim))
        self.dec_pos_t = nn.Parameter(torch.zeros(1, self.nt, 1, dec_dim))
        self.dec_blocks = nn.ModuleList([Block(dec_dim, dec_heads) for _ in range(dec_depth)])
        self.dec_norm = nn.LayerNorm(dec_dim, eps=1e-6)
        self.n_pred = t_patch // t_pred_stride
        self.head = nn.Linear(dec_dim, self.n_pred * patch_size)
        self._init()

    def _init(self) -> None:
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)
        for p in (self.pos_s, self.pos_t, self.cls, self.mask_token, self.dec_pos_s, self.dec_pos_t):
            nn.init.trunc_normal_(p, std=0.02)
        with torch.no_grad():
            self.head.weight.mul_(0.0)

    # (B, T, P, S) -> (B, nt, P, t*S)
    def tubelets(self, x: torch.Tensor) -> torch.Tensor:
        B = x.shape[0]
        return x.reshape(B, self.nt, self.t, self.P, self.S).permute(0, 1, 3, 2, 4).reshape(B, self.nt, self.P, self.t * self.S)

    def sample_visible(self, B: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """(B, n_vis) patch indices, uniform among non-empty patches, on the model's device.

        Drawn by `draw_visible` on the generator's device (the CPU for a plain `torch.Generator()`),
        then moved: the same seed gives the same masks whatever device the model sits on, and a CPU
        generator never meets a CUDA tensor (torch raises on that)."""
        n_vis = n_visible(self.P, self.mask_ratio)
        return draw_visible(B, self.nonempty, n_vis, generator).to(self.valid.device)

    def encode(self, x: torch.Tensor, vis: torch.Tensor | None = None) -> torch.Tensor:
        """x (B, T, P, S); vis (B, n) patch indices (None = all non-empty patches).
        Returns (B, 1 + nt*n, dim) with CLS first."""
        B = x.shape[0]
        if vis is None:
            vis = torch.nonzero(self.nonempty).squeeze(1).expand(B, -1)
        # only the visible tubelets are embedded (issue 24): the same per-token arithmetic as embedding all
        # P patches and gathering after, without the 90 % of the embedding work that masking discards
        # (15 % of a volume training step); gradients are sums over fewer zero rows, so float-level differences
        tub = self.tubelets(x)  # (B, nt, P, t*S)
        n, D = vis.shape[1], self.pos_s.shape[-1]
        tub = torch.gather(tub, 2, vis[:, None, :, None].expand(B, self.nt, n, tub.shape[-1]))
        pos_s = torch.gather(self.pos_s.expand(B, -1, -1, -1), 2, vis[:, None, :, None].expand(B, 1, n, D))
        tok = (self.embed(tub) + pos_s + self.pos_t).reshape(B, -1, D)  # (B, nt * n, dim)
        h = torch.cat([self.cls.expand(B, -1, -1), tok], dim=1)
        for blk in self.blocks:
            h = blk(h)
        return self.norm(h)

    def forward(self, x: torch.Tensor, vis: torch.Tensor | None = None,
                generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Returns (loss, pred (B, nt, P, n_pred, S), visible (B, P) bool)."""
        B = x.shape[0]
        if vis is None:
            vis = self.sample_visible(B, generator)
        n = vis.shape[1]
        h = self.encode(x, vis)
        d = self.dec_embed(h)
        cls, dv = d[:, :1], d[:, 1:].reshape(B, self.nt, n, -1)
        full = (self.mask_token + self.dec_pos_s + self.dec_pos_t).expand(B, -1, -1, -1).clone()
        idx = vis[:, None, :, None].expand(B, self.nt, n, full.shape[-1])
        # visible tokens: no decoder position (no_decode_pos). Under fp16/bf16 autocast (pretrain on CUDA)
        # dv comes out of a Linear in half precision while `full` (parameter sums) stays float32, and
        # scatter needs one dtype; on plain float32 runs the cast is a no-op.
        full = full.scatter(2, idx, dv.to(full.dtype))
        z = torch.cat([cls, full.reshape(B, self.nt * self.P, -1)], dim=1)
        for blk in self.dec_blocks:
            z = blk(z)
        pred = self.head(self.dec_norm(z[:, 1:])).reshape(B, self.nt, self.P, self.n_pred, self.S)
        visible = torch.zeros(B, self.P, dtype=torch.bool, device=x.device).scatter(1, vis, True)
        return self.masked_loss(pred, x, visible), pred, visible

    def masked_loss(self, pred: torch.Tensor, x: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
        """Mean squared error over valid positions of masked patches on the predicted frames
        (every `stride`-th frame of each tubelet)."""
        B = x.shape[0]
        target = x.reshape(B, self.nt, self.t, self.P, self.S)[:, :, ::self.stride].permute(0, 1, 3, 2, 4)
        # the mask stays broadcast (B, 1, P, 1, S) instead of materialised at pred's size: the same products
        # and the same sum; its count times nt * n_pred is the expanded mask's sum (an exact integer in float32)
        m = (self.valid[None, None, :, None, :] & ~visible[:, None, :, None, None]).float()
        count = m.sum() * (pred.shape[1] * pred.shape[3])
        return ((pred - target) ** 2 * m).sum() / count.clamp_min(1.0)


def transform_clip(clip: np.ndarray, clip_value: float = 3.0) -> np.ndarray:
    """Per-frame spatial z-score over the valid values, then clip to +-clip_value. clip (T, D)."""
    c = clip.astype(np.float32)
    m = c.mean(axis=1, keepdims=True)
    s = c.std(axis=1, keepdims=True)
    return np.clip((c - m) / np.where(s > 1e-6, s, 1.0), -clip_value, clip_value)


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim < 2 or "pos" in name or "cls" in name or "token" in name else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
