"""The tiny grounding model: image encoder (the spec's 3-layer CNN, or the shared tiny ViT's patch tokens)
-> C x H x W map; frozen MiniLM token states -> trainable linear
map to C; one alignment head (heads.py) -> score map S [B, P, H, W]."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from paperflow.expalign.heads import SentenceBNHead, make_head


class CNNEncoder(nn.Module):
    """3 conv layers, strides 2, 2, 1: a 32 x 32 image -> an 8 x 8 x dim map (the spec's image side).
    Downsampling first keeps a training step cheap on CPU (most of the cost is the full-resolution conv)."""

    def __init__(self, dim: int = 64, width: int = 32) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, width, 3, stride=2, padding=1), nn.GELU(),
            nn.Conv2d(width, dim, 3, stride=2, padding=1), nn.GELU(),
            nn.Conv2d(dim, dim, 3, padding=1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class ViTEncoder(nn.Module):
    """The shared tiny ViT (`paperflow.nn.vision.TinyViT`): its projected patch tokens as a grid x grid map."""

    def __init__(self, dim: int, image_size: int, patch_size: int, n_layers: int, n_heads: int) -> None:
        super().__init__()
        from paperflow.nn.vision import TinyViT, ViTConfig

        self.cfg = ViTConfig(image_size=image_size, patch_size=patch_size, d_model=dim, n_heads=n_heads,
                             n_layers=n_layers, embed_dim=dim)
        self.vit = TinyViT(self.cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p = self.vit(x).patches  # [B, N, E], row-major
        g = self.cfg.grid
        return p.transpose(1, 2).reshape(p.shape[0], p.shape[2], g, g)


class GroundingNet(nn.Module):
    def __init__(self, cfg: Mapping[str, Any], head_kind: str, text_dim: int) -> None:
        super().__init__()
        dim = int(cfg["dim"])
        if cfg["encoder"] == "cnn":
            self.encoder: nn.Module = CNNEncoder(dim, int(cfg["width"]))
        else:
            self.encoder = ViTEncoder(dim, int(cfg["image_size"]), int(cfg["patch_size"]), int(cfg["vit_layers"]),
                                      int(cfg["vit_heads"]))
        # no bias: padding tokens (zero vectors) stay exactly zero, as the head expects
        self.text_proj = nn.Linear(text_dim, dim, bias=False)
        self.head = make_head(head_kind, dim, dict(cfg))
        self.sentence = isinstance(self.head, SentenceBNHead)

    @staticmethod
    def prep(images: torch.Tensor) -> torch.Tensor:
        """uint8 [B, S, S, 3] -> float [B, 3, S, S] in [-0.5, 0.5]."""
        return images.permute(0, 3, 1, 2).float() / 255.0 - 0.5

    def text(self, txt: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        if self.sentence:
            return self.text_proj(txt["sentence"]), txt["mask"]
        return self.text_proj(txt["tokens"]), txt["mask"]

    def forward(self, images: torch.Tensor, txt: Mapping[str, torch.Tensor]) -> torch.Tensor:
        w, mask = self.text(txt)
        return self.head(self.encoder(self.prep(images)), w, mask)
