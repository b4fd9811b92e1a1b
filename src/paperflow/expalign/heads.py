"""Region-text alignment heads: image map X [B, C, H, W] and prompts -> score map S [B, P, H, W].

- :class:`SentenceBNHead` (arm A, YOLO-World's BN contrastive head): BN(X) . L2-normalised sentence
  embedding, times exp(logit_scale) (init -1), plus a bias (init -10).
- :class:`TokenHead` with ``pool`` one of
  - ``"expect"`` (arms C-F, ExpAlign's TokenLevelBNContrastiveHead): s[p,l,r] = <BN(X)_r, w_pl>;
    m[p,l] = mean_r s; a = softmax_l m (padding -> -1e4); S = exp(kappa) sum_l a_l s[p,l,r] + b,
    kappa init 0.07 (a log-scale), b init -10;
  - ``"max"`` (arm B): S = exp(kappa) max_l s[p,l,r] + b over real tokens;
  - ``"mean"``: uniform weights over real tokens (the reduction the unit test checks).
Token embeddings w [P, L, C] are shared by the batch (every image sees the whole vocabulary); padding
tokens are given by `mask` [P, L] (their w rows are zero, as in the official code).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

NEG = -1e4  # the official code's fill value for padding tokens before the token softmax


class SentenceBNHead(nn.Module):
    def __init__(self, dim: int, logit_scale_init: float = -1.0, bias_init: float = -10.0) -> None:
        super().__init__()
        self.bn = nn.BatchNorm2d(dim)
        self.logit_scale = nn.Parameter(torch.tensor(float(logit_scale_init)))
        self.bias = nn.Parameter(torch.tensor(float(bias_init)))

    def forward(self, x: torch.Tensor, w: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x [B, C, H, W]; w [P, C] sentence embeddings (normalised here)."""
        w = F.normalize(w, dim=-1)
        return torch.einsum("bchw,pc->bphw", self.bn(x), w) * self.logit_scale.exp() + self.bias

    def token_weights(self, x: torch.Tensor, w: torch.Tensor, mask: torch.Tensor | None = None) -> None:
        return None


class TokenHead(nn.Module):
    def __init__(self, dim: int, pool: str = "expect", temperature_init: float = 0.07,
                 bias_init: float = -10.0) -> None:
        super().__init__()
        if pool not in ("expect", "max", "mean"):
            raise ValueError(f"unknown token pooling {pool!r}")
        self.pool = pool
        self.dim = dim
        self.bn = nn.BatchNorm2d(dim)
        self.temperature = nn.Parameter(torch.tensor(float(temperature_init)))
        self.bias = nn.Parameter(torch.tensor(float(bias_init)))
        self._fused: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None

    # s[b, p, l, r] for every token (BN applied, or the fused 1x1 conv)
    def token_sims(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        B, C, H, W = x.shape
        if self._fused is not None:
            fw, fb, _ = self._fused
            P, L = w.shape[:2] if w is not None else self._fused[2].shape
            t = F.conv2d(x, fw, bias=fb)  # [B, P*L, H, W]
            return t.view(B, P, L, H * W)
        return torch.einsum("bcr,plc->bplr", self.bn(x).flatten(2), w)

    def token_weights(self, x: torch.Tensor, w: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """a[b, p, l]: the expectation head's token softmax over region-mean similarities."""
        return self._weights(self.token_sims(x, w), mask)

    def _weights(self, s: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        valid = mask.bool()[None]  # [1, P, L]
        if self.pool == "expect":
            m = s.mean(-1).masked_fill(~valid, NEG)
            return torch.softmax(m, dim=-1)
        v = valid.to(s.dtype).expand(s.shape[0], -1, -1)
        return v / v.sum(-1, keepdim=True).clamp(min=1)

    def forward(self, x: torch.Tensor, w: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """x [B, C, H, W]; w [P, L, C] token embeddings (padding rows zero); mask [P, L]."""
        B, C, H, W = x.shape
        s = self.token_sims(x, w)  # [B, P, L, HW]
        if self.pool == "max":
            agg = s.masked_fill(~mask.bool()[None, :, :, None], float("-inf")).amax(2)
        else:
            agg = (s * self._weights(s, mask)[..., None]).sum(2)
        return (agg * self.temperature.exp() + self.bias).view(B, -1, H, W)

    @torch.no_grad()
    def fuse(self, w: torch.Tensor) -> None:
        """Fold BN (running statistics) and the token embeddings into one 1x1 convolution with P*L output
        channels; the token softmax is kept. Call in eval mode; `forward` then ignores BN."""
        P, L, C = w.shape
        bn = self.bn
        scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
        shift = bn.bias - scale * bn.running_mean
        flat = w.reshape(P * L, C)
        self._fused = ((flat * scale[None]).view(P * L, C, 1, 1), flat @ shift, torch.zeros(P, L))

    def unfuse(self) -> None:
        self._fused = None


def make_head(kind: str, dim: int, cfg: dict) -> nn.Module:
    if kind == "sentence":
        return SentenceBNHead(dim, cfg["sentence_logit_scale_init"], cfg["bias_init"])
    return TokenHead(dim, kind, cfg["temperature_init"], cfg["bias_init"])
